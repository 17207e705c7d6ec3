// The fused CPU AdamW against LibTorch's clip_grad_norm_ + AdamW::step: same parameters and moments
// to float rounding over several steps (clipped and not), shared optimizer state, shard sums, and
// bit-identical results for any thread count.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include "train/fused_adamw.h"

using namespace poslab;

namespace {

// Three parameters in two groups like make_optimizer's (decay / no decay), one never given a gradient.
struct OptimizerUnderTest {
  std::vector<torch::Tensor> params;
  std::unique_ptr<torch::optim::AdamW> optimizer;
};

OptimizerUnderTest make_setup() {
  torch::manual_seed(3);
  OptimizerUnderTest s;
  s.params = {torch::randn({40000}), torch::randn({33, 17}), torch::randn({5}), torch::randn({7})};
  for (auto& p : s.params) p.set_requires_grad(true);
  auto options = torch::optim::AdamWOptions(2e-2).betas({0.9, 0.95}).weight_decay(0.1);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{s.params[0], s.params[1]},
                      std::make_unique<torch::optim::AdamWOptions>(options));
  groups.emplace_back(std::vector<torch::Tensor>{s.params[2], s.params[3]},
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(options).weight_decay(0)));
  s.optimizer = std::make_unique<torch::optim::AdamW>(std::move(groups), options);
  return s;
}

// Step i's gradients, split into two shards; the last parameter gets none. Large on even steps
// (clipping scales them), small on odd ones (clipping leaves them).
std::vector<std::vector<torch::Tensor>> shard_grads(const OptimizerUnderTest& s, int step) {
  torch::manual_seed(100 + step);
  std::vector<std::vector<torch::Tensor>> shards(2);
  const double scale = step % 2 == 0 ? 1.0 : 1e-3;
  for (size_t k = 0; k < s.params.size(); ++k)
    for (auto& shard : shards)
      shard.push_back(k + 1 == s.params.size() ? torch::Tensor() : torch::randn_like(s.params[k]) * scale);
  return shards;
}

void reference_step(OptimizerUnderTest& s, const std::vector<std::vector<torch::Tensor>>& shards, double clip) {
  for (size_t k = 0; k < s.params.size(); ++k)
    s.params[k].mutable_grad() = shards[0][k].defined() ? shards[0][k] + shards[1][k] : torch::Tensor();
  torch::nn::utils::clip_grad_norm_(s.params, clip);
  s.optimizer->step();
}

double largest_relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs() / (b.abs() + 1e-3)).max().item<double>();
}

}  // namespace

TEST(FusedAdamW, MatchesClipGradNormAndTorchAdamWStepByStep) {
  OptimizerUnderTest reference = make_setup(), fused = make_setup();
  ASSERT_TRUE(fused_adamw_applies(*fused.optimizer));
  ASSERT_TRUE(torch::equal(optimizer_params(*fused.optimizer)[1], fused.params[1]));
  for (int step = 0; step < 6; ++step) {
    const auto shards = shard_grads(reference, step);
    reference_step(reference, shards, /*clip=*/1.0);
    // Step 0 on LibTorch's own path: later fused steps must find and continue its moments.
    if (step == 0) reference_step(fused, shards, /*clip=*/1.0);
    else fused_adamw_step(*fused.optimizer, shards, /*grad_clip=*/1.0);
    double largest = 0;
    for (size_t k = 0; k < reference.params.size(); ++k)
      largest = std::max(largest, largest_relative_difference(fused.params[k], reference.params[k]));
    EXPECT_LT(largest, 1e-5) << "step " << step << ": largest relative parameter difference " << largest;
  }
  // Moments and step counts continue in the same state entries (a new entry would restart them).
  EXPECT_EQ(fused.optimizer->state().size(), 3u);
  EXPECT_TRUE(torch::equal(fused.params[3], reference.params[3])) << "a parameter without gradient must not move";
  const auto& moved = fused.params[0];
  EXPECT_FALSE(torch::equal(moved, make_setup().params[0])) << "the fused step did nothing";
}

TEST(FusedAdamW, WithoutClippingMatchesTorchAdamW) {
  OptimizerUnderTest reference = make_setup(), fused = make_setup();
  for (int step = 0; step < 3; ++step) {
    const auto shards = shard_grads(reference, step);
    for (size_t k = 0; k < reference.params.size(); ++k)
      reference.params[k].mutable_grad() = shards[0][k].defined() ? shards[0][k] + shards[1][k] : torch::Tensor();
    reference.optimizer->step();
    fused_adamw_step(*fused.optimizer, shards, /*grad_clip=*/0.0);
  }
  double largest = 0;
  for (size_t k = 0; k < reference.params.size(); ++k)
    largest = std::max(largest, largest_relative_difference(fused.params[k], reference.params[k]));
  EXPECT_LT(largest, 1e-5) << "largest relative parameter difference " << largest;
}

TEST(FusedAdamW, IsBitIdenticalForAnyThreadCount) {
  const int before = at::get_num_threads();
  std::vector<std::vector<torch::Tensor>> results;
  for (int threads : {1, 2, 3}) {
    at::set_num_threads(threads);
    OptimizerUnderTest s = make_setup();
    for (int step = 0; step < 3; ++step) fused_adamw_step(*s.optimizer, shard_grads(s, step), /*grad_clip=*/1.0);
    results.push_back(s.params);
  }
  at::set_num_threads(before);
  for (size_t r = 1; r < results.size(); ++r)
    for (size_t k = 0; k < results[0].size(); ++k)
      EXPECT_TRUE(torch::equal(results[0][k], results[r][k])) << "parameter " << k << ", run " << r;
}
