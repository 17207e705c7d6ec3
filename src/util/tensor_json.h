// Tensors as nested JSON arrays (for pe --format json, attention.json and the plot scripts).
#pragma once
#include "util/torch_api.h"

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

namespace poslab {

// A tensor of any rank as nested arrays of numbers; `decimals` >= 0 rounds each value (smaller files
// for probabilities), non-finite values become null.
inline nlohmann::json tensor_to_json(const torch::Tensor& t, int decimals = -1) {
  const bool integral = !t.is_floating_point();  // positions, bucket indices: printed as integers
  auto flat = t.detach().to(torch::kCPU, integral ? torch::kLong : torch::kDouble).contiguous();
  const double factor = decimals >= 0 ? std::pow(10.0, decimals) : 0.0;
  auto value = [&](int64_t i) -> nlohmann::json {
    if (integral) return flat.data_ptr<int64_t>()[i];
    const double v = flat.data_ptr<double>()[i];
    if (!std::isfinite(v)) return nullptr;
    return factor > 0 ? std::round(v * factor) / factor : v;
  };
  if (flat.dim() == 0) return value(0);
  // Build from the innermost dimension out, walking the flat buffer once.
  std::function<nlohmann::json(int64_t, int64_t)> build = [&](int64_t dim, int64_t offset) {
    nlohmann::json out = nlohmann::json::array();
    const int64_t n = flat.size(dim), stride = flat.stride(dim);
    for (int64_t i = 0; i < n; ++i)
      out.push_back(dim + 1 == flat.dim() ? value(offset + i * stride) : build(dim + 1, offset + i * stride));
    return out;
  };
  return build(0, 0);
}

}  // namespace poslab
