// The encodings beyond the classic seven (t5, kerple, fire, xpos, sandwich, cope, randomize, rotary_fraction),
// each pinned to its published formula. Expected values are computed here from the formulas
// (encodings-reference.md), never by calling the code under test.
#include <gtest/gtest.h>

#include <cmath>

#include "model/gpt.h"
#include "model/positional/cope.h"
#include "model/positional/positional.h"

using namespace poslab;

static PosEncodingConfig kind_config(const std::string& kind) {
  PosEncodingConfig e;
  e.kind = kind;
  return e;
}

static std::shared_ptr<PositionalEncodingImpl> make(const PosEncodingConfig& e, int64_t n_embd = 16,
                                                    int64_t n_head = 2, int64_t block_size = 32) {
  return make_positional({e, n_embd, n_head, block_size});
}

static torch::Tensor arange(int64_t n) { return torch::arange(n, torch::kLong); }

// ---- the bias hook takes positions ----

TEST(BiasHook, AlibiAtArbitraryPositions) {
  auto alibi = make(kind_config("alibi"), 16, 4);
  auto q_pos = torch::tensor({3, 9, 40}, torch::kLong), k_pos = torch::tensor({0, 3, 9, 40}, torch::kLong);
  auto b = alibi->bias(q_pos, k_pos);  // (H, 3, 4)
  const double slopes[4] = {0.25, 0.0625, 0.015625, 0.00390625};  // 2^(-8/4 * h), h = 1..4
  ASSERT_EQ(b.sizes(), (std::vector<int64_t>{4, 3, 4}));
  for (int h = 0; h < 4; ++h)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j)
        EXPECT_NEAR(b[h][i][j].item<double>(), -slopes[h] * (q_pos[i].item<double>() - k_pos[j].item<double>()), 1e-5);
}

// ---- rope + rotary_fraction ----

TEST(RotaryFraction, RotatesOnlyTheFirstPairs) {
  auto e = kind_config("rope");
  e.rotary_fraction = 0.5;
  auto rope = make(e, 32, 2);  // head 16: the first 8 dims rotate, with theta_i = base^(-2i/8)
  auto q = torch::randn({1, 2, 12, 16}, torch::kDouble).to(torch::kFloat), k = torch::randn({1, 2, 12, 16});
  auto [rq, rk] = rope->rotate(q, k, arange(12));
  EXPECT_TRUE(torch::equal(rq.slice(-1, 8), q.slice(-1, 8)));
  EXPECT_TRUE(torch::equal(rk.slice(-1, 8), k.slice(-1, 8)));
  for (int p : {0, 5, 11})
    for (int i = 0; i < 4; ++i) {
      const double a = p * std::pow(10000.0, -2.0 * i / 8);
      const double x0 = q[0][1][p][2 * i].item<double>(), x1 = q[0][1][p][2 * i + 1].item<double>();
      EXPECT_NEAR(rq[0][1][p][2 * i].item<double>(), x0 * std::cos(a) - x1 * std::sin(a), 1e-5);
      EXPECT_NEAR(rq[0][1][p][2 * i + 1].item<double>(), x0 * std::sin(a) + x1 * std::cos(a), 1e-5);
    }
}

TEST(RotaryFraction, AnOddHeadRotatesAnEvenPartAndPassesTheRest) {
  // Head 9 at fraction 0.5: floor(4.5) = 4 dims rotate (two pairs, theta_i = base^(-2i/4)), 5 pass through.
  auto e = kind_config("rope");
  e.rotary_fraction = 0.5;
  auto rope = make(e, 18, 2);
  auto q = torch::randn({1, 2, 7, 9}), k = torch::randn({1, 2, 7, 9});
  auto [rq, rk] = rope->rotate(q, k, arange(7));
  ASSERT_EQ(rq.sizes(), q.sizes());
  EXPECT_TRUE(torch::equal(rq.slice(-1, 4), q.slice(-1, 4)));
  EXPECT_TRUE(torch::equal(rk.slice(-1, 4), k.slice(-1, 4)));
  for (int p : {1, 6})
    for (int i = 0; i < 2; ++i) {
      const double a = p * std::pow(10000.0, -2.0 * i / 4);
      const double x0 = k[0][0][p][2 * i].item<double>(), x1 = k[0][0][p][2 * i + 1].item<double>();
      EXPECT_NEAR(rk[0][0][p][2 * i].item<double>(), x0 * std::cos(a) - x1 * std::sin(a), 1e-5);
      EXPECT_NEAR(rk[0][0][p][2 * i + 1].item<double>(), x0 * std::sin(a) + x1 * std::cos(a), 1e-5);
    }
}

