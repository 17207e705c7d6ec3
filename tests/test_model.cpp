// Model-level properties: causality for every encoding, parameters counted once, the tied head,
// weight-decay groups, and what a pre-LayerNorm block does to the naive index encoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "test_models.h"
#include "model/gpt.h"

using namespace poslab;

using poslab::testing::tiny;

class EveryKind : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryKind, ChangingTokenTNeverChangesEarlierLogits) {
  torch::manual_seed(0);
  GPT model(tiny(GetParam()));
  model->eval();
  torch::NoGradGuard no_grad;
  auto idx = torch::randint(0, 11, {2, 20}, torch::kLong);
  auto base = model->forward(idx);
  for (int64_t t : {0, 7, 19}) {
    auto changed = idx.clone();
    changed.select(1, t).fill_((idx[0][t].item<int64_t>() + 3) % 11);
    auto out = model->forward(changed);
    if (t > 0) EXPECT_TRUE(torch::allclose(out.slice(1, 0, t), base.slice(1, 0, t), 1e-6, 1e-6)) << "t=" << t;
    EXPECT_FALSE(torch::allclose(out.slice(1, t), base.slice(1, t))) << "the change must show at t=" << t;
  }
}

TEST_P(EveryKind, EveryParameterRegisteredOnce) {
  GPT model(tiny(GetParam()));
  std::set<const void*> seen;
  int64_t by_name = 0;
  for (const auto& p : model->named_parameters()) {
    EXPECT_TRUE(seen.insert(p.value().data_ptr()).second) << p.key() << " shares storage with another parameter";
    by_name += p.value().numel();
  }
  const auto& m = model->config;
  const int64_t C = m.n_embd, V = m.vocab_size;
  const int64_t per_block = 2 * C + 3 * C * C + C * C + 4 * C * C + 4 * C * C;  // ln_1, ln_2, attn, mlp (no bias)
  int64_t expected = V * C + m.n_layer * per_block + C;                        // wte (tied head), blocks, ln_f
  // The encodings' own parameters, from their definitions (H heads, hs head size, defaults of PosEncodingConfig).
  const int64_t H = m.n_head, hs = C / H;
  const std::map<std::string, int64_t> pos_params = {
      {"learned", m.block_size * C}, {"t5", 32 * H},      {"kerple_log", 2 * H}, {"kerple_power", 2 * H},
      {"fire", (32 + 32) + (32 * H + H) + 2},             {"cope", hs * 64}};
  if (pos_params.count(GetParam())) expected += pos_params.at(GetParam());
  EXPECT_EQ(by_name, expected);
  EXPECT_EQ(model->num_params(), expected);
}

TEST_P(EveryKind, ForwardShapesAndLoss) {
  GPT model(tiny(GetParam()));
  auto idx = torch::randint(0, 11, {3, 12}, torch::kLong);
  auto logits = model->forward(idx);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 12, 11}));
  auto y = idx.clone();
  y.slice(1, 0, 6).fill_(-1);
  auto loss = GPTImpl::loss(logits, y);
  EXPECT_NEAR(loss.item<double>(), std::log(11.0), 0.5);  // near-uniform at init
}

