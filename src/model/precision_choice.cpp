// Times a float and a bfloat16 product side by side for train.precision "auto" (model/precision_choice.h).
#include "model/precision_choice.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>

#include "model/dnnl_matmul.h"

namespace poslab {

ProductTiming time_products(int64_t m, int64_t k, int64_t n) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t, int>, ProductTiming> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(m, k, n, at::get_num_threads());
  if (const auto it = known.find(key); it != known.end()) return it->second;

  torch::NoGradGuard no_grad;
  const auto a = torch::randn({m, k});
  const auto w = torch::randn({n, k});  // a Linear's weight: the product reads it transposed, as training does
  const auto a16 = a.to(torch::kBFloat16), w16 = w.to(torch::kBFloat16);
  auto out = torch::empty({m, n});
  const auto fp32 = [&] { at::mm_out(out, a, w.t()); };
  const auto bf16 = [&] { bf16_matmul(a16, w16.t(), torch::kFloat, {}, out); };
  using Clock = std::chrono::steady_clock;
  // Microseconds a product, over as many as fill ~3 ms (at least 2).
  const auto per_product = [&](const auto& product) {
    const auto start = Clock::now();
    int reps = 0;
    double us = 0;
    while (reps < 2 || us < 3000) {
      product();
      ++reps;
      us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    }
    return us / reps;
  };
  per_product(fp32);  // warm-up: OpenBLAS's buffers, oneDNN's kernel generated for this shape
  per_product(bf16);
  ProductTiming t{1e300, 1e300};
  for (int round = 0; round < 6; ++round) {  // interleaved: a neighbour's load falls on both alike
    t.fp32_us = std::min(t.fp32_us, per_product(fp32));
    t.bf16_us = std::min(t.bf16_us, per_product(bf16));
  }
  known[key] = t;
  return t;
}

}  // namespace poslab
