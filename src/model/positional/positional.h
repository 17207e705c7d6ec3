// The positional-encoding strategy: one interface, three hooks, one per place where position
// enters a transformer (x-transformers' taxonomy). The model calls all three every forward;
// each is a no-op unless the family overrides it, so nothing outside the factory switches on kind.
#pragma once
#include <torch/torch.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.h"

namespace poslab {

// A sequence longer than an encoding can represent (the learned table): reported as n/a.
struct PositionLimitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class PositionalEncodingImpl : public torch::nn::Module {
 public:
  explicit PositionalEncodingImpl(std::string kind) : kind_(std::move(kind)) {}
  const std::string& kind() const { return kind_; }
  virtual std::string family() const = 0;  // additive | rotary | bias | none

  // Additive family: x (B, T, C) -> x + PE[positions]. positions: (T,) int64.
  virtual torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& positions) { return x; }
  // Rotary family: q, k (B, H, T, hs) -> rotated by their positions.
  virtual std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                         const torch::Tensor& positions) {
    return {q, k};
  }
  // Bias family: (H, t_q, t_k) added to attention logits, or an undefined tensor.
  virtual torch::Tensor bias(int64_t t_q, int64_t t_k, const torch::Device& device) { return {}; }
  // Longest sequence the encoding represents; -1 when unbounded.
  virtual int64_t max_positions() const { return -1; }
  // Throws PositionLimitError when `length` tokens cannot be represented.
  void check_length(int64_t length) const;

  // What `poslab pe` prints: named tensors describing the encoding over n positions.
  virtual std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim);

 private:
  std::string kind_;
};

struct PositionalOptions {
  PosEncodingConfig encoding;
  int64_t n_embd = 64;
  int64_t n_head = 4;
  int64_t block_size = 64;
};

// The multiplier on an additive encoding when pos_encoding.scale is 0: 1 for index (the naive
// scheme, on purpose); 1/sqrt(n_embd) for the fixed sinusoidal and binary tables, whose unit-size
// components would otherwise drown nanoGPT's N(0, 0.02) token embeddings (x-transformers' choice).
double default_additive_scale(const std::string& kind, int64_t n_embd);

// The only place that maps a kind name to a strategy.
std::shared_ptr<PositionalEncodingImpl> make_positional(const PositionalOptions& options);

// ---- the encodings' formulas, exposed for tests and for `poslab pe` ----

// (n, d): PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(p / base^(2i/d)).
torch::Tensor sinusoidal_table(int64_t n, int64_t d, double base);
// (n, d): low `bits` components hold the bits of p (LSB first), as +-1 or 0/1; the rest zero.
torch::Tensor binary_table(int64_t n, int64_t d, int bits, bool signed_bits);
// (n, head_dim/2): angle p * theta_i, theta_i = base^(-2i/head_dim).
torch::Tensor rope_angles(int64_t n, int64_t head_dim, double base);
// Rotates interleaved pairs (x[2i], x[2i+1]) of x (..., T, hs) by angles (T, hs/2).
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
// Press et al. 2022 head slopes.
std::vector<double> alibi_slopes(int64_t n_head);
// (H, t_q, t_k): -m_h * (i - j); queries are the last t_q of t_k positions.
torch::Tensor alibi_bias(const std::vector<double>& slopes, int64_t t_q, int64_t t_k);

}  // namespace poslab
