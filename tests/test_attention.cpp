// Attention statistics: recorded maps are causal distributions for every encoding, recording does
// not change the model's output, and distance/entropy/first-token share match hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>

#include "test_models.h"
#include "eval/attention_stats.h"

using namespace poslab;

using poslab::testing::tiny;

class RecordedKind : public ::testing::TestWithParam<std::string> {};

TEST_P(RecordedKind, MapsAreCausalRowsSumToOneOutputUnchanged) {
  torch::manual_seed(0);
  GPT model(tiny(GetParam()));
  model->eval();
  torch::NoGradGuard no_grad;
  auto idx = torch::randint(0, 11, {3, 20}, torch::kLong);
  auto plain = model->forward(idx);
  torch::Tensor recorded_logits;
  {
    AttentionRecorder recorder(model);
    recorded_logits = model->forward(idx);
    ASSERT_EQ(recorder.probs().size(), 2u);
    for (const auto& p : recorder.probs()) {
      ASSERT_EQ(p.sizes(), torch::IntArrayRef({3, 2, 20, 20}));
      auto above = p.triu(/*diagonal=*/1);  // the future: exactly zero
      EXPECT_EQ(above.abs().max().item<float>(), 0.0f);
      EXPECT_TRUE(torch::allclose(p.sum(-1), torch::ones({3, 2, 20}), 1e-5, 1e-5));
      EXPECT_GE(p.min().item<float>(), 0.0f);
    }
  }
  EXPECT_TRUE(torch::allclose(recorded_logits, plain, 1e-5, 1e-5)) << "recording must not change the output";
  for (const auto& block : *model->h) EXPECT_EQ(block->as<Block>()->attn->record_probs, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Kinds, RecordedKind, ::testing::ValuesIn(encoding_kinds()),
                         [](const auto& info) { return info.param; });

TEST(AttentionStats, HandMadeMatrixGivesHandComputedValues) {
  // One head, three queries: row i is a distribution over keys 0..i.
  auto p = torch::tensor({1.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.2, 0.3, 0.5}, torch::kDouble).view({1, 1, 3, 3});
  auto s = attention_head_stats(p);
  // Distance per query: 0; 0.5*1 = 0.5; 0.2*2 + 0.3*1 = 0.7 -> mean 0.4.
  EXPECT_NEAR(s.distance[0].item<double>(), 0.4, 1e-12);
  // Entropy per query: 0; ln 2; -(0.2 ln 0.2 + 0.3 ln 0.3 + 0.5 ln 0.5).
  const double h2 = std::log(2.0), h3 = -(0.2 * std::log(0.2) + 0.3 * std::log(0.3) + 0.5 * std::log(0.5));
  EXPECT_NEAR(s.entropy[0].item<double>(), (0 + h2 + h3) / 3, 1e-12);
  // Normalised over queries 1 and 2: ln2/ln2 = 1 and h3/ln3.
  EXPECT_NEAR(s.entropy_norm[0].item<double>(), (1.0 + h3 / std::log(3.0)) / 2, 1e-12);
  // First-token share over queries 1 and 2: (0.5 + 0.2) / 2.
  EXPECT_NEAR(s.first_share[0].item<double>(), 0.35, 1e-12);
}

// One token: there is no query i >= 1, over which the normalised entropy and the first-token share are
// defined: both not a number (null in attention.json), not a share of 1.
TEST(AttentionStats, OneTokenHasNoNormalisedEntropyOrFirstShare) {
  auto s = attention_head_stats(torch::ones({1, 2, 1, 1}, torch::kDouble));
  for (int h = 0; h < 2; ++h) {
    EXPECT_TRUE(std::isnan(s.entropy_norm[h].item<double>()));
    EXPECT_TRUE(std::isnan(s.first_share[h].item<double>()));
    EXPECT_EQ(s.distance[h].item<double>(), 0.0);
  }
}

TEST(AttentionStats, UniformCausalAttentionHasReferenceValues) {
  const int64_t T = 9;
  auto p = torch::ones({T, T}, torch::kDouble).tril();
  p = (p / p.sum(-1, true)).view({1, 1, T, T}).expand({2, 3, T, T});  // batch 2, heads 3
  auto s = attention_head_stats(p);
  EXPECT_TRUE(torch::allclose(s.distance, torch::full({3}, (T - 1) / 4.0, torch::kDouble)));  // mean of i/2
  EXPECT_TRUE(torch::allclose(s.entropy_norm, torch::ones({3}, torch::kDouble)));
}

TEST(AttentionStats, PooledMapsKeepRowsSummingToOne) {
  const int64_t T = 10;
  auto p = torch::rand({2, T, T}, torch::kDouble).tril();
  p = p / p.sum(-1, true);
  auto pooled = pool_attention_map(p, 4);  // blocks of 3: 4 rows, the last holding one query
  ASSERT_EQ(pooled.sizes(), torch::IntArrayRef({2, 4, 4}));
  EXPECT_TRUE(torch::allclose(pooled.sum(-1), torch::ones({2, 4}, torch::kDouble)));
  EXPECT_NEAR(pooled[0][0][0].item<double>(), p[0].slice(0, 0, 3).slice(1, 0, 3).sum().item<double>() / 3, 1e-12);
  EXPECT_TRUE(torch::equal(pool_attention_map(p, 16), p));  // small maps stay as they are
}

// On LibTorch 2.x training takes the fused kernel (scaled_dot_product_attention, the bias as its
// attn_mask) and recording takes the explicit path: both must give the same gradients, the learned
// biases' (t5, kerple, fire) included. On 1.x both paths are the explicit one.
TEST_P(RecordedKind, FusedAndExplicitPathsGiveTheSameGradients) {
  torch::manual_seed(0);
  GPT model(tiny(GetParam()));
  model->train();  // dropout is 0: the same function in both modes
  auto idx = torch::randint(0, 11, {3, 20}, torch::kLong);
  auto grads = [&](bool record) {
    model->zero_grad();
    std::unique_ptr<AttentionRecorder> recorder;
    if (record) recorder = std::make_unique<AttentionRecorder>(model);
    model->forward(idx).square().mean().backward();
    std::map<std::string, torch::Tensor> g;
    for (const auto& p : model->named_parameters()) g[p.key()] = p.value().grad().clone();
    return g;
  };
  const auto fused = grads(false), expl = grads(true);
  ASSERT_EQ(fused.size(), expl.size());
  for (const auto& [name, g] : fused) {
    const double scale = std::max(g.abs().max().item<double>(), 1e-12);
    EXPECT_LE((g - expl.at(name)).abs().max().item<double>(), 1e-5 * scale + 1e-7) << name;
  }
  for (const auto& p : model->pos->parameters()) EXPECT_GT(p.grad().abs().sum().item<double>(), 0) << "pos parameter without a gradient";
}