// ---- xPos ----

TEST(Xpos, ZetaMatchesFormula) {
  auto xpos = make(kind_config("xpos"), 32, 2);
  auto zeta = xpos->inspect(4, 16, {}).at("zeta");
  ASSERT_EQ(zeta.numel(), 8);
  for (int k = 0; k < 8; ++k) EXPECT_NEAR(zeta[k].item<double>(), (2.0 * k + 0.4 * 16) / (1.4 * 16), 1e-7);
}

TEST(Xpos, ScoreIsRopeTimesDecayAndDependsOnDistanceOnly) {
  const int64_t hs = 8, T = 40;
  auto e = kind_config("xpos");
  e.scale_base = 16;  // a short gamma makes the decay visible over 40 positions
  auto xpos = make(e, hs, 1);
  auto q1 = torch::randn({hs}), k1 = torch::randn({hs});
  auto q = q1.view({1, 1, 1, hs}).expand({1, 1, T, hs}).contiguous(), k = k1.view({1, 1, 1, hs}).expand({1, 1, T, hs}).contiguous();
  auto [rq, rk] = xpos->rotate(q, k, arange(T));
  auto s = torch::matmul(rq, rk.transpose(-2, -1))[0][0];  // (T, T): q at n, k at m
  for (int n = 0; n < T; n += 3)
    for (int m = 0; m <= n; m += 4) {
      double want = 0;
      for (int i = 0; i < hs / 2; ++i) {
        const double phi = (m - n) * std::pow(10000.0, -2.0 * i / hs), zeta = (2.0 * i + 0.4 * hs) / (1.4 * hs);
        const double a0 = q1[2 * i].item<double>(), a1 = q1[2 * i + 1].item<double>();
        const double b0 = k1[2 * i].item<double>(), b1 = k1[2 * i + 1].item<double>();
        want += std::pow(zeta, (n - m) / 16.0) * (std::cos(phi) * (a0 * b0 + a1 * b1) + std::sin(phi) * (a1 * b0 - a0 * b1));
      }
      EXPECT_NEAR(s[n][m].item<double>(), want, 1e-4 * (1 + std::abs(want))) << n << "," << m;
    }
  for (int offset : {0, 3, 11})  // shift invariance, directly
    for (int n = offset + 1; n < T; n += 7) EXPECT_NEAR(s[n][n - offset].item<double>(), s[offset][0].item<double>(), 1e-4);
}

// The bound past which xPos's centred scales overflow: zeta^(-ceil(T/2)/gamma) with the smallest zeta, 2/7, by
// the published formula; within the bound every rotated q and k is finite, and past it check_length refuses
// the length (it came out as a nan loss reported ok) and the config refuses such a block_size.
TEST(Xpos, LengthsPastItsScalesRangeAreRefusedAndWithinItStayFinite) {
  for (double gamma : {1.0, 2.0, 4.0, 512.0}) {
    const int64_t limit = xpos_max_length(gamma);
    const double exponent = std::ceil(limit / 2.0) / gamma * std::log(3.5);  // ln of the largest scale
    EXPECT_LE(exponent, 80.0 + 1e-9) << gamma;
    EXPECT_GT((std::ceil((limit + 2) / 2.0)) / gamma * std::log(3.5), 80.0) << gamma;  // the bound is tight
  }
  auto e = kind_config("xpos");
  e.scale_base = 1;
  auto xpos = make(e, 16, 2, /*block_size=*/16);
  const int64_t limit = xpos_max_length(1);
  EXPECT_NO_THROW(xpos->check_length(limit));
  EXPECT_THROW(xpos->check_length(limit + 1), PositionLimitError);
  EXPECT_EQ(xpos->eval_length_limit(), limit);
  auto q = torch::randn({1, 2, limit, 8}), k = torch::randn({1, 2, limit, 8});
  auto [rq, rk] = xpos->rotate(q, k, arange(limit));
  EXPECT_TRUE(torch::isfinite(rq).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(rk).all().item<bool>());
  // Training at a block its scales cannot hold: refused by the config, naming scale_base.
  try {
    check_positional({e, 16, 2, /*block_size=*/limit + 2});
    ADD_FAILURE() << "block_size past xpos_max_length accepted";
  } catch (const ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("model.pos_encoding.scale_base"), std::string::npos) << err.what();
  }
}

