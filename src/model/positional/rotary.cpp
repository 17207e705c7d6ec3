// RoPE: rotate each interleaved pair (2i, 2i+1) of q and k by p * theta_i.
#include "model/positional/rotary.h"

namespace poslab {

torch::Tensor rope_angles(int64_t n, int64_t head_dim, double base) {
  auto theta = torch::pow(torch::tensor(base, torch::kDouble),
                          -torch::arange(0, head_dim, 2, torch::kDouble) / static_cast<double>(head_dim));  // (hs/2,)
  return torch::outer(torch::arange(n, torch::kDouble), theta);  // (n, hs/2), double: exact angles at long p
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto pairs = x.unflatten(-1, {-1, 2});      // (..., T, hs/2, 2)
  auto x0 = pairs.select(-1, 0), x1 = pairs.select(-1, 1);
  auto r0 = x0 * cos - x1 * sin;
  auto r1 = x0 * sin + x1 * cos;
  return torch::stack({r0, r1}, -1).flatten(-2).to(x.scalar_type());  // (..., T, hs)
}

std::pair<torch::Tensor, torch::Tensor> RotaryEncodingImpl::rotate(const torch::Tensor& q, const torch::Tensor& k,
                                                                   const torch::Tensor& positions) {
  const int64_t needed = positions.numel() ? positions.max().item<int64_t>() + 1 : 0;
  torch::Tensor cos_table, sin_table;
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (!cos_.defined() || cos_.size(0) < needed || cos_.device() != q.device()) {
      int64_t rows = std::max<int64_t>(needed, cos_.defined() ? 2 * cos_.size(0) : needed);
      auto angles = rope_angles(rows, head_dim_, base_);
      cos_ = angles.cos().to(torch::kFloat).to(q.device());
      sin_ = angles.sin().to(torch::kFloat).to(q.device());
    }
    cos_table = cos_, sin_table = sin_;
  }
  auto cos = cos_table.index_select(0, positions), sin = sin_table.index_select(0, positions);  // (T, hs/2)
  return {apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)};
}

std::map<std::string, torch::Tensor> RotaryEncodingImpl::inspect(int64_t n, int64_t dim) {
  return {{"angles", rope_angles(n, dim, base_).to(torch::kFloat)}};  // (n, dim/2)
}

}  // namespace poslab
