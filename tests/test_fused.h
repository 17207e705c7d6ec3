// What the tests of the fused CPU ops share: a fixture that turns them on (the process default is off,
// as with train.fused_ops=false until a runtime sets it), a scoped thread count, and a largest difference.
#pragma once
#include <gtest/gtest.h>
#include "util/torch_api.h"

#include <ATen/Parallel.h>

#include "model/fused_ops.h"
#include "util/runtime.h"

namespace poslab::testing {

struct FusedOn : ::testing::Test {
  void SetUp() override { set_fused_ops(true); }
  void TearDown() override { set_fused_ops(false); }
};

// Where the CPU has no bf16 instructions poslab never autocasts (train.precision auto is fp32 there, bf16
// refused), so its bfloat16 products never run; and LibTorch 1.13's own bfloat16 product on such a CPU (no
// oneDNN bfloat16 kernels below AVX-512) rounds every partial sum to bfloat16: at K = 768, 6.4 from the exact
// sum where one rounding is 0.4. The tests of those products skip there, saying why.
#define POSLAB_SKIP_WITHOUT_CPU_BF16()                                                                        \
  if (!::poslab::cpu_has_bf16())                                                                            \
  GTEST_SKIP() << "this CPU has no bf16 instructions: poslab would not autocast here (and LibTorch's own "  \
                  "bfloat16 products round their partial sums)"

struct ThreadCount {
  int saved = at::get_num_threads();
  explicit ThreadCount(int n) { at::set_num_threads(n); }
  ~ThreadCount() { at::set_num_threads(saved); }
};

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

}  // namespace poslab::testing
