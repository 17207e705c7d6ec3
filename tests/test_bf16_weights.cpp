// The kept bfloat16 copies of weights: equal to the cast bit for bit, reused while the weight is unchanged,
// cast afresh after any change (in place, under inference mode, new storage, a new tensor at a freed
// address); parameters only; a copy made under inference mode serves a later backward; the fused AdamW
// writes the next copy, equal to the cast of the updated weight.
#include <gtest/gtest.h>

#include <cmath>

#include "model/bf16_weights.h"
#include "model/fused_linear.h"
#include "test_fused.h"
#include "train/fused_adamw.h"
#include "util/runtime.h"

using namespace poslab;
using poslab::testing::FusedOn;

namespace {

torch::Tensor kept_param(at::IntArrayRef sizes) {
  auto w = torch::randn(sizes);
  w.set_requires_grad(true);
  return w;
}

// The same bits: bfloat16 compared as 16-bit integers (NaN included).
bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && torch::equal(a.view(torch::kShort), b.view(torch::kShort));
}

}  // namespace

TEST(Bf16Weights, ACopyIsTheCastAndIsReusedWhileTheWeightIsUnchanged) {
  clear_bf16_weights();
  torch::manual_seed(1);
  auto w = kept_param({33, 17});
  {
    torch::NoGradGuard no_grad;
    w[0][0] = std::numeric_limits<float>::quiet_NaN();
    w[0][1] = 1.0f + std::ldexp(1.0f, -8);  // halfway between two bfloat16 values: rounds to even
  }
  EXPECT_FALSE(has_bf16_weight(w));
  const auto a = bf16_weight(w);
  EXPECT_TRUE(same_bits(a, w.detach().to(torch::kBFloat16)));
  EXPECT_FALSE(a.requires_grad());
  EXPECT_TRUE(has_bf16_weight(w));
  EXPECT_TRUE(bf16_weight(w).is_same(a)) << "an unchanged weight must not be cast again";
}

TEST(Bf16Weights, EveryChangeOfTheWeightIsSeen) {
  clear_bf16_weights();
  torch::manual_seed(2);
  auto w = kept_param({8, 4});
  auto before = bf16_weight(w);
  {
    torch::NoGradGuard no_grad;
    w.add_(1.0);  // in place
  }
  auto after = bf16_weight(w);
  EXPECT_FALSE(after.is_same(before));
  EXPECT_TRUE(same_bits(after, w.detach().to(torch::kBFloat16)));
  {
    c10::InferenceMode inference;
    torch::NoGradGuard no_grad;
    w.copy_(torch::randn({8, 4}));  // as a checkpoint loads, here under inference mode
    EXPECT_TRUE(same_bits(bf16_weight(w), w.detach().to(torch::kBFloat16)));
  }
  w.set_data(torch::randn({8, 4}));  // new storage
  EXPECT_TRUE(same_bits(bf16_weight(w), w.detach().to(torch::kBFloat16)));
  // Weights made and freed one after another may reuse one address: each gets its own values.
  for (int i = 0; i < 20; ++i) {
    auto t = kept_param({8, 4});
    EXPECT_TRUE(same_bits(bf16_weight(t), t.detach().to(torch::kBFloat16))) << "weight " << i;
  }
}

TEST(Bf16Weights, OnlyParametersAreKept) {
  clear_bf16_weights();
  auto plain = torch::randn({4, 4});               // takes no gradient
  auto derived = kept_param({4, 4}) * 2.0;         // not a leaf
  torch::Tensor inference;
  {
    c10::InferenceMode guard;
    inference = torch::randn({4, 4});
  }
  for (const auto& t : {plain, derived, inference}) {
    EXPECT_TRUE(same_bits(bf16_weight(t), t.detach().to(torch::kBFloat16)));
    EXPECT_FALSE(has_bf16_weight(t));
  }
}

TEST_F(FusedOn, ABf16WeightCopyMadeUnderInferenceModeServesALaterBackward) {
  POSLAB_SKIP_WITHOUT_CPU_BF16();
  clear_bf16_weights();
  torch::manual_seed(3);
  auto w = kept_param({6, 5});
  auto x = torch::randn({4, 5});
  {
    c10::InferenceMode inference;
    EXPECT_FALSE(bf16_weight(w).is_inference());
  }
  torch::Tensor y;
  {
    Runtime rt;
    rt.bf16 = true;
    AutocastGuard autocast(rt);
    y = fused_linear(x, w);
  }
  ASSERT_EQ(y.scalar_type(), torch::kBFloat16) << "the fused Linear did not run";
  EXPECT_NO_THROW(y.to(torch::kFloat).sum().backward());
  ASSERT_TRUE(w.grad().defined());
  // dW = dy^T x with dy all ones: the column sums of x in bfloat16, summed in float; rounded to bfloat16
  // once more where the products go through LibTorch (builds without oneDNN: half an ulp, 2^-9 relative).
  const auto expected = x.to(torch::kBFloat16).to(torch::kFloat).sum(0).expand({6, 5});
  const double tolerance = std::ldexp(expected.abs().max().item<double>(), -8) + 1e-5;
  EXPECT_LT(poslab::testing::max_abs_diff(w.grad(), expected), tolerance);
}

TEST(Bf16Weights, TheFusedAdamWWritesTheCastOfTheUpdatedWeight) {
  clear_bf16_weights();
  torch::manual_seed(4);
  std::vector<torch::Tensor> params{kept_param({40000}), kept_param({33, 17}), kept_param({5})};
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(2e-2).weight_decay(0.1));
  bf16_weight(params[0]);
  bf16_weight(params[1]);  // params[2] has no copy: none is made for it
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<torch::Tensor>> shards(2);
    for (auto& shard : shards)
      for (const auto& p : params) shard.push_back(torch::randn_like(p));
    std::vector<int64_t> versions;
    for (const auto& p : params) versions.push_back(p._version());
    fused_adamw_step(optimizer, shards, /*grad_clip=*/1.0);
    for (size_t k = 0; k < params.size(); ++k) {
      EXPECT_GT(params[k]._version(), versions[k]) << "step " << step << ": parameter " << k << " changed unseen";
      if (k == 2) {
        EXPECT_FALSE(has_bf16_weight(params[k]));
        continue;
      }
      EXPECT_TRUE(same_bits(bf16_weight(params[k]), params[k].detach().to(torch::kBFloat16)))
          << "step " << step << ": parameter " << k;
    }
  }
}