// An odd head size for a rotary kind: the error gives the head size it found (16 wide, 16 heads: 1).
TEST(Rotary, AnOddHeadSizeIsRefusedSayingWhatItIs) {
  for (const char* kind : {"rope", "xpos"}) try {
      check_positional({kind_config(kind), /*n_embd=*/16, /*n_head=*/16, /*block_size=*/8});
      ADD_FAILURE() << kind << ": head size 1 accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("model.n_embd"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("here 16/16 = 1"), std::string::npos) << e.what();
    }
}

TEST(Xpos, FactorsStayFiniteAtLongLengths) {
  auto xpos = make(kind_config("xpos"), 16, 2);
  auto q = torch::randn({1, 2, 8192, 8}), k = torch::randn({1, 2, 8192, 8});
  auto [rq, rk] = xpos->rotate(q, k, arange(8192));
  EXPECT_TRUE(torch::isfinite(rq).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(rk).all().item<bool>());
}

// ---- T5 ----

static int64_t hf_causal_bucket(int64_t distance, int num_buckets, int max_distance) {
  // HF T5Attention._relative_position_bucket, bidirectional=False, float32 arithmetic as torch does it.
  const int64_t n = std::max<int64_t>(distance, 0);
  const int max_exact = num_buckets / 2;
  if (n < max_exact) return n;
  const float large = std::log(static_cast<float>(n) / max_exact) /
                      static_cast<float>(std::log(static_cast<double>(max_distance) / max_exact)) *
                      static_cast<float>(num_buckets - max_exact);
  return std::min<int64_t>(num_buckets - 1, max_exact + static_cast<int64_t>(large));
}

TEST(T5, BucketsEqualTheReferenceFunction) {
  auto t5 = make(kind_config("t5"));
  auto buckets = t5->inspect(501, 8, {}).at("buckets");  // (501, 501): row i, column j
  const std::vector<int64_t> distances = {0, 1, 5, 15, 16, 20, 50, 127, 128, 500};
  const std::vector<int64_t> by_hand = {0, 1, 5, 15, 16, 17, 24, 31, 31, 31};
  for (size_t k = 0; k < distances.size(); ++k) {
    const int64_t d = distances[k];
    EXPECT_EQ(buckets[500][500 - d].item<int64_t>(), hf_causal_bucket(d, 32, 128)) << "distance " << d;
    EXPECT_EQ(buckets[500][500 - d].item<int64_t>(), by_hand[k]) << "distance " << d;
  }
  EXPECT_EQ(buckets[3][10].item<int64_t>(), 0);  // above the diagonal: bucket 0
}

TEST(T5, BiasIsTheTableEntryOfTheBucket) {
  auto e = kind_config("t5");
  e.num_buckets = 8;
  e.max_distance = 20;
  auto t5 = make(e, 16, 2);
  auto weight = t5->named_parameters()["weight"];  // (8, H)
  auto b = t5->bias(arange(30), arange(30));       // (H, 30, 30)
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 30; i += 3)
      for (int j = 0; j <= i; j += 2)
        EXPECT_EQ(b[h][i][j].item<float>(), weight[hf_causal_bucket(i - j, 8, 20)][h].item<float>()) << i << "," << j;
}

// ---- KERPLE ----

static void set_kerple(PositionalEncodingImpl& pe, std::vector<float> r1, std::vector<float> r2) {
  torch::NoGradGuard no_grad;
  pe.named_parameters()["r1"].copy_(torch::tensor(r1).view({-1, 1, 1}));
  pe.named_parameters()["r2"].copy_(torch::tensor(r2).view({-1, 1, 1}));
}

TEST(Kerple, LogAndPowerMatchTheirFormulas) {
  for (const bool power : {false, true}) {
    auto kerple = make(kind_config(power ? "kerple_power" : "kerple_log"), 16, 2);
    set_kerple(*kerple, {0.7f, 1.5f}, {0.3f, 1.2f});
    auto b = kerple->bias(arange(25), arange(25));  // (H, 25, 25)
    const double r1[2] = {0.7, 1.5}, r2[2] = {0.3, 1.2};
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 25; i += 4)
        for (int j = 0; j <= i; j += 3) {
          const double d = i - j;
          const double want = power ? -r1[h] * std::pow(d, r2[h]) : -r1[h] * std::log(1 + r2[h] * d);
          EXPECT_NEAR(b[h][i][j].item<double>(), want, 1e-5 * (1 + std::abs(want))) << power << " " << i << "," << j;
        }
  }
}

