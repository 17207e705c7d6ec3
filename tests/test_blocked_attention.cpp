// Attention in query blocks (evaluation's linear-memory path) against whole attention, for every
// encoding: the same logits within float tolerance, at lengths that are and are not block multiples.
#include <gtest/gtest.h>

#include "test_fused.h"
#include "test_models.h"
#include "model/gpt.h"
#include "util/runtime.h"
#include "train/memory_estimate.h"

#include <cmath>

using namespace poslab;
using poslab::testing::tiny;

namespace {

// A tiny model whose encoding parameters are random too: several start at zero (CoPE's table, T5's
// buckets), where a wrong block of bias rows would go unnoticed.
GPT blocked_model(const std::string& kind, bool bias_heavy = false) {
  torch::manual_seed(1);
  auto config = tiny(kind);
  config.n_head = 4;
  GPT model(config);
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters())
    if (p.key().rfind("pos.", 0) == 0) p.value().normal_(0.0, bias_heavy ? 1.0 : 0.3);
  model->eval();
  return model;
}

torch::Tensor logits_with_block(GPT& model, const torch::Tensor& idx, int64_t block) {
  model->query_block = block;
  return model->forward(idx);
}

}  // namespace

class BlockedEveryKind : public ::testing::TestWithParam<std::string> {};

TEST_P(BlockedEveryKind, BlocksEqualWholeAttention) {
  auto model = blocked_model(GetParam());
  torch::NoGradGuard no_grad;
  for (int64_t T : {32, 29, 9}) {  // multiples of the block of 8 and not; 9 leaves a block of one query
    auto idx = torch::randint(0, 11, {3, T}, torch::kLong);
    auto whole = logits_with_block(model, idx, /*block=*/T);
    for (int64_t block : {8, 5, 1}) {
      auto blocked = logits_with_block(model, idx, block);
      const double diff = (blocked - whole).abs().max().item<double>();
      EXPECT_LT(diff, 2e-5) << GetParam() << " T=" << T << " block=" << block << ": largest difference " << diff;
    }
  }
}

// The default precision on a bf16 CPU: autocast, where blocks take their own explicit path (scale in q,
// causal mask on the last keys only). bf16 rounds q, k and v, so the bound is looser: measured, the paths
// differ by <= 0.6% of the largest logit; letting each query see one future key moved 11 of the 14 kinds
// by 3.6-8% (the embedding kinds' small logits by 0.5%; CoPE builds the whole mask, as in fp32).
TEST_P(BlockedEveryKind, BlocksEqualWholeAttentionUnderBf16Autocast) {
  POSLAB_SKIP_WITHOUT_CPU_BF16();
  auto model = blocked_model(GetParam());
  torch::NoGradGuard no_grad;
  Runtime rt;
  rt.bf16 = true;
  AutocastGuard autocast(rt);
  for (int64_t T : {32, 29}) {
    auto idx = torch::randint(0, 11, {2, T}, torch::kLong);
    auto whole = logits_with_block(model, idx, /*block=*/T).to(torch::kFloat);
    for (int64_t block : {8, 5, 1}) {
      auto blocked = logits_with_block(model, idx, block).to(torch::kFloat);
      const double diff = (blocked - whole).abs().max().item<double>();
      const double scale = whole.abs().max().item<double>();
      EXPECT_LT(diff, 0.015 * scale) << GetParam() << " T=" << T << " block=" << block << ": largest difference " << diff
                                    << " (largest logit " << scale << ")";
    }
  }
}

TEST_P(BlockedEveryKind, BlocksAreTakenOnlyWithoutAutograd) {
  auto model = blocked_model(GetParam());
  model->query_block = 4;
  EXPECT_EQ(model->query_block_for(2, 32), 32) << "training must attend whole (autograd is on)";
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model->query_block_for(2, 32), 4);
  EXPECT_EQ(model->query_block_for(2, 3), 3) << "a block never exceeds the sequence";
}

INSTANTIATE_TEST_SUITE_P(Kinds, BlockedEveryKind, ::testing::ValuesIn(encoding_kinds()),
                         [](const auto& info) { return info.param; });

