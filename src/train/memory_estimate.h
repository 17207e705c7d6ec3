// Memory a training run needs, estimated from the config before anything is allocated, so a model
// that cannot fit is refused with the numbers (exit 2) instead of dying in the allocator.
#pragma once
#include <cstdint>
#include <string>

#include "config/config.h"

namespace poslab {

struct MemoryEstimate {
  int64_t params = 0;          // parameters (embeddings, blocks, the encoding's own)
  int64_t weights_bytes = 0;   // fp32 weights, gradients and AdamW's two moments
  int64_t activations_bytes = 0;  // what backward keeps for one batch, attention scores included
  int64_t total() const { return weights_bytes + activations_bytes; }
};

// An upper-side estimate for training `config` (vocab_size set) at batch_size x block_size.
MemoryEstimate estimate_training_memory(const Config& config);
// Evaluation at `tokens` tokens, one sequence at a time (the evaluator splits batches to fit): the
// weights, one layer's activations and logits, and one block of attention scores (GPTImpl's budget).
MemoryEstimate estimate_evaluation_memory(const Config& config, int64_t tokens, int64_t attention_budget_bytes);
// Throws ConfigError "evaluation at N tokens needs ~X (...), Y available" when it cannot fit; `key` names the
// setting the lengths came from ("eval.lengths"), else --lengths.
void check_evaluation_fits(const Config& config, int64_t tokens, const std::string& key = "");
// `poslab attention` keeps every layer's whole (H, T, T) probabilities of one sequence: the same
// check with those counted in.
void check_attention_fits(const Config& config, int64_t tokens, int64_t bias_scratch_per_pair = 0);
// MemAvailable from /proc/meminfo in bytes; -1 where it cannot be read.
int64_t available_memory_bytes();
// Throws ConfigError "... needs ~X GiB (...), Y GiB available" when the estimate exceeds what is free.
void check_training_fits(const Config& config);
std::string format_bytes(int64_t bytes);

}  // namespace poslab
