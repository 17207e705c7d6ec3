// Generation with a KV cache gives the tokens and logits of a full forward over the whole prefix,
// for every encoding: random (untrained) tiny models with every parameter, biases and position
// tables included, perturbed away from their zero or constant initialisation.
#include <gtest/gtest.h>

#include <iostream>

#include "model/generate.h"
#include "test_models.h"

using namespace poslab;

static GPT random_model(const std::string& kind, int block_size = 16, double rotary_fraction = 1.0, int n_embd = 16) {
  ModelConfig m = poslab::testing::tiny(kind);
  m.block_size = block_size, m.bias = true, m.n_embd = n_embd;
  m.pos_encoding.rotary_fraction = rotary_fraction;
  m.pos_encoding.scale_base = 4.0;  // xpos: a strong decay, so a wrong key scale shows in the logits
  torch::manual_seed(3);
  GPT model(m);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.3);  // CoPE's zero table, zero biases, ...
  model->eval();
  return model;
}

static std::vector<int64_t> prompt() { return {1, 5, 2, 7, 3}; }

// Cached vs recomputed generation: same tokens; returns the largest logit difference over all steps.
static double compare_generation(GPT& model, int64_t tokens, GenerateStats* cached_stats = nullptr) {
  std::vector<torch::Tensor> with_cache, without;
  GenerateOptions o{tokens, /*temperature=*/0.0, /*top_k=*/0, /*use_cache=*/true};
  auto a = generate(model, prompt(), o, [&](int64_t, const torch::Tensor& l) { with_cache.push_back(l.clone()); },
                    cached_stats);
  o.use_cache = false;
  auto b = generate(model, prompt(), o, [&](int64_t, const torch::Tensor& l) { without.push_back(l.clone()); });
  EXPECT_EQ(a, b);
  double worst = 0;
  for (size_t i = 0; i < with_cache.size(); ++i)
    worst = std::max(worst, (with_cache[i] - without[i]).abs().max().item<double>());
  return worst;
}

static GPT variant_model(const std::string& kind) {
  if (kind == "rope_half") return random_model("rope", 16, 0.5);
  if (kind == "rope_odd") return random_model("rope", 16, 0.5, /*n_embd=*/18);
  return random_model(kind);
}

class EveryKindCached : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryKindCached, GreedyTokensAndLogitsMatchFullForward) {
  const auto kind = GetParam();
  auto model = variant_model(kind);
  GenerateStats stats;
  const double worst = compare_generation(model, /*tokens=*/11, &stats);  // 5 + 11 = 16 = block_size
  std::cout << "[ kv cache ] " << kind << ": largest logit difference " << worst << "\n";
  EXPECT_LT(worst, 1e-4);
  EXPECT_EQ(stats.cached_steps, 11) << "every kind caches within block_size";
}

TEST_P(EveryKindCached, ChunkedPrefillMatchesFullForward) {
  // Several new queries at once against cached keys: the rectangular mask and bias rows.
  const auto kind = GetParam();
  auto model = variant_model(kind);
  torch::InferenceMode guard;
  auto idx = torch::randint(0, 11, {2, 14}, torch::kLong);  // (B, T)
  auto full = model->forward(idx);                           // (B, T, V)
  KVCache cache(2);
  auto first = model->forward_cached(idx.slice(1, 0, 6), cache);  // (B, 6, V)
  auto second = model->forward_cached(idx.slice(1, 6, 9), cache);
  auto third = model->forward_cached(idx.slice(1, 9), cache);
  EXPECT_EQ(cache.length, 14);
  const double worst = (torch::cat({first, second, third}, 1) - full).abs().max().item<double>();
  EXPECT_LT(worst, 1e-4) << kind;
}

