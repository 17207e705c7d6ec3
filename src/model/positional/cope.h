// Context-dependent family: CoPE (Golovneva et al. 2024, facebookresearch/RAM's ContextPosSelfAttn).
// Positions are counts of gated keys, so they depend on q.k: it needs explicit attention scores.
#pragma once
#include "model/positional/positional.h"

namespace poslab {

class CopeEncodingImpl : public PositionalEncodingImpl {
 public:
  CopeEncodingImpl(int64_t head_dim, int64_t npos);
  std::string family() const override { return "context"; }
  bool needs_scores() const override { return true; }
  torch::Tensor scores(const torch::Tensor& att, const torch::Tensor& q, double scale) override;
  std::map<std::string, torch::Tensor> inspect(int64_t n, int64_t dim, const InspectParams& params) override;
  torch::Tensor pos_emb;  // (hs, npos): e[p] per integer position, zero-initialised

 private:
  int64_t npos_;
};

// (..., T, T): p_ij = sum_{t=j..i} gates_it (reverse cumulative sum over keys), clamped to npos-1.
torch::Tensor cope_positions(const torch::Tensor& gates, int64_t npos);

}  // namespace poslab
