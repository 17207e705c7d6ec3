// `poslab bench`: training and evaluation throughput, step-time percentiles, peak memory, and
// achieved FLOP/s against a matrix-multiply peak measured in the same process, same threads;
// or generation tokens/s with and without the KV cache.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"

namespace poslab {

struct BenchOptions {
  int steps = 50;
  int warmup = 10;
};

// nanoGPT's estimate: 6N + 12 * n_layer * n_head * head_dim * T FLOPs per trained token, N the parameters
// without the position table (nanoGPT's get_num_params(non_embedding=True)).
double flops_per_token(int64_t params, const ModelConfig& m);
nlohmann::json run_benchmark(const Config& config, const BenchOptions& options);
std::string format_benchmark(const nlohmann::json& result);
// The "  cpu ..." line of a result's table (model name, vendor, family, model, usable cores and the flags that
// choose kernels: AVX-512, bf16, AMX) and, on CUDA, the "  gpu ..." line, so that figures from two machines are
// never read as one.
std::string machine_lines(const nlohmann::json& result);

// `poslab bench --generate N`: greedy generation of N tokens (batch 1, a 16-token prompt from the
// validation split, the config's model at its initialisation), timed with the KV cache and with a
// full recompute of the prefix per token.
nlohmann::json run_generation_benchmark(const Config& config, int tokens);
std::string format_generation_benchmark(const nlohmann::json& result);

}  // namespace poslab
