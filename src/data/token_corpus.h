// TokenCorpus: training and validation windows read from two memory-mapped token files (nanoGPT
// or llm.c format; data/token_file.h), with the vocabulary from data.vocab_size or the meta.json /
// meta.pkl beside them. Text tokenized with SentencePiece is read the same way from its cache.
#pragma once
#include "data/corpus.h"
#include "data/token_file.h"
#include "data/token_meta.h"

namespace poslab {

class TokenCorpus : public TextCorpus {
 public:
  // `train`, `val`: token files; `meta`: what was found beside them; `run_tokenizer` (evaluating or
  // resuming a run): the vocabulary the model was trained with, else nullptr.
  TokenCorpus(TokenFile train, TokenFile val, const TokenMeta& meta, const Config& config, const Tokenizer* run_tokenizer);
  int64_t split_tokens(Split split) const override { return file(split).size(); }
  torch::Tensor windows(Split split, const std::vector<int64_t>& starts, int64_t len) const override;
  const TokenFile& file(Split split) const { return split == Split::Train ? train_ : val_; }

 private:
  TokenFile train_, val_;
};

// data.kind tokens, or text with data.tokenizer: opens, checks and returns the corpus. Every
// refusal (format, size, vocabulary, ids) is a ConfigError naming the file, before any training.
std::unique_ptr<Corpus> make_token_corpus(const Config& config, const Tokenizer* run_tokenizer);

}  // namespace poslab