TEST(BlockedAttention, BlockSizedToTheBudget) {
  auto model = blocked_model("alibi");
  torch::NoGradGuard no_grad;
  const int64_t B = 2, T = 4096, H = model->config.n_head;
  model->attention_budget_bytes = int64_t{8} << 20;
  const int64_t block = model->query_block_for(B, T);
  // Three fp32 copies of a block's scores (scores, softmax, product input) fit the budget; one more row would not.
  EXPECT_LE(block * B * H * T * 4 * 3, model->attention_budget_bytes);
  EXPECT_GT((block + 1) * B * H * T * 4 * 3, model->attention_budget_bytes);
  model->attention_budget_bytes = int64_t{1} << 40;
  EXPECT_EQ(model->query_block_for(B, T), T) << "whole attention when the scores fit";
  model->attention_budget_bytes = 1;
  EXPECT_EQ(model->query_block_for(B, T), 1) << "at least one query per block";
}

// FIRE's bias runs an MLP over every (query, key) pair: its hidden layer, before and after the ReLU, counts
// in a block's bytes beside the scores, and in the attention command's check of the whole (T, T).
TEST(BlockedAttention, FiresHiddenLayerCountsInTheBlockAndTheAttentionCheck) {
  auto config = tiny("fire");
  config.n_head = 4;
  config.pos_encoding.mlp_width = 256;  // wide enough that its hidden layer outweighs the kept probabilities
  GPT model(config);
  model->eval();
  const int64_t per_pair = 2 * 256 * 4;
  EXPECT_EQ(model->pos->bias_scratch_bytes_per_pair(), per_pair);
  EXPECT_EQ(blocked_model("alibi")->pos->bias_scratch_bytes_per_pair(), 0);
  torch::NoGradGuard no_grad;
  const int64_t B = 2, T = 4096, H = model->config.n_head;
  model->attention_budget_bytes = int64_t{64} << 20;
  const int64_t block = model->query_block_for(B, T);
  // Three copies of a row's scores (FIRE needs none of its own) plus the hidden layer over the row's keys.
  const int64_t row = B * H * T * 4 * 3 + T * per_pair;
  EXPECT_LE(block * row, model->attention_budget_bytes);
  EXPECT_GT((block + 1) * row, model->attention_budget_bytes);
  // The attention command's check: a length whose probabilities fit a quarter of the free memory, but whose
  // hidden layer over the whole (T, T) would take twice all of it, is refused only with the scratch counted.
  const int64_t available = available_memory_bytes();
  if (available <= 0) GTEST_SKIP() << "no /proc/meminfo";
  Config c;
  c.model = model->config;
  const double kept_per_pair = (c.model.n_layer + 3.0) * c.model.n_head * 4;
  const auto tokens = static_cast<int64_t>(std::sqrt(available / 4.0 / kept_per_pair));
  ASSERT_GT(per_pair * static_cast<double>(tokens) * tokens, 2.0 * available) << "scratch too small to tell";
  EXPECT_NO_THROW(check_attention_fits(c, tokens, 0));
  EXPECT_THROW(check_attention_fits(c, tokens, per_pair), ConfigError);
}

TEST(BlockedAttention, RandomizedPositionsAtEvaluationUseTheSameDraw) {
  // Bias rows are cut from the forward's one draw of positions: same draw, same logits.
  auto config = tiny("alibi");
  config.pos_encoding.randomize.max_position = 256;
  config.pos_encoding.randomize.eval = true;
  torch::manual_seed(3);
  GPT model(config);
  model->eval();
  torch::NoGradGuard no_grad;
  auto idx = torch::randint(0, 11, {2, 20}, torch::kLong);
  const auto positions = model->pos->positions(20, /*training=*/false, torch::kCPU);
  model->query_block = 20;
  auto whole = model->forward(idx, positions);
  model->query_block = 6;
  auto blocked = model->forward(idx, positions);
  EXPECT_LT((blocked - whole).abs().max().item<double>(), 2e-5);
}
