// Rotary family: RoPE (Su et al. 2021) rotates q and k inside attention, optionally only the first
// rotary_fraction of each head's dims (GPT-NeoX); xPos (Sun et al. 2022) adds a per-pair decay.
#pragma once
#include <mutex>

#include "model/positional/positional.h"

namespace poslab {

class RotaryEncodingImpl : public PositionalEncodingImpl {
 public:
  RotaryEncodingImpl(int64_t head_dim, double base, int64_t rot_dims, std::string kind = "rope")
      : PositionalEncodingImpl(std::move(kind)), head_dim_(head_dim), rot_dims_(rot_dims), base_(base) {}
  std::string family() const override { return "rotary"; }
  std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& positions) override;
  std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim, const InspectParams& params) override;
  void set_rope_scaling(const RopeScaling& scaling) override;
  // Dynamic NTK's frequencies follow the current length, so keys rotated earlier go stale.
  bool kv_cacheable(int64_t length) const override;
  RopeScaling rope_scaling() const override;

 protected:
  // cos and sin (T, rot_dims/2) at these positions, from a table cached on `device`.
  std::pair<torch::Tensor, torch::Tensor> cos_sin(const torch::Tensor& positions, const torch::Device& device);
  // x (..., T, hs): the first rot_dims dims rotated by cos/sin (T, rot_dims/2), the rest passed through.
  torch::Tensor rotate_part(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) const;
  int64_t head_dim_, rot_dims_;
  double base_;

 private:
  std::mutex cache_mutex_;   // batch shards run the forward pass on several threads at once
  torch::Tensor cos_, sin_;  // (rows, rot_dims/2) cache, grown on demand
  RopeScaling scaling_;      // none unless an evaluation asks for it
};

// xPos: RoPE(q)_n * zeta^(n/gamma), RoPE(k)_m * zeta^(-m/gamma), on centred positions.
class XposEncodingImpl : public RotaryEncodingImpl {
 public:
  XposEncodingImpl(int64_t head_dim, double base, double scale_base)
      : RotaryEncodingImpl(head_dim, base, head_dim, "xpos"), scale_base_(scale_base) {}
  std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& positions) override;
  // Un-centred scales (centre 0): the centre cancels in q.k, so cached keys keep their scale and
  // the logits match the centred full forward to float rounding.
  std::pair<torch::Tensor, torch::Tensor> rotate_cached(const torch::Tensor& q, const torch::Tensor& k,
                                                        const torch::Tensor& positions) override;
  // Up to 16 gamma tokens: an un-centred key scale zeta^(-p/gamma) <= 0.286^-16 ~ 5e8 (and the query's
  // reciprocal) stays well inside float32's range; past that, generation recomputes (centred) instead.
  // torchscale keeps un-transformed keys and re-applies the centred scales to the whole cache each step.
  bool kv_cacheable(int64_t length) const override;
  // Past xpos_max_length(scale_base) tokens the scales overflow float (the loss came out nan, reported ok):
  // such a length is not applicable, and sampling slides its window there.
  void check_length(int64_t length) const override;
  int64_t eval_length_limit() const override;
  std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim, const InspectParams& params) override;

 private:
  // q and k rotated, q's pairs scaled by zeta^((p - centre)/gamma) and k's by its reciprocal.
  std::pair<torch::Tensor, torch::Tensor> rotate_scaled(const torch::Tensor& q, const torch::Tensor& k,
                                                        const torch::Tensor& positions, const torch::Tensor& centred);
  double scale_base_;
};

}  // namespace poslab