TEST(Kerple, ParametersAreClampedPositive) {
  auto power = make(kind_config("kerple_power"), 16, 2);
  set_kerple(*power, {-1.0f, 0.5f}, {3.0f, 0.001f});
  power->bias(arange(4), arange(4));
  auto r1 = power->named_parameters()["r1"].flatten(), r2 = power->named_parameters()["r2"].flatten();
  EXPECT_FLOAT_EQ(r1[0].item<float>(), 0.01f);
  EXPECT_FLOAT_EQ(r1[1].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(r2[0].item<float>(), 2.0f);  // power: r2 <= 2
  EXPECT_FLOAT_EQ(r2[1].item<float>(), 0.01f);
  auto log = make(kind_config("kerple_log"), 16, 2);
  set_kerple(*log, {1.0f, 1.0f}, {3.0f, 0.0f});
  log->bias(arange(4), arange(4));
  EXPECT_FLOAT_EQ(log->named_parameters()["r2"].flatten()[0].item<float>(), 3.0f);  // log: no upper bound
}

// ---- Sandwich ----

TEST(Sandwich, MatchesNemoFormula) {
  auto e = kind_config("sandwich");
  auto sandwich = make(e, 32, 4);  // head size 8
  auto b = sandwich->bias(arange(40), arange(40));  // (4, 40, 40)
  for (int h = 0; h < 4; ++h)
    for (int i = 0; i < 40; i += 3)
      for (int j = 0; j <= i; j += 5) {
        double sum = 0;
        for (int k = 1; k <= 4; ++k) sum += std::cos((i - j) * std::pow(10000.0, -2.0 * k / 8));
        const double want = (sum - 4) / ((h + 1) * 8.0 / 4);
        EXPECT_NEAR(b[h][i][j].item<double>(), want, 1e-5) << h << " " << i << "," << j;
        EXPECT_LE(b[h][i][j].item<double>(), 1e-7);
      }
  EXPECT_EQ(b[2][7][7].item<float>(), 0.0f);
}

// ---- FIRE ----

TEST(Fire, InputIsNormalisedLogDistance) {
  auto fire = make(kind_config("fire"), 16, 2);
  auto x = fire->inspect(30, 8, {{"c", 0.5}, {"L", 6.0}}).at("fire_input");  // (30, 30)
  for (int i = 0; i < 30; i += 2)
    for (int j = 0; j <= i; j += 3) {
      const double want = std::log(0.5 * (i - j) + 1) / std::log(0.5 * std::max(6, i) + 1);
      EXPECT_NEAR(x[i][j].item<double>(), want, 1e-5) << i << "," << j;
    }
  EXPECT_THROW(fire->inspect(4, 8, {{"r1", 1.0}}), ConfigError);  // not a FIRE parameter
}

TEST(Fire, BiasIsTheMlpOfTheInput) {
  auto fire = make(kind_config("fire"), 16, 2);
  auto params = fire->named_parameters();
  auto b = fire->bias(arange(12), arange(12));  // (H, 12, 12)
  const double c = 0.1, L = 512;  // the initial values
  for (int i = 0; i < 12; i += 5)
    for (int j = 0; j <= i; j += 2) {
      const double x = std::log(c * (i - j) + 1) / std::log(c * std::max<double>(L, i) + 1);
      auto hidden = torch::relu(params["mlp_in.weight"].flatten() * x + params["mlp_in.bias"]);  // (32,)
      auto out = torch::matmul(params["mlp_out.weight"], hidden) + params["mlp_out.bias"];       // (H,)
      for (int h = 0; h < 2; ++h) EXPECT_NEAR(b[h][i][j].item<double>(), out[h].item<double>(), 1e-5);
    }
}

// ---- learned biases are rebuilt every forward; constant ones may be cached ----

TEST(BiasCaching, LearnedBiasesReachTheirGradientsEveryStep) {
  for (const char* kind : {"t5", "kerple_log", "kerple_power", "fire"}) {
    ModelConfig m;
    m.n_layer = 1, m.n_head = 2, m.n_embd = 16, m.block_size = 16, m.vocab_size = 11;
    m.pos_encoding = kind_config(kind);
    torch::manual_seed(3);
    GPT model(m);
    auto idx = torch::randint(0, 11, {2, 10}, torch::kLong);
    auto before = model->forward(idx).detach();
    for (int step = 0; step < 2; ++step) {  // a cached graph would fail on the second backward
      model->zero_grad();
      model->forward(idx).square().mean().backward();
      double grad = 0;
      for (const auto& p : model->pos->parameters()) grad += p.grad().abs().sum().item<double>();
      EXPECT_GT(grad, 0) << kind << " step " << step;
    }
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->pos->parameters()) p.add_(torch::randn_like(p) * 0.5);  // not a constant: softmax ignores those
    }
    EXPECT_FALSE(torch::allclose(model->forward(idx), before)) << kind << ": a stale cached bias";
    EXPECT_FALSE(model->pos->constant_bias()) << kind;
  }
  for (const char* kind : {"alibi", "sandwich"}) EXPECT_TRUE(make(kind_config(kind))->constant_bias()) << kind;
}

