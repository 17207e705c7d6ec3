// `poslab bench`: training and evaluation throughput, step-time percentiles, peak memory, and
// achieved FLOP/s against a matrix-multiply peak measured in the same process, same threads.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"

namespace poslab {

struct BenchOptions {
  int steps = 50;
  int warmup = 10;
};

// nanoGPT's estimate: 6N + 12 * n_layer * n_head * head_dim * T FLOPs per trained token.
double flops_per_token(int64_t params, const ModelConfig& m);
nlohmann::json run_benchmark(const Config& config, const BenchOptions& options);
std::string format_benchmark(const nlohmann::json& result);

}  // namespace poslab
