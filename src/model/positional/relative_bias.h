// Attention-bias family beyond ALiBi: a bias (H, t_q, t_k) computed from query and key positions and
// added to the scaled logits. T5 (learned buckets), KERPLE (learned kernels), Sandwich (fixed), FIRE (learned MLP).
#pragma once
#include <mutex>

#include "model/positional/positional.h"

namespace poslab {

// T5 (Raffel et al. 2020): one learned scalar per head and distance bucket, causal bucketing.
class T5BiasImpl : public PositionalEncodingImpl {
 public:
  T5BiasImpl(int64_t n_head, int64_t n_embd, int num_buckets, int max_distance);
  std::string family() const override { return "bias"; }
  bool constant_bias() const override { return false; }
  torch::Tensor bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override;
  std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim, const InspectParams& params) override;
  torch::Tensor weight;  // (num_buckets, H), as HF's relative_attention_bias.weight

 private:
  int num_buckets_, max_distance_;
};

// KERPLE (Chi et al. 2022): log: -r1 log(1 + r2 d); power: -r1 d^r2. Per-head r1, r2 kept >= 1e-2
// (and r2 <= 2 for power) by clamping the parameters in place before each use, as the reference code.
class KerpleBiasImpl : public PositionalEncodingImpl {
 public:
  // power: the power variant (kind kerple_power), else the logarithmic one (kerple_log).
  KerpleBiasImpl(bool power, int64_t n_head);
  std::string family() const override { return "bias"; }
  bool constant_bias() const override { return false; }
  torch::Tensor bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override;
  std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim, const InspectParams& params) override;
  torch::Tensor r1, r2;  // (H, 1, 1)

 private:
  bool power() const { return power_; }
  bool power_;
  std::mutex clamp_mutex_;  // batch shards run the forward pass on several threads at once
};

// Sandwich (Chi et al. 2023, NeMo's class): parameter-free, from sinusoidal dot products.
class SandwichBiasImpl : public PositionalEncodingImpl {
 public:
  SandwichBiasImpl(int64_t n_head, int64_t head_dim, double base)
      : PositionalEncodingImpl("sandwich"), n_head_(n_head), head_dim_(head_dim), base_(base) {}
  std::string family() const override { return "bias"; }
  torch::Tensor bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override;
  std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim, const InspectParams& params) override;

 private:
  int64_t n_head_, head_dim_;
  double base_;
};

// FIRE (Li et al. 2023): MLP(psi(i-j) / psi(max(L, i))), psi(x) = log(c x + 1); learned c, L, MLP.
class FireBiasImpl : public PositionalEncodingImpl {
 public:
  FireBiasImpl(int64_t n_head, int mlp_width, double init_c, double init_L);
  std::string family() const override { return "bias"; }
  bool constant_bias() const override { return false; }
  torch::Tensor bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) override;
  std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim, const InspectParams& params) override;
  // The MLP's hidden layer, before and after its ReLU, in float.
  int64_t bias_scratch_bytes_per_pair() const override { return 2 * mlp_in->weight.size(0) * 4; }
  torch::Tensor c, L_multiplier;  // scalars; L = |L_multiplier * init_L|
  torch::nn::Linear mlp_in{nullptr}, mlp_out{nullptr};

 private:
  double init_L_;
};

// ---- formulas, exposed for tests and `poslab pe` ----

// (t_q, t_k) int64: HF T5Attention._relative_position_bucket with bidirectional=false.
torch::Tensor t5_bucket(const torch::Tensor& distance, int num_buckets, int max_distance);
// (H, t_q, t_k): KERPLE's bias for distances (t_q, t_k) >= 0 and per-head r1, r2 (H, 1, 1).
torch::Tensor kerple_bias(const torch::Tensor& distance, const torch::Tensor& r1, const torch::Tensor& r2, bool power);
// (H, t_q, t_k): Sandwich's bias for distances (t_q, t_k) >= 0.
torch::Tensor sandwich_bias(const torch::Tensor& distance, int64_t n_head, int64_t head_dim, double base);
// (t_q, t_k): FIRE's MLP input psi(i-j) / (psi(max(L, i)) + 1e-6) at query positions (t_q,).
torch::Tensor fire_input(const torch::Tensor& distance, const torch::Tensor& q_pos, const torch::Tensor& c,
                         const torch::Tensor& L);

}  // namespace poslab