TEST_P(EveryKindCached, BlockedPrefillMatchesFullForward) {
  // A prefill past the attention budget runs in query blocks (here forced to 4 queries); the cache it
  // leaves must serve the next tokens as a whole prefill's does. The reference attends whole.
  const auto kind = GetParam();
  auto model = variant_model(kind);
  torch::InferenceMode guard;
  auto idx = torch::randint(0, 11, {2, 16}, torch::kLong);  // (B, T)
  model->query_block = 0;
  auto full = model->forward(idx);  // (B, T, V), whole attention: T is far under the budget
  model->query_block = 4;
  KVCache cache(2);
  auto prefill = model->forward_cached(idx.slice(1, 0, 13), cache);  // (B, 13, V), blocks of 4, 4, 4, 1
  EXPECT_EQ(model->last_query_block, 4) << "the prefill ran in blocks";
  auto next = model->forward_cached(idx.slice(1, 13), cache);        // (B, 3, V) against the cached keys
  model->query_block = 0;
  EXPECT_EQ(cache.length, 16);
  const double worst = (torch::cat({prefill, next}, 1) - full).abs().max().item<double>();
  EXPECT_LT(worst, 1e-4) << kind;
}

TEST_P(EveryKindCached, LastRowsMatchTheWholeForwardsLastRows) {
  // Logits of the last rows only (a probe's prompt, a sampler's prefill): the final block runs those
  // queries, its MLP and the head alone. Whole attention and query blocks (4 and 5: the last rows start
  // inside a block or on its edge), and from the cache, which must still hold every token's keys.
  const auto kind = GetParam();
  auto model = variant_model(kind);
  torch::InferenceMode guard;
  auto idx = torch::randint(0, 11, {2, 16}, torch::kLong);  // (B, T)
  model->query_block = 0;
  auto full = model->forward(idx);  // (B, T, V)
  for (int64_t block : {0, 4, 5}) {
    model->query_block = block;
    for (int64_t last : {1, 3, 8, 15}) {
      auto rows = model->forward(idx, {}, last);  // (B, last, V)
      ASSERT_EQ(rows.sizes(), (std::vector<int64_t>{2, last, 11})) << kind;
      const double worst = (rows - full.slice(1, 16 - last)).abs().max().item<double>();
      EXPECT_LT(worst, 1e-4) << kind << " block=" << block << " last=" << last;
    }
    EXPECT_EQ(model->forward(idx, {}, 16).sizes(), full.sizes()) << "last = T: every row";
    KVCache cache(2);
    auto prefill = model->forward_cached(idx.slice(1, 0, 13), cache, /*last=*/2);  // (B, 2, V)
    auto next = model->forward_cached(idx.slice(1, 13), cache);                    // (B, 3, V) against the cache
    EXPECT_EQ(cache.length, 16);
    const double worst = (torch::cat({prefill, next}, 1) - full.slice(1, 11)).abs().max().item<double>();
    EXPECT_LT(worst, 1e-4) << kind << " block=" << block << " (cached)";
  }
  model->query_block = 0;
}

static std::vector<std::string> kinds_and_variants() {
  auto out = encoding_kinds();
  out.push_back("rope_half");  // rotary_fraction 0.5
  out.push_back("rope_odd");   // rotary_fraction 0.5 of an odd head (9: 4 dims rotate)
  return out;
}
INSTANTIATE_TEST_SUITE_P(Kinds, EveryKindCached, ::testing::ValuesIn(kinds_and_variants()));

TEST(KVCache, GenerationPastBlockSizeKeepsCachingForExtrapolatingKinds) {
  for (const std::string kind : {"alibi", "rope", "t5", "cope"}) {
    auto model = random_model(kind);
    GenerateStats stats;
    const double worst = compare_generation(model, /*tokens=*/40, &stats);  // to 45 tokens, block_size 16
    std::cout << "[ kv cache ] " << kind << " to 45 tokens: largest logit difference " << worst << "\n";
    EXPECT_LT(worst, 1e-4) << kind;
    EXPECT_EQ(stats.cached_steps, 40) << kind;
  }
}

TEST(KVCache, LearnedTableFallsBackToRecomputeWhenItsWindowSlides) {
  auto model = random_model("learned");
  GenerateStats stats;
  const double worst = compare_generation(model, /*tokens=*/20, &stats);  // 5 + 20 > 16 rows
  EXPECT_LT(worst, 1e-4);
  EXPECT_EQ(stats.cached_steps, 12);  // lengths 5..16 fit the table
  EXPECT_EQ(stats.recompute_steps, 8);
}

TEST(KVCache, XposFallsBackPastItsScaleRange) {
  auto model = random_model("xpos");  // scale_base 4: cacheable up to 64 tokens
  EXPECT_TRUE(model->pos->kv_cacheable(64));
  EXPECT_FALSE(model->pos->kv_cacheable(65));
  GenerateStats stats;
  EXPECT_LT(compare_generation(model, /*tokens=*/70, &stats), 1e-3);
  EXPECT_EQ(stats.cached_steps, 60);
}

