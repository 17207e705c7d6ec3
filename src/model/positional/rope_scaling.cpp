// RoPE scaling formulas, after huggingface/transformers modeling_rope_utils (default, linear,
// dynamic, yarn) and the NTK-aware base change (x-transformers' base_rescale_factor).
#include "model/positional/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace poslab {

const std::vector<std::string> kRopeScalingKinds = {"none", "linear", "ntk", "dynamic_ntk", "yarn"};

static torch::Tensor default_inv_freq(int64_t d, double base) {
  return torch::pow(torch::tensor(base, torch::kDouble), -torch::arange(0, d, 2, torch::kDouble) / static_cast<double>(d));
}

void validate_rope_scaling(const RopeScaling& s, const std::string& where) {
  if (std::find(kRopeScalingKinds.begin(), kRopeScalingKinds.end(), s.kind) == kRopeScalingKinds.end())
    throw std::invalid_argument(where + ": unknown rope scaling '" + s.kind +
                                "' (expected none, linear, ntk, dynamic_ntk or yarn)");
  if (!s.active()) return;
  if (!(s.factor >= 1.0) || !std::isfinite(s.factor))
    throw std::invalid_argument(where + ": the factor must be a number >= 1 (how many times the training length), got " +
                                std::to_string(s.factor));
  if (s.original_length <= 0)
    throw std::invalid_argument(where + ": the original length must be a positive number of tokens");
  if (!(s.beta_fast > s.beta_slow) || !(s.beta_slow > 0))
    throw std::invalid_argument(where + ": yarn needs beta_fast > beta_slow > 0");
}

RopeFrequencies rope_frequencies(int64_t d, double base, const RopeScaling& s, int64_t seq_len) {
  const double s_f = s.factor, L = static_cast<double>(s.original_length), dd = static_cast<double>(d);
  RopeFrequencies out;
  if (!s.active()) {
    out.inv_freq = default_inv_freq(d, base);
  } else if (s.kind == "linear") {  // Position Interpolation: positions m / s
    out.inv_freq = default_inv_freq(d, base) / s_f;
  } else if (s.kind == "ntk") {  // NTK-aware: a larger base spreads the low frequencies, keeps the highest
    out.inv_freq = default_inv_freq(d, base * std::pow(s_f, dd / (dd - 2)));
  } else if (s.kind == "dynamic_ntk") {  // the NTK base grows with the evaluated length past L
    const double seq = std::max(static_cast<double>(seq_len), L);
    out.inv_freq = default_inv_freq(d, base * std::pow(s_f * seq / L - (s_f - 1), dd / (dd - 2)));
  } else {  // yarn: keep pairs that turn often within L, interpolate slow ones, ramp in between
    auto correction_dim = [&](double rotations) { return dd * std::log(L / (rotations * 2 * M_PI)) / (2 * std::log(base)); };
    double low = std::max(std::floor(correction_dim(s.beta_fast)), 0.0);
    double high = std::min(std::ceil(correction_dim(s.beta_slow)), dd - 1);
    if (low == high) high += 0.001;  // no division by zero
    auto ramp = ((torch::arange(d / 2, torch::kDouble) - low) / (high - low)).clamp(0, 1);  // (d/2,)
    auto extrapolation = 1 - ramp;
    auto pos_inv = default_inv_freq(d, base);
    out.inv_freq = pos_inv / s_f * (1 - extrapolation) + pos_inv * extrapolation;
    out.attention_factor = s_f <= 1 ? 1.0 : 0.1 * std::log(s_f) + 1.0;
  }
  return out;
}

RopeScaling to_rope_scaling(const RopeScalingConfig& c, int64_t default_length) {
  return {c.kind, c.factor, c.original_length > 0 ? c.original_length : default_length};
}

}  // namespace poslab