// ---- randomized positions ----

static PosEncodingConfig randomized(const std::string& kind, int max_position, bool eval = false) {
  auto e = kind_config(kind);
  e.randomize.max_position = max_position;
  e.randomize.eval = eval;
  return e;
}

TEST(Randomize, PositionsAreDistinctSortedBelowMaxAndVaryWithTheSeed) {
  auto pe = make(randomized("rope", 100));
  torch::manual_seed(1);
  auto a = pe->positions(40, /*training=*/true, torch::kCPU);
  torch::manual_seed(2);
  auto b = pe->positions(40, /*training=*/true, torch::kCPU);
  torch::manual_seed(1);
  auto again = pe->positions(40, /*training=*/true, torch::kCPU);
  for (const auto& p : {a, b}) {
    ASSERT_EQ(p.numel(), 40);
    EXPECT_TRUE((p.slice(0, 1) > p.slice(0, 0, -1)).all().item<bool>());  // strictly increasing: sorted, distinct
    EXPECT_GE(p.min().item<int64_t>(), 0);
    EXPECT_LT(p.max().item<int64_t>(), 100);
  }
  EXPECT_FALSE(torch::equal(a, b));
  EXPECT_TRUE(torch::equal(a, again));
  EXPECT_GT(a.max().item<int64_t>(), 39);  // not just 0..39
}

// Past kRandpermMaxPosition training draws by Floyd's algorithm (a permutation of 2^31 positions every step ran
// out of memory): the same properties, reproducible from the generator's state, and uniform over positions:
// each position is drawn with probability T/N, so the draws' mean is (N-1)/2 and a position is in the first
// tenth a tenth of the time (checked over 400 draws, within 5 standard errors).
TEST(Randomize, LargeMaxPositionsDrawUniformlyInTimeIndependentOfIt) {
  const int64_t N = 2000000000, T = 64;
  auto pe = make(randomized("rope", N), 16, 2, /*block_size=*/T);
  torch::manual_seed(7);
  auto first = pe->positions(T, /*training=*/true, torch::kCPU);
  torch::manual_seed(7);
  EXPECT_TRUE(torch::equal(first, pe->positions(T, /*training=*/true, torch::kCPU)));  // resumable
  double sum = 0, low = 0;
  const int draws = 400;
  for (int d = 0; d < draws; ++d) {
    auto p = pe->positions(T, /*training=*/true, torch::kCPU);
    ASSERT_EQ(p.numel(), T);
    ASSERT_TRUE((p.slice(0, 1) > p.slice(0, 0, -1)).all().item<bool>());  // sorted, distinct
    ASSERT_GE(p.min().item<int64_t>(), 0);
    ASSERT_LT(p.max().item<int64_t>(), N);
    sum += p.to(torch::kDouble).sum().item<double>();
    low += (p < N / 10).sum().item<int64_t>();
  }
  const double n = static_cast<double>(draws) * T;
  const double sd_mean = static_cast<double>(N) / std::sqrt(12.0 * n);  // of the mean of n uniform positions
  EXPECT_NEAR(sum / n, (N - 1) / 2.0, 5 * sd_mean);
  EXPECT_NEAR(low / n, 0.1, 5 * std::sqrt(0.1 * 0.9 / n));
  // At or below the threshold, the draw is the permutation's first T, sorted, as every run so far drew it.
  auto small = make(randomized("rope", kRandpermMaxPosition), 16, 2, T);
  torch::manual_seed(3);
  auto want = std::get<0>(torch::randperm(kRandpermMaxPosition, torch::kLong).slice(0, 0, T).sort());
  torch::manual_seed(3);
  EXPECT_TRUE(torch::equal(small->positions(T, /*training=*/true, torch::kCPU), want));
}