TEST(KVCache, RandomizedEvaluationPositionsAndDynamicNtkAreNotCacheable) {
  auto model = random_model("rope");
  EXPECT_TRUE(model->pos->kv_cacheable(100));
  model->pos->set_randomize(64, /*eval=*/false);  // training-only draw: evaluation uses 0..T-1
  EXPECT_TRUE(model->pos->kv_cacheable(32));
  model->pos->set_randomize(64, /*eval=*/true);
  EXPECT_FALSE(model->pos->kv_cacheable(8));
  model->pos->set_randomize(0, false);
  model->pos->set_rope_scaling({"dynamic_ntk", 2.0, 16});
  EXPECT_FALSE(model->pos->kv_cacheable(8));
  model->pos->set_rope_scaling({"linear", 2.0, 16});
  EXPECT_TRUE(model->pos->kv_cacheable(8));
  GenerateStats stats;
  EXPECT_LT(compare_generation(model, 30, &stats), 1e-4);  // linear scaling, past block_size
  EXPECT_EQ(stats.cached_steps, 30);
}

// A randomized draw at evaluation has randomize.max_position positions to draw from: generation past that
// many tokens slides its window, as a learned table's does (it failed mid-generation), and each step's
// logits are a forward over the last max_position tokens (its draw from those tokens).
TEST(KVCache, RandomizedEvaluationSlidesPastMaxPosition) {
  auto model = random_model("rope");
  model->pos->set_randomize(12, /*eval=*/true);
  EXPECT_EQ(model->pos->eval_length_limit(), 12);
  std::vector<torch::Tensor> logits;
  GenerateStats stats;
  const auto out = generate(model, prompt(), {/*tokens=*/15, 0.0, 0, /*use_cache=*/true},
                            [&](int64_t, const torch::Tensor& l) { logits.push_back(l.clone()); }, &stats);
  ASSERT_EQ(out.size(), 15u);
  EXPECT_EQ(stats.recompute_steps, 15);
  std::vector<int64_t> all = prompt();
  all.insert(all.end(), out.begin(), out.end());
  torch::InferenceMode guard;
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t T = static_cast<int64_t>(prompt().size() + i), from = std::max<int64_t>(0, T - 12);
    auto context = torch::tensor(std::vector<int64_t>(all.begin() + from, all.begin() + T), torch::kLong).unsqueeze(0);
    auto want = model->forward(context).select(1, -1).squeeze(0);  // (V,)
    // Within float rounding (generation runs the final block for the last row alone): another draw of
    // positions, or another window, moves the logits by far more.
    EXPECT_TRUE(torch::allclose(want, logits[i], /*rtol=*/1e-5, /*atol=*/1e-5))
        << "step " << i << " (" << T << " tokens): largest difference " << (want - logits[i]).abs().max().item<double>();
  }
  model->pos->set_randomize(12, /*eval=*/false);
  EXPECT_EQ(model->pos->eval_length_limit(), -1);
}

// A small temperature is legal and means "nearly greedy": the logits divided by it left float's range (inf,
// then nan from softmax, and multinomial threw). Drawn from the largest logit down, the draw is the argmax.
TEST(Sampling, TinyTemperaturesPickTheGreedyTokens) {
  auto model = random_model("rope");
  GenerateOptions greedy{/*tokens=*/12, /*temperature=*/0.0, /*top_k=*/0, /*use_cache=*/true};
  const auto want = generate(model, prompt(), greedy);
  for (const double t : {1e-37, 1e-39, 1e-45, 1e-300, 4.9e-324}) {
    torch::manual_seed(5);
    GenerateOptions o{12, t, /*top_k=*/0, true};
    EXPECT_EQ(generate(model, prompt(), o), want) << "temperature " << t;
    o.top_k = 3;
    EXPECT_EQ(generate(model, prompt(), o), want) << "temperature " << t << ", top_k 3";
  }
  // top_k 1 at an ordinary temperature is greedy too (the one kept token).
  GenerateOptions one{12, 1.0, /*top_k=*/1, true};
  EXPECT_EQ(generate(model, prompt(), one), want);
}
