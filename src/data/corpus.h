// Corpora: what the trainer and the evaluator draw batches from.
// TaskCorpus generates synthetic examples (padded, answer-only loss); TextCorpus holds a
// char-level file split 90/10 into train and validation tokens; TokenCorpus (data/token_corpus.h)
// reads memory-mapped token files, and text tokenized with SentencePiece, through the same windows.
#pragma once
#include "util/torch_api.h"

#include <memory>
#include <string>

#include "config/config.h"
#include "data/rng.h"
#include "data/tasks.h"
#include "data/tokenizer.h"
#include "probe/passkey.h"

namespace poslab {

enum class Split { Train, Val };

// Next-token batch. y holds -1 (ignored by the loss) at padding and unscored positions.
struct Batch {
  torch::Tensor x;  // (B, T) int64
  torch::Tensor y;  // (B, T) int64
};

class Corpus {
 public:
  virtual ~Corpus() = default;
  const Tokenizer& tokenizer() const { return tokenizer_; }
  virtual bool is_task() const = 0;
  // A batch from the training distribution of `split`.
  virtual Batch batch(Split split, int batch_size, Rng& rng) const = 0;
  // The longest training length: items for tasks, tokens for text.
  virtual int train_length() const = 0;
  // Model input tokens needed at an eval length (items for tasks, tokens for text).
  virtual int64_t tokens_at(int length) const = 0;
  // Whether the validation data holds one window at an eval length (text: length + 1 tokens); one that does
  // not is reported n/a by the evaluation, and needs no memory.
  virtual bool holds_eval_length(int /*length*/) const { return true; }

 protected:
  Tokenizer tokenizer_;
};

class TaskCorpus : public Corpus {
 public:
  explicit TaskCorpus(const DataConfig& config);
  bool is_task() const override { return true; }
  Batch batch(Split split, int batch_size, Rng& rng) const override;
  int train_length() const override { return config_.max_len; }
  int64_t tokens_at(int length) const override { return task_tokens(config_.task, length, config_.mqar) - 1; }
  // Every example has exactly `n` items: the evaluator's batches.
  Batch batch_at_length(int n, int batch_size, Rng& rng) const;
  Batch collate(const std::vector<Example>& examples) const;
  const DataConfig& config() const { return config_; }

 private:
  DataConfig config_;
};

class TextCorpus : public Corpus {
 public:
  // block_size is the training window; the file must leave at least one window in each split.
  TextCorpus(const DataConfig& config, int block_size);
  // Evaluating a run: the tokenizer comes from the run, so the vocabulary matches the model.
  TextCorpus(const DataConfig& config, int block_size, const CharTokenizer& run_tokenizer);
  bool is_task() const override { return false; }
  Batch batch(Split split, int batch_size, Rng& rng) const override;
  int train_length() const override { return block_size_; }
  int64_t tokens_at(int length) const override { return length; }
  bool holds_eval_length(int length) const override { return split_tokens(Split::Val) >= int64_t{length} + 1; }
  // Tokens in a split, and windows of `len` tokens starting at `starts`: (B, len) int64.
  virtual int64_t split_tokens(Split split) const { return tokens(split).size(0); }
  virtual torch::Tensor windows(Split split, const std::vector<int64_t>& starts, int64_t len) const;

 protected:
  explicit TextCorpus(int block_size) : block_size_(block_size) {}
  int block_size_;

 private:
  const torch::Tensor& tokens(Split split) const { return split == Split::Train ? train_ : val_; }
  void load(const DataConfig& config, const std::string& text);
  // A passkey document of block_size+1 tokens as one training row (data.probes.passkey).
  void passkey_row(int64_t* x, int64_t* y, Rng& rng) const;
  torch::Tensor train_, val_;  // (N,) int64
  PasskeyMixConfig passkey_;
  const PasskeyTemplate* passkey_template_ = nullptr;
  Haystack passkey_haystack_;
};

// Builds the corpus a config names; throws ConfigError when data and model do not fit together.
std::unique_ptr<Corpus> make_corpus(const Config& config);
std::unique_ptr<Corpus> make_corpus(const Config& config, const CharTokenizer& run_tokenizer);

}  // namespace poslab
