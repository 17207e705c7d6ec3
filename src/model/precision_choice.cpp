// Times a float and a bfloat16 product side by side for train.precision "auto" (model/precision_choice.h).
#include "model/precision_choice.h"

#include "util/torch_api.h"

#include <time.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "model/dnnl_matmul.h"

namespace poslab {

ProductTiming time_products(int64_t m, int64_t k, int64_t n) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t>, ProductTiming> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(m, k, n);
  if (const auto it = known.find(key); it != known.end()) return it->second;

  torch::NoGradGuard no_grad;
  const auto a = torch::randn({m, k});
  const auto w = torch::randn({n, k});  // a Linear's weight: the product reads it transposed, as training does
  const auto a16 = a.to(torch::kBFloat16), w16 = w.to(torch::kBFloat16);
  auto out = torch::empty({m, n});
  const auto fp32 = [&] { at::mm_out(out, a, w.t()); };
  const auto bf16 = [&] { bf16_matmul(a16, w16.t(), torch::kFloat, {}, out); };
  // Microseconds of this thread's CPU time a product, over as many as fill ~3 ms (at least 2). CPU time, not the
  // clock's: a neighbour's load (compare's other cells start and train beside this one) takes turns at the core,
  // and wall-clock rounds taken in those turns gave ratios from 0.26x to 1.30x where a quiet core gives 0.58x.
  const auto cpu_us = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
  };
  const auto per_product = [&](const auto& product) {
    const double start = cpu_us();
    int reps = 0;
    double us = 0;
    while (reps < 2 || us < 3000) {
      product();
      ++reps;
      us = cpu_us() - start;
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
