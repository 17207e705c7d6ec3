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

torch::Tensor alibi_bias(const std::vector<double>& slopes, int64_t t_q, int64_t t_k) {
  auto i = torch::arange(t_k - t_q, t_k, torch::kFloat).view({-1, 1});  // (t_q, 1) query positions
  auto j = torch::arange(t_k, torch::kFloat).view({1, -1});             // (1, t_k) key positions
  auto m = torch::tensor(slopes, torch::kDouble).to(torch::kFloat).view({-1, 1, 1});  // (H, 1, 1)
  return -m * (i - j).unsqueeze(0);                                     // (H, t_q, t_k)
}

torch::Tensor AlibiEncodingImpl::bias(int64_t t_q, int64_t t_k, const torch::Device& device) {
  return alibi_bias(slopes_, t_q, t_k).to(device);
}

std::map<std::string, torch::Tensor> AlibiEncodingImpl::inspect(int64_t n, int64_t dim) {
  return {{"slopes", torch::tensor(slopes_, torch::kDouble).to(torch::kFloat)}, {"bias", alibi_bias(slopes_, n, n)}};
}

}  // namespace poslab
