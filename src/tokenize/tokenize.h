// poslab-tokenize's pieces (src/tokenize/): writing token files from text (token_files.cpp) and the
// command line with encode and decode (main.cpp). Linked into poslab-tokenize alone, never beside LibTorch.
#pragma once

#include <sentencepiece_processor.h>

#include <string>
#include <vector>

#include "tokenize/utf8_split.h"

namespace poslab::tok {

// A signal (SIGINT, SIGTERM) that stopped the writing of token files: the partial directory is gone.
struct Interrupted {
  int signal;
};

struct TokenizeOptions {
  std::vector<std::string> inputs;
  std::string out, tokenizer, model_type = "bpe";
  int vocab_size = 0;
  double val_fraction = 0.1;
  bool from_config = false;  // poslab tokenizing a text config: errors name its keys, not these flags
};

// Trains a SentencePiece model on the training split of o.inputs (or applies o.tokenizer) and writes
// train.bin, val.bin, meta.json and tokenizer.model into o.out, whole or not at all.
void tokenize(const TokenizeOptions& o);

// Loads the SentencePiece model at `path`; errors name it by `option` (the flag or config key).
void load_model(sentencepiece::SentencePieceProcessor& sp, const std::string& path, const std::string& option);

}  // namespace poslab::tok
