// Rotary family: RoPE (Su et al. 2021) rotates q and k inside attention; no additive embedding.
#pragma once
#include <mutex>

#include "model/positional/positional.h"

namespace poslab {

class RotaryEncodingImpl : public PositionalEncodingImpl {
 public:
  RotaryEncodingImpl(int64_t head_dim, double base) : PositionalEncodingImpl("rope"), head_dim_(head_dim), base_(base) {}
  std::string family() const override { return "rotary"; }
  std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& positions) override;
  std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim) override;

 private:
  int64_t head_dim_;
  double base_;
  std::mutex cache_mutex_;   // batch shards run the forward pass on several threads at once
  torch::Tensor cos_, sin_;  // (rows, hs/2) cache, grown on demand
};

}  // namespace poslab
