// ALiBi slopes and bias.
#include "model/positional/bias.h"

#include <cmath>

namespace poslab {

static std::vector<double> power_of_two_slopes(int64_t n) {
  // Geometric sequence starting at 2^(-8/n) with the same ratio.
  const double start = std::pow(2.0, -8.0 / static_cast<double>(n));
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(std::pow(start, static_cast<double>(i + 1)));
  return out;
}

std::vector<double> alibi_slopes(int64_t n_head) {
  const int64_t closest = int64_t{1} << static_cast<int>(std::floor(std::log2(static_cast<double>(n_head))));
  if (closest == n_head) return power_of_two_slopes(n_head);
  // Not a power of two: the closest power's slopes, then every other slope of the next power.
  auto out = power_of_two_slopes(closest);
  auto next = alibi_slopes(2 * closest);
  for (int64_t i = 0; i < 2 * closest && static_cast<int64_t>(out.size()) < n_head; i += 2) out.push_back(next[i]);
  return out;
}

torch::Tensor relative_distance(const torch::Tensor& q_pos, const torch::Tensor& k_pos) {
  return (q_pos.view({-1, 1}) - k_pos.view({1, -1})).to(torch::kFloat);  // (t_q, t_k)
}

torch::Tensor alibi_bias(const std::vector<double>& slopes, const torch::Tensor& q_pos, const torch::Tensor& k_pos) {
  auto m = torch::tensor(slopes, torch::kDouble).to(torch::kFloat).to(q_pos.device()).view({-1, 1, 1});  // (H, 1, 1)
  return -m * relative_distance(q_pos, k_pos).unsqueeze(0);  // (H, t_q, t_k)
}

torch::Tensor alibi_bias(const std::vector<double>& slopes, int64_t t_q, int64_t t_k) {
  // Queries are the last t_q of t_k positions.
  return alibi_bias(slopes, torch::arange(t_k - t_q, t_k, torch::kLong), torch::arange(t_k, torch::kLong));
}

torch::Tensor AlibiEncodingImpl::bias(const torch::Tensor& q_pos, const torch::Tensor& k_pos) {
  return alibi_bias(slopes_, q_pos, k_pos);
}

std::map<std::string, torch::Tensor> AlibiEncodingImpl::inspect(int64_t n, int64_t dim, const InspectParams& params) {
  reject_params(params, {});
  return {{"slopes", torch::tensor(slopes_, torch::kDouble).to(torch::kFloat)}, {"bias", alibi_bias(slopes_, n, n)}};
}

// Specs are aggregates; the members a registration leaves out keep their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const EncodingRegistrar kAlibi{{"alibi", "bias",
                                       [](const PositionalOptions& o) { return std::make_shared<AlibiEncodingImpl>(o.n_head); },
                                       {}, {}, {}, /*listing=*/70}};

}  // namespace poslab