// encoding_option_readers() says which kinds read each option (a --set of it for another kind is refused):
// changing the option must change the model's logits exactly for those kinds. Each option gets a second
// value valid for its readers at the tiny sizes; parameters that start at zero (CoPE's table) are filled
// alike in both models first, or a changed table size would not show.
TEST_P(EveryKind, AnOptionChangesTheModelExactlyWhereItsKindReadsIt) {
  const std::map<std::string, std::function<void(PosEncodingConfig&)>> changed = {
      {"base", [](auto& e) { e.base = 50; }},           {"scale", [](auto& e) { e.scale = 3; }},
      {"bits", [](auto& e) { e.bits = 4; }},             {"signed", [](auto& e) { e.signed_bits = false; }},
      {"rotary_fraction", [](auto& e) { e.rotary_fraction = 0.5; }},
      {"scale_base", [](auto& e) { e.scale_base = 128; }},
      {"num_buckets", [](auto& e) { e.num_buckets = 8; }}, {"max_distance", [](auto& e) { e.max_distance = 20; }},
      {"mlp_width", [](auto& e) { e.mlp_width = 8; }},   {"init_c", [](auto& e) { e.init_c = 1.0; }},
      {"init_L", [](auto& e) { e.init_L = 16; }},        {"npos", [](auto& e) { e.npos = 8; }}};
  const auto readers = encoding_option_readers();
  auto logits = [](const ModelConfig& m) {
    torch::manual_seed(0);
    GPT model(m);
    model->eval();
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters())
      if (p.abs().max().item<double>() == 0) p.copy_(torch::sin(torch::arange(p.numel()).reshape(p.sizes()) * 0.37));
    torch::manual_seed(1);
    return model->forward(torch::randint(0, 11, {2, 32}, torch::kLong));  // (2, 32, 11): distances up to 31
  };
  const ModelConfig m = tiny(GetParam());
  const auto base = logits(m);
  for (const auto& [option, kinds] : readers) {
    const bool builtin_reader = std::any_of(kinds.begin(), kinds.end(), [](const std::string& k) {
      return std::count(poslab::testing::kBuiltInKinds.begin(), poslab::testing::kBuiltInKinds.end(), k) > 0;
    });
    if (!builtin_reader) continue;  // a test's own plug-in-like kind (test_registry.cpp)
    ASSERT_TRUE(changed.count(option)) << "no second value for model.pos_encoding." << option << " in this test";
    ModelConfig other = m;
    changed.at(option)(other.pos_encoding);
    const bool reads = std::count(kinds.begin(), kinds.end(), GetParam()) > 0;
    const auto out = logits(other);
    const bool same = out.sizes() == base.sizes() && torch::equal(out, base);
    EXPECT_EQ(same, !reads) << "model.pos_encoding." << option << (reads ? " is said to be read" : " is said to be ignored")
                            << " by " << GetParam() << ", but changing it " << (same ? "changes nothing" : "changes the logits");
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, EveryKind, ::testing::ValuesIn(encoding_kinds()),
                         [](const auto& info) { return info.param; });

TEST(Model, PositionalModuleRegisteredOnceOnTheModel) {
  GPT model(tiny("learned"));
  int count = 0;
  for (const auto& p : model->named_parameters()) count += p.key().find("pos.") != std::string::npos;
  EXPECT_EQ(count, 1);  // pos.weight, not h.0.attn.pos.weight as well
  EXPECT_TRUE(model->named_parameters().contains("pos.weight"));
}

TEST(Model, HeadIsTiedToTokenEmbedding) {
  GPT model(tiny("none"));
  model->eval();
  torch::NoGradGuard no_grad;
  auto idx = torch::randint(0, 11, {1, 5}, torch::kLong);
  auto before = model->forward(idx);
  model->wte->weight.mul_(2);
  EXPECT_FALSE(torch::allclose(before, model->forward(idx)));
  EXPECT_FALSE(model->named_parameters().contains("lm_head.weight"));
}

TEST(Model, LearnedRefusesLongInputWithClearError) {
  GPT model(tiny("learned"));
  auto idx = torch::zeros({1, 33}, torch::kLong);
  EXPECT_THROW(model->forward(idx), PositionLimitError);
  GPT rope(tiny("rope"));
  EXPECT_NO_THROW(rope->forward(torch::zeros({1, 100}, torch::kLong)));
}

TEST(Model, WeightDecayOnMatricesOnly) {
  auto c = tiny("learned");
  c.bias = true;
  GPT model(c);
  for (const auto& p : model->named_parameters()) {
    const auto& name = p.key();
    const bool matrix = name.find("c_attn.weight") != std::string::npos || name.find("c_proj.weight") != std::string::npos ||
                        name.find("c_fc.weight") != std::string::npos;
    EXPECT_EQ(model->decays(name, p.value()), matrix) << name;
  }
}

