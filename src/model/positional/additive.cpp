// Additive family: a vector added to the token embedding. none, index, binary, sinusoidal, learned.
#include "model/positional/additive.h"

#include <algorithm>

namespace poslab {

torch::Tensor sinusoidal_table(int64_t n, int64_t d, double base) {
  auto pos = torch::arange(n, torch::kDouble).unsqueeze(1);                     // (n, 1)
  auto two_i = torch::arange(0, d, 2, torch::kDouble);                          // (d/2,)
  auto angle = pos / torch::pow(torch::tensor(base, torch::kDouble), two_i / static_cast<double>(d));  // (n, d/2)
  // Interleave: column 2i is sin, 2i+1 is cos (Vaswani et al.), computed in double then cast.
  return torch::stack({torch::sin(angle), torch::cos(angle)}, /*dim=*/2).reshape({n, d}).to(torch::kFloat);
}

torch::Tensor binary_table(int64_t n, int64_t d, int bits, bool signed_bits) {
  auto pos = torch::arange(n, torch::kLong).unsqueeze(1);                                      // (n, 1)
  auto bit = torch::bitwise_and(torch::bitwise_right_shift(pos, torch::arange(bits, torch::kLong)), 1)
                 .to(torch::kFloat);                                                           // (n, bits)
  if (signed_bits) bit = bit * 2 - 1;
  auto table = torch::zeros({n, d});
  table.slice(1, 0, bits).copy_(bit);
  return table;
}

void PositionalEncodingImpl::reject_params(const InspectParams& params, const std::vector<std::string>& known) const {
  for (const auto& [name, value] : params)
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw ConfigError("--param " + name + ": not a parameter of " + kind() +
                        (known.empty() ? " (it takes none)" : " (known: " + list + ")"));
    }
}

std::map<std::string, torch::Tensor> PositionalEncodingImpl::inspect(int64_t n, int64_t dim, const InspectParams& params) {
  reject_params(params, {});
  torch::NoGradGuard no_grad;
  check_length(n);
  auto zeros = torch::zeros({1, n, dim});
  return {{"table", embed(zeros, torch::arange(n, torch::kLong)).squeeze(0).detach()}};  // (n, dim)
}

torch::Tensor IndexEncodingImpl::embed(const torch::Tensor& x, const torch::Tensor& positions) {
  // The same value p*scale in every component: a pre-LayerNorm block subtracts it again (see docs).
  auto offset = (positions.to(x.scalar_type()) * scale_).view({1, -1, 1});  // (1, T, 1)
  return x + offset;
}

torch::Tensor TableEncodingImpl::embed(const torch::Tensor& x, const torch::Tensor& positions) {
  const int64_t needed = positions.numel() ? positions.max().item<int64_t>() + 1 : 0;
  torch::Tensor table;
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (!cache_.defined() || cache_.size(0) < needed || cache_.device() != x.device()) {
      // Grow geometrically so evaluation sweeps over many lengths build the table once or twice.
      int64_t rows = std::max<int64_t>(needed, cache_.defined() ? 2 * cache_.size(0) : needed);
      if (max_positions() >= 0) rows = std::min<int64_t>(rows, max_positions());
      cache_ = (make_table(rows) * scale_).to(x.device());
    }
    table = cache_;
  }
  return x + table.index_select(0, positions).unsqueeze(0).to(x.scalar_type());  // (1, T, C)
}

LearnedEncodingImpl::LearnedEncodingImpl(int64_t block_size, int64_t n_embd) : PositionalEncodingImpl("learned") {
  weight = register_parameter("weight", torch::randn({block_size, n_embd}) * 0.02);
}

torch::Tensor LearnedEncodingImpl::embed(const torch::Tensor& x, const torch::Tensor& positions) {
  return x + weight.index_select(0, positions).unsqueeze(0);  // (1, T, C)
}

}  // namespace poslab
