// CoPE: gates g_ij = sigmoid(q_i.k_j / sqrt(hs)) on the causal pairs, positions p_ij = sum_{t>=j} g_it
// clamped to npos-1, and logits (q.k + q.e[p]) / sqrt(hs) with e[p] interpolated between integers (RAM's default).
#include "model/positional/cope.h"

namespace poslab {

torch::Tensor cope_positions(const torch::Tensor& gates, int64_t npos) {
  return gates.flip(-1).cumsum(-1).flip(-1).clamp_max(static_cast<double>(npos - 1));
}

CopeEncodingImpl::CopeEncodingImpl(int64_t head_dim, int64_t npos) : PositionalEncodingImpl("cope"), npos_(npos) {
  pos_emb = register_parameter("pos_emb", torch::zeros({head_dim, npos}));
}

torch::Tensor CopeEncodingImpl::scores(const torch::Tensor& att, const torch::Tensor& q, double scale) {
  // Queries are the last t_q of t_k positions (t_q < t_k when generating with a KV cache).
  const auto t_q = att.size(-2), t_k = att.size(-1);
  auto causal = torch::ones({t_q, t_k}, att.options().dtype(torch::kFloat)).tril(t_k - t_q);  // (t_q, t_k): 1 where visible
  // fp32 sums even under bf16 autocast: a bf16 running count loses the fraction that interpolates.
  auto p = cope_positions(torch::sigmoid(att.to(torch::kFloat)) * causal, npos_);  // (B, H, t_q, t_k)
  auto z = torch::matmul(q, pos_emb.to(q.scalar_type())).to(torch::kFloat);       // (B, H, t_q, npos): q_i . e[p]
  auto floor = p.floor(), ceil = p.ceil();
  auto w = p - floor;  // no gradient through floor/ceil; it flows through w
  auto logit = z.gather(-1, ceil.to(torch::kLong)) * w + z.gather(-1, floor.to(torch::kLong)) * (1 - w);  // (B, H, t_q, t_k)
  return att + logit * scale;  // (q.k + q.e[p]) / sqrt(hs)
}

std::map<std::string, torch::Tensor> CopeEncodingImpl::inspect(int64_t n, int64_t, const InspectParams& params) {
  reject_params(params, {});
  return {{"pos_emb", pos_emb.detach()}};
}

// Specs are aggregates; the members a registration leaves out keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const EncodingRegistrar kCope{
    {"cope", "context",
     [](const PositionalOptions& o) { return std::make_shared<CopeEncodingImpl>(o.n_embd / o.n_head, o.encoding.npos); },
     [](const PositionalOptions& o) { require_option(o.encoding.npos >= 1, "model.pos_encoding.npos", "positive", o.encoding.npos); },
     {}, {}, /*listing=*/140}};

}  // namespace poslab