// The naive index encoding adds p to every component. LayerNorm subtracts the mean over
// components, and a constant added to every component is exactly such a mean: in exact
// arithmetic the blocks never see it, so "index" computes the same function as "none".
// Finite precision is where it shows: the offset eats the token's own significant bits.
TEST(IndexEncoding, PreLayerNormCancelsItInExactArithmetic) {
  torch::manual_seed(3);
  GPT none(tiny("none"));
  auto c = tiny("index");
  c.pos_encoding.scale = 1.0;
  GPT index(c);
  torch::NoGradGuard no_grad;
  for (auto& p : index->named_parameters()) p.value().copy_(none->named_parameters()[p.key()]);
  none->to(torch::kDouble);
  index->to(torch::kDouble);
  auto idx = torch::randint(0, 11, {2, 32}, torch::kLong);
  auto diff64 = (index->forward(idx) - none->forward(idx)).abs().max().item<double>();
  EXPECT_LT(diff64, 1e-9);

  // fp32 with a large offset: the same weights now disagree, and more at later positions.
  auto big = tiny("index");
  big.pos_encoding.scale = 1e4;
  GPT index_big(big);
  for (auto& p : index_big->named_parameters()) p.value().copy_(none->named_parameters()[p.key()].to(torch::kFloat));
  none->to(torch::kFloat);
  auto err = (index_big->forward(idx) - none->forward(idx)).abs().amax({0, 2});  // (T,)
  EXPECT_GT(err.slice(0, 24).max().item<double>(), 1e-3);
  EXPECT_GT(err.slice(0, 24).mean().item<double>(), err.slice(0, 1, 4).mean().item<double>());
}

// The pre-allocation memory check counts parameters the way the model does (a little generously).
#include "train/memory_estimate.h"

TEST(MemoryEstimate, ParametersMatchTheModelWithinFivePercent) {
  for (const char* kind : {"none", "learned", "rope", "alibi"}) {
    Config c;
    c.model = tiny(kind);
    c.model.n_embd = 64, c.model.n_head = 4, c.model.n_layer = 3, c.model.vocab_size = 50;
    GPT model(c.model);
    const double actual = static_cast<double>(model->num_params());
    const double estimated = static_cast<double>(estimate_training_memory(c).params);
    EXPECT_GE(estimated, actual) << kind;
    EXPECT_LE(estimated, 1.05 * actual) << kind;
  }
  Config huge;
  huge.model.n_embd = 65536, huge.model.n_layer = 8, huge.model.vocab_size = 100;
  EXPECT_THROW(check_training_fits(huge), ConfigError);  // ~7 TB: no machine this runs on has it
}

TEST(MemoryEstimate, EvaluationGrowsLinearlyInLengthOnceAttentionIsBlocked) {
  Config c;
  c.model = tiny("alibi");
  c.model.n_embd = 128, c.model.n_head = 4, c.model.n_layer = 4, c.model.vocab_size = 65;
  const int64_t budget = int64_t{64} << 20;
  auto bytes = [&](int64_t T) { return estimate_evaluation_memory(c, T, budget).total(); };
  // Past the length where the whole (H, T, T) scores exceed the budget, doubling T adds the same
  // per-token activations each time: second differences vanish (no T^2 term).
  const int64_t a = bytes(16384), b = bytes(32768), d = bytes(65536);
  EXPECT_EQ(d - b, 2 * (b - a));
  // The per-token part is the residual stream and friends (16 C) plus the logits (3 V), fp32.
  EXPECT_EQ(b - a, 16384 * (16 * 128 + 3 * 65) * 4);
  // Short sequences: the whole scores, 3 fp32 copies of (H, T, T), when they fit the budget.
  EXPECT_EQ(bytes(64) - estimate_evaluation_memory(c, 64, 0).total(), 4 * 64 * 64 * 4 * 3);
  // A 4-layer, 128-wide model at 65,536 tokens stays under 1 GiB: evaluable on a laptop.
  EXPECT_LT(d, int64_t{1} << 30);
  try {
    check_evaluation_fits(c, 4'000'000'000LL);  // ~32 TB of activations
    ADD_FAILURE() << "an evaluation that cannot fit must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("evaluation at 4000000000 tokens needs ~"), std::string::npos) << e.what();
  }
}