// Positions spread up to billions (randomized with a large max_position): the additive tables and RoPE's
// angles are computed for those positions alone (a table up to the largest ran out of memory), by the
// published formulas, in double as the tables are.
TEST(Randomize, FarPositionsGetTheFormulasValuesWithoutATable) {
  const auto pos = torch::tensor({0L, 5L, 70000L, 123456789L, 1999999999L}, torch::kLong);
  const int64_t C = 8;
  auto sin_e = kind_config("sinusoidal");
  sin_e.scale = 1;
  auto sin_pe = make(sin_e, C, 1);
  auto got = sin_pe->embed(torch::zeros({1, pos.numel(), C}), pos).squeeze(0);  // (5, C)
  for (int64_t r = 0; r < pos.numel(); ++r)
    for (int64_t i = 0; i < C / 2; ++i) {
      const double angle = static_cast<double>(pos[r].item<int64_t>()) / std::pow(10000.0, 2.0 * i / C);
      EXPECT_NEAR(got[r][2 * i].item<double>(), std::sin(angle), 1e-6) << r << " " << i;
      EXPECT_NEAR(got[r][2 * i + 1].item<double>(), std::cos(angle), 1e-6) << r << " " << i;
    }
  auto bin_e = kind_config("binary");
  bin_e.scale = 1;
  bin_e.bits = 8;
  auto bin = make(bin_e, C, 1)->embed(torch::zeros({1, pos.numel(), C}), pos).squeeze(0);
  for (int64_t r = 0; r < pos.numel(); ++r)
    for (int k = 0; k < 8; ++k)
      EXPECT_EQ(bin[r][k].item<float>(), ((pos[r].item<int64_t>() >> k) & 1) ? 1.0f : -1.0f) << r << " " << k;
  // RoPE: a (1, 0) pair rotated by p * base^(-2i/hs) becomes (cos, sin) of it.
  auto rope = make(kind_config("rope"), /*n_embd=*/2 * C, /*n_head=*/2);  // head size C
  auto q = torch::zeros({1, 1, pos.numel(), C});
  q.select(3, 0).fill_(1), q.select(3, 2).fill_(1), q.select(3, 4).fill_(1), q.select(3, 6).fill_(1);
  auto [rq, rk] = rope->rotate(q, q.clone(), pos);
  for (int64_t r = 0; r < pos.numel(); ++r)
    for (int64_t i = 0; i < C / 2; ++i) {
      const double angle = static_cast<double>(pos[r].item<int64_t>()) * std::pow(10000.0, -2.0 * i / C);
      EXPECT_NEAR(rq[0][0][r][2 * i].item<double>(), std::cos(angle), 1e-5) << r << " " << i;
      EXPECT_NEAR(rq[0][0][r][2 * i + 1].item<double>(), std::sin(angle), 1e-5) << r << " " << i;
    }
}

TEST(Randomize, EvaluationUsesZeroToNUnlessEval) {
  auto plain = make(randomized("alibi", 64));
  EXPECT_TRUE(torch::equal(plain->positions(30, /*training=*/false, torch::kCPU), arange(30)));
  EXPECT_TRUE(torch::equal(make(kind_config("alibi"))->positions(30, true, torch::kCPU), arange(30)));
  EXPECT_NO_THROW(plain->check_length(1000));  // 0..n-1 at evaluation: any length
  auto at_eval = make(randomized("alibi", 64, /*eval=*/true));
  EXPECT_FALSE(torch::equal(at_eval->positions(30, /*training=*/false, torch::kCPU), arange(30)));
  EXPECT_THROW(at_eval->check_length(65), PositionLimitError);  // cannot draw 65 distinct positions from 64
}

TEST(Randomize, LearnedTableHasMaxPositionRows) {
  auto learned = make(randomized("learned", 200), 16, 2, /*block_size=*/32);
  EXPECT_EQ(learned->max_positions(), 200);
  EXPECT_EQ(learned->named_parameters()["weight"].size(0), 200);
  EXPECT_THROW(learned->check_length(201), PositionLimitError);
}

TEST(Randomize, PositionsReachEveryHook) {
  // Training forward passes see fresh positions: the logits change between draws for every family.
  for (const char* kind : {"sinusoidal", "rope", "alibi", "t5", "fire"}) {
    ModelConfig m;
    m.n_layer = 1, m.n_head = 2, m.n_embd = 16, m.block_size = 16, m.vocab_size = 11;
    m.pos_encoding = randomized(kind, 512);
    torch::manual_seed(3);
    GPT model(m);
    auto idx = torch::randint(0, 11, {1, 12}, torch::kLong);
    model->train();
    auto a = model->forward(idx), b = model->forward(idx);
    EXPECT_FALSE(torch::allclose(a, b)) << kind;
    model->eval();
    EXPECT_TRUE(torch::equal(model->forward(idx), model->forward(idx))) << kind;
  }
}

