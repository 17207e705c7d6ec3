// What the tests of the fused CPU ops share: a fixture that turns them on (the process default is off,
// as with train.fused_ops=false until a runtime sets it), a scoped thread count, and a largest difference.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include "model/fused_ops.h"

namespace poslab::testing {

struct FusedOn : ::testing::Test {
  void SetUp() override { set_fused_ops(true); }
  void TearDown() override { set_fused_ops(false); }
};

struct ThreadCount {
  int saved = at::get_num_threads();
  explicit ThreadCount(int n) { at::set_num_threads(n); }
  ~ThreadCount() { at::set_num_threads(saved); }
};

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

}  // namespace poslab::testing
