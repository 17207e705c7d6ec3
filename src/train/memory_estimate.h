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
// MemAvailable from /proc/meminfo in bytes; -1 where it cannot be read.
int64_t available_memory_bytes();
// Throws ConfigError "... needs ~X GiB (...), Y GiB available" when the estimate exceeds what is free.
void check_training_fits(const Config& config);
std::string format_bytes(int64_t bytes);

}  // namespace poslab