TEST(Randomize, AnEvaluationDrawIsEachRowsOwn) {
  // randomize.eval: a row's positions come from its own tokens, so its logits are the same alone, beside
  // any other rows, and whatever torch's generator holds; distinct rows get distinct draws.
  for (const char* kind : {"rope", "alibi", "learned"}) {
    ModelConfig m;
    m.n_layer = 1, m.n_head = 2, m.n_embd = 16, m.block_size = 16, m.vocab_size = 11;
    m.pos_encoding = randomized(kind, 64, /*eval=*/true);
    torch::manual_seed(3);
    GPT model(m);
    model->eval();
    torch::NoGradGuard no_grad;
    auto idx = torch::randint(0, 11, {3, 12}, torch::kLong);
    auto other = torch::randint(0, 11, {2, 12}, torch::kLong);
    torch::manual_seed(1);
    const auto batch = model->forward(idx);  // (3, 12, 11)
    torch::manual_seed(2);
    const auto mixed = model->forward(torch::cat({other, idx.slice(0, 1, 2)}, 0));  // row 1 beside others
    EXPECT_TRUE(torch::equal(mixed[2], batch[1])) << kind;
    for (int64_t b = 0; b < 3; ++b) EXPECT_TRUE(torch::equal(model->forward(idx.slice(0, b, b + 1))[0], batch[b])) << kind;
    const auto p0 = model->pos->eval_positions(idx[0]), p1 = model->pos->eval_positions(idx[1]);
    for (const auto& p : {p0, p1}) {
      ASSERT_EQ(p.numel(), 12);
      EXPECT_TRUE((p.slice(0, 1) > p.slice(0, 0, -1)).all().item<bool>());  // sorted, distinct
      EXPECT_LT(p.max().item<int64_t>(), 64);
      EXPECT_GE(p.min().item<int64_t>(), 0);
    }
    EXPECT_FALSE(torch::equal(p0, p1)) << kind;
    EXPECT_FALSE(torch::equal(p0, arange(12))) << kind;
    if (std::string(kind) == "rope") {
      // Uniform over [0, 64): over 2000 distinct rows each position is drawn 2000 * 12/64 = 375 times, give or
      // take sqrt(375 (1 - 12/64)) = 17.5; six of those either way.
      std::vector<int> seen(64, 0);
      for (int r = 0; r < 2000; ++r) {
        auto row = torch::randint(0, 11, {12}, torch::kLong);
        row[0] = r % 11, row[1] = r / 11;  // distinct rows
        auto p = model->pos->eval_positions(row);
        for (int64_t i = 0; i < 12; ++i) seen[p[i].item<int64_t>()]++;
      }
      for (int pos = 0; pos < 64; ++pos) EXPECT_NEAR(seen[pos], 375, 105) << "position " << pos;
    }
    // The draw reaches the hooks: the same row at positions 0..11 gives other logits.
    EXPECT_FALSE(torch::allclose(model->forward(idx.slice(0, 0, 1), arange(12))[0], batch[0])) << kind;
  }
}

// ---- CoPE ----

TEST(Cope, IsCausalWithTrainedEmbeddings) {
  ModelConfig m;
  m.n_layer = 2, m.n_head = 2, m.n_embd = 16, m.block_size = 32, m.vocab_size = 11;
  m.pos_encoding = kind_config("cope");
  m.pos_encoding.npos = 6;
  torch::manual_seed(0);
  GPT model(m);
  torch::NoGradGuard no_grad;
  model->pos->named_parameters()["pos_emb"].normal_(0, 1);  // zeros at init would hide CoPE's term
  auto idx = torch::randint(0, 11, {2, 20}, torch::kLong);
  auto base = model->forward(idx);
  auto changed = idx.clone();
  changed.select(1, 12).fill_((idx[0][12].item<int64_t>() + 3) % 11);
  auto out = model->forward(changed);
  EXPECT_TRUE(torch::allclose(out.slice(1, 0, 12), base.slice(1, 0, 12), 1e-6, 1e-6));
  EXPECT_FALSE(torch::allclose(out.slice(1, 12), base.slice(1, 12)));
}

