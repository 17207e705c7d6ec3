// train.precision "auto" on a CPU with bfloat16 instructions: whether its bfloat16 products outrun its float
// ones, timed at the model's own shape. They do by 2x on AMD's Zen 4 and Zen 5 (AVX512_BF16) and by 5x with
// Intel's AMX, but an Intel core without AMX runs them at about half its float rate (docs/benchmarks.md).
#pragma once
#include <cstdint>
#include <string>

namespace poslab {

struct ProductTiming {
  double fp32_us = 0;  // one (m, k) x (k, n) product in float (LibTorch's, on OpenBLAS with Debian's LibTorch)
  double bf16_us = 0;  // the same in bfloat16 as training runs it (model/dnnl_matmul.h), float out
  double speedup() const { return fp32_us / bf16_us; }
};

// The fastest of several interleaved rounds of each, in the calling thread's CPU time (at least 2 products or 3 ms a
// round: ~40 ms in all for the main job's model). Call it with one intra-op thread and one OpenBLAS thread: the
// products must run in this thread for its CPU time to count them. Kept per shape for the process, so that a
// second runtime asks once.
ProductTiming time_products(int64_t m, int64_t k, int64_t n);

// bfloat16 only where its products are clearly faster: a tie keeps float's precision.
constexpr double kBf16Margin = 1.2;
inline bool bf16_pays(const ProductTiming& t) { return t.fp32_us >= kBf16Margin * t.bf16_us; }

}  // namespace poslab
