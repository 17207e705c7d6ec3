// Where and how a run computes: device (auto|cpu|cuda), precision (bf16 autocast or fp32) and
// the intra-op thread count, resolved once from the config and printed at start-up.
#pragma once
#include <torch/torch.h>

#include <string>

#include "config/config.h"

namespace poslab {

struct Runtime {
  torch::Device device = torch::kCPU;
  bool bf16 = false;  // autocast matrix products to bfloat16
  int threads = 1;
  std::string describe() const;
};

bool cpu_has_bf16();
// The intra-op thread count poslab uses when train.threads is 0 (see docs/benchmarks.md): every
// core, except fp32 on the CPU under spinning OpenMP workers, where one thread avoids the fight
// between those workers and OpenBLAS's own threads.
int default_threads(bool bf16, bool cuda);
// Resolves the config's choices and applies the thread count. Throws ConfigError for cuda without CUDA.
Runtime make_runtime(const Config& config);

// Enables bf16 autocast for the forward pass while alive (no-op when runtime.bf16 is false).
class AutocastGuard {
 public:
  explicit AutocastGuard(const Runtime& runtime);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_;
  bool cuda_;
};

}  // namespace poslab
