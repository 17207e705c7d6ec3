// Keys and values kept per layer while generating, so each new token attends to the cached prefix
// instead of recomputing it. Keys are stored already rotated (rotary kinds) at their true positions;
// whether a cache is valid at all is the encoding's call (PositionalEncodingImpl::kv_cacheable).
#pragma once
#include <torch/types.h>

#include <vector>

namespace poslab {

struct LayerKV {
  torch::Tensor k, v;  // (B, H, T_cached, hs); undefined while empty
  // Appends this step's k, v (B, H, T_new, hs) and returns all keys and values so far.
  std::pair<torch::Tensor, torch::Tensor> append(const torch::Tensor& k_new, const torch::Tensor& v_new);
};

struct KVCache {
  std::vector<LayerKV> layers;  // one per block, filled on the first forward_cached
  int64_t length = 0;           // tokens cached; the next token's position

  explicit KVCache(int64_t n_layer = 0) : layers(n_layer) {}
  void clear();
};

}  // namespace poslab