TEST(Cope, PositionsAreTheReverseCumulativeSumOfGates) {
  auto gates = torch::tensor({0.5f, 1.0f, 0.25f, 0.75f, 0.0f});  // one query row over 5 keys
  auto p = cope_positions(gates, /*npos=*/100);
  const float want[5] = {2.5f, 2.0f, 1.0f, 0.75f, 0.0f};  // p_j = sum_{t >= j} g_t
  for (int j = 0; j < 5; ++j) EXPECT_FLOAT_EQ(p[j].item<float>(), want[j]);
  auto clamped = cope_positions(gates, /*npos=*/2);
  EXPECT_FLOAT_EQ(clamped[0].item<float>(), 1.0f);  // clamp to npos - 1
  EXPECT_FLOAT_EQ(clamped[3].item<float>(), 0.75f);
}

TEST(Cope, ScoresAddInterpolatedPositionLogits) {
  const int64_t hs = 4, T = 6, npos = 3;
  auto e = kind_config("cope");
  e.npos = npos;
  auto cope = make(e, hs, 1);
  auto emb = cope->named_parameters()["pos_emb"];  // (hs, npos), zeros at first
  EXPECT_EQ(emb.abs().sum().item<float>(), 0.0f);
  {
    torch::NoGradGuard no_grad;
    emb.copy_(torch::randn({hs, npos}));
  }
  auto q = torch::randn({1, 1, T, hs}), k = torch::randn({1, 1, T, hs});
  const double scale = 0.5;  // 1/sqrt(hs)
  auto att = torch::matmul(q, k.transpose(-2, -1)) * scale;
  auto out = cope->scores(att, q, scale)[0][0];  // (T, T)
  for (int i = 0; i < T; ++i)
    for (int j = 0; j <= i; ++j) {
      double p = 0;
      for (int t = j; t <= i; ++t) p += 1 / (1 + std::exp(-att[0][0][i][t].item<double>()));
      p = std::min(p, static_cast<double>(npos - 1));
      const int lo = static_cast<int>(std::floor(p)), hi = static_cast<int>(std::ceil(p));
      const double z_lo = q[0][0][i].dot(emb.select(1, lo)).item<double>(), z_hi = q[0][0][i].dot(emb.select(1, hi)).item<double>();
      const double want = att[0][0][i][j].item<double>() + scale * ((p - lo) * z_hi + (1 - (p - lo)) * z_lo);
      EXPECT_NEAR(out[i][j].item<double>(), want, 1e-4) << i << "," << j;
    }
}

// ---- what `poslab pe` prints ----

TEST(Inspect, KerpleBiasAtGivenParameters) {
  auto kerple = make(kind_config("kerple_power"), 16, 3);
  auto b = kerple->inspect(10, 8, {{"r1", 0.5}, {"r2", 1.5}}).at("bias");  // (H, 10, 10), same values every head
  ASSERT_EQ(b.sizes(), (std::vector<int64_t>{3, 10, 10}));
  for (int h = 0; h < 3; ++h)
    for (int i = 0; i < 10; ++i)
      for (int j = 0; j <= i; ++j) EXPECT_NEAR(b[h][i][j].item<double>(), -0.5 * std::pow(i - j, 1.5), 1e-5);
}

TEST(Inspect, XposScaleIsZetaToTheCentredPosition) {
  auto e = kind_config("xpos");
  e.scale_base = 4;
  auto scale = make(e, 16, 2)->inspect(7, 8, {}).at("scale");  // (7, 4); 7 positions centre at -4..2
  ASSERT_EQ(scale.sizes(), (std::vector<int64_t>{7, 4}));
  for (int n = 0; n < 7; ++n)
    for (int k = 0; k < 4; ++k)
      EXPECT_NEAR(scale[n][k].item<double>(), std::pow((2.0 * k + 3.2) / 11.2, (n - 4) / 4.0), 1e-5) << n << "," << k;
}

TEST(Inspect, SandwichHeadsAndHeadSizeAreIndependent) {
  auto sandwich = make(kind_config("sandwich"), 16, 5);  // 5 heads; `pe --dim 6` asks for head size 6
  auto b = sandwich->inspect(9, 6, {}).at("bias");
  ASSERT_EQ(b.sizes(), (std::vector<int64_t>{5, 9, 9}));
  double sum = 0;
  for (int k = 1; k <= 3; ++k) sum += std::cos(8 * std::pow(10000.0, -2.0 * k / 6));
  EXPECT_NEAR(b[4][8][0].item<double>(), (sum - 3) / (5 * 8.0 / 5), 1e-6);
}
