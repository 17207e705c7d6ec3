// Autoregressive generation (greedy or temperature / top-k sampling), with a KV cache where the
// encoding allows one and a full recompute of the prefix otherwise. Used by `poslab sample` and `poslab bench`.
#pragma once
#include <functional>
#include <vector>

#include "model/gpt.h"

namespace poslab {

struct GenerateOptions {
  int64_t tokens = 100;      // tokens to generate
  double temperature = 0.0;  // 0 = greedy
  int top_k = 0;             // sample among the k likeliest (0 = all)
  bool use_cache = true;     // false: recompute the whole prefix every step (--no-cache)
};

struct GenerateStats {
  int64_t cached_steps = 0;     // tokens produced by forward_cached
  int64_t recompute_steps = 0;  // tokens produced by a full forward (no cache, or past what the cache allows)
};

// Called after each token with its id and the logits (vocab,) it was drawn from.
using TokenCallback = std::function<void(int64_t token, const torch::Tensor& logits)>;

// Generates after `prompt` (non-empty) with the model in eval mode; returns the new tokens. Where the
// encoding stops allowing a cache (pos->kv_cacheable: a learned table's window starts to slide, a
// randomized draw, dynamic NTK), generation continues with full recomputes, so both modes agree.
std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, const GenerateOptions& options,
                              const TokenCallback& on_token = {}, GenerateStats* stats = nullptr);

}  // namespace poslab
