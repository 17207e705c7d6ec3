// KV cache bookkeeping: concatenation along the time axis, one layer at a time.
#include "model/kv_cache.h"

namespace poslab {

void KVCache::clear() {
  for (auto& layer : layers) layer = LayerKV{};
  length = 0;
}

std::pair<torch::Tensor, torch::Tensor> LayerKV::append(const torch::Tensor& k_new, const torch::Tensor& v_new) {
  // A concatenation per token copies the cache (O(T) per step); fine at poslab's lengths, and far
  // cheaper than recomputing the whole prefix through every layer.
  k = k.defined() ? torch::cat({k, k_new}, /*dim=*/2) : k_new;  // (B, H, T_cached + T_new, hs)
  v = v.defined() ? torch::cat({v, v_new}, /*dim=*/2) : v_new;
  return {k, v};
}

}  // namespace poslab
