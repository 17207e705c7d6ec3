// Properties of each encoding, pinned to the papers' definitions (DESIGN.md "Facts to get right").
#include <gtest/gtest.h>

#include <cmath>

#include "model/positional/bias.h"
#include "model/positional/positional.h"
#include "test_models.h"

using namespace poslab;

static std::shared_ptr<PositionalEncodingImpl> make(const std::string& kind, int64_t n_embd = 16, int64_t n_head = 2,
                                                    int64_t block_size = 32) {
  PosEncodingConfig e;
  e.kind = kind;
  return make_positional({e, n_embd, n_head, block_size});
}

TEST(Sinusoidal, MatchesFormulaInterleaved) {
  const int64_t n = 50, d = 16;
  const double base = 10000;
  auto pe = sinusoidal_table(n, d, base);
  for (int64_t p = 0; p < n; p += 7)
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = p / std::pow(base, 2.0 * i / d);
      EXPECT_NEAR(pe[p][2 * i].item<double>(), std::sin(angle), 1e-6);
      EXPECT_NEAR(pe[p][2 * i + 1].item<double>(), std::cos(angle), 1e-6);
    }
}

TEST(Sinusoidal, RowNormIsSqrtHalfDim) {
  auto pe = sinusoidal_table(300, 32, 10000);
  auto norms = pe.norm(2, 1);
  EXPECT_LT((norms - std::sqrt(16.0)).abs().max().item<double>(), 1e-4);
}

TEST(Sinusoidal, DotProductDependsOnOffsetOnly) {
  auto pe = sinusoidal_table(200, 32, 10000).to(torch::kDouble);
  for (int64_t k : {1, 5, 17}) {
    const double ref = pe[0].dot(pe[k]).item<double>();
    for (int64_t p : {3, 50, 150}) EXPECT_NEAR(pe[p].dot(pe[p + k]).item<double>(), ref, 1e-4);
  }
}

TEST(Sinusoidal, BaseIsConfigurable) {
  auto a = sinusoidal_table(10, 8, 10000), b = sinusoidal_table(10, 8, 100);
  EXPECT_GT((a - b).abs().max().item<double>(), 1e-3);
  EXPECT_NEAR(b[3][2].item<double>(), std::sin(3.0 / std::pow(100.0, 2.0 / 8)), 1e-6);
}

TEST(Rope, RotationKeepsNorms) {
  auto rope = make("rope", 32, 2);
  auto q = torch::randn({2, 2, 40, 16}), k = torch::randn({2, 2, 40, 16});
  auto [rq, rk] = rope->rotate(q, k, torch::arange(40, torch::kLong));
  EXPECT_LT((rq.norm(2, -1) - q.norm(2, -1)).abs().max().item<double>(), 1e-4);
  EXPECT_LT((rk.norm(2, -1) - k.norm(2, -1)).abs().max().item<double>(), 1e-4);
  EXPECT_GT((rq - q).abs().max().item<double>(), 1e-2);  // it does rotate
}

TEST(Rope, ScoreDependsOnlyOnRelativePosition) {
  auto rope = make("rope", 16, 1);
  auto q = torch::randn({1, 1, 1, 16}).expand({1, 1, 64, 16}).contiguous();
  auto k = torch::randn({1, 1, 1, 16}).expand({1, 1, 64, 16}).contiguous();
  auto [rq, rk] = rope->rotate(q, k, torch::arange(64, torch::kLong));
  auto scores = torch::matmul(rq, rk.transpose(-2, -1))[0][0];  // (64, 64): q at m, k at n
  for (int64_t offset : {0, 1, 7, 30}) {
    const double ref = scores[offset][0].item<double>();
    for (int64_t n = 1; n + offset < 64; n += 9) EXPECT_NEAR(scores[n + offset][n].item<double>(), ref, 1e-3);
  }
}

TEST(Rope, AnglesFollowTheta) {
  auto angles = rope_angles(10, 8, 10000);
  EXPECT_NEAR(angles[3][1].item<double>(), 3 * std::pow(10000.0, -2.0 / 8), 1e-9);
  EXPECT_EQ(angles.sizes(), (std::vector<int64_t>{10, 4}));
}

static std::vector<double> press_slopes(int n) {  // Press et al.'s reference get_slopes, written out
  auto pow2 = [](int m) {
    std::vector<double> s;
    double start = std::pow(2.0, -std::pow(2.0, -(std::log2(m) - 3)));
    for (int i = 0; i < m; ++i) s.push_back(start * std::pow(start, i));
    return s;
  };
  if (std::log2(n) == std::floor(std::log2(n))) return pow2(n);
  int closest = 1 << static_cast<int>(std::floor(std::log2(n)));
  auto out = pow2(closest);
  auto extra = press_slopes(2 * closest);
  for (int i = 0; static_cast<int>(out.size()) < n; i += 2) out.push_back(extra[i]);
  return out;
}

TEST(Alibi, SlopesMatchPressEtAl) {
  for (int n : {8, 6, 12, 1, 16}) {
    auto ours = alibi_slopes(n), ref = press_slopes(n);
    ASSERT_EQ(ours.size(), ref.size()) << n << " heads";
    for (size_t i = 0; i < ours.size(); ++i) EXPECT_NEAR(ours[i], ref[i], 1e-12) << n << " heads, slope " << i;
  }
  auto s8 = alibi_slopes(8);
  EXPECT_DOUBLE_EQ(s8[0], 0.5);
  EXPECT_DOUBLE_EQ(s8[7], 1.0 / 256);
  auto s6 = alibi_slopes(6);  // 4-head slopes then 8-head slopes 0 and 2
  EXPECT_DOUBLE_EQ(s6[0], 0.25);
  EXPECT_DOUBLE_EQ(s6[4], std::pow(2.0, -1.0));
  EXPECT_DOUBLE_EQ(s6[5], std::pow(2.0, -3.0));
}

TEST(Alibi, BiasIsMinusSlopeTimesDistance) {
  auto alibi = make("alibi", 24, 6);
  auto b = alibi->bias(torch::arange(20, torch::kLong), torch::arange(20, torch::kLong));  // (H, T, T)
  auto slopes = alibi_slopes(6);
  ASSERT_EQ(b.sizes(), (std::vector<int64_t>{6, 20, 20}));
  for (int h = 0; h < 6; ++h)
    for (int i = 0; i < 20; i += 3)
      for (int j = 0; j <= i; j += 2) EXPECT_NEAR(b[h][i][j].item<double>(), -slopes[h] * (i - j), 1e-5);
}

TEST(Learned, RefusesPositionsPastTable) {
  auto learned = make("learned", 16, 2, 32);
  EXPECT_EQ(learned->max_positions(), 32);
  EXPECT_NO_THROW(learned->check_length(32));
  EXPECT_THROW(learned->check_length(33), PositionLimitError);
  try {
    learned->check_length(64);
  } catch (const PositionLimitError& e) {
    EXPECT_STREQ(e.what(), "learned table has 32 positions");
  }
}

// Every kind but learned's table takes any length; xPos up to where its scales overflow float (~128 x 512).
TEST(OtherKinds, AcceptAnyLength) {
  for (const auto& kind : poslab::testing::kBuiltInKinds)
    if (kind != "learned" && kind != "xpos") EXPECT_NO_THROW(make(kind)->check_length(100000)) << kind;
  EXPECT_NO_THROW(make("xpos")->check_length(xpos_max_length(512)));
  EXPECT_GT(xpos_max_length(512), 65000);
}

TEST(Index, AddsScaledPositionToEveryComponent) {
  PosEncodingConfig e;
  e.kind = "index";
  e.scale = 0.5;
  auto index = make_positional({e, 8, 2, 32});
  auto x = torch::randn({2, 10, 8});
  auto out = index->embed(x, torch::arange(10, torch::kLong));
  for (int p = 0; p < 10; ++p) EXPECT_LT((out[1][p] - x[1][p] - 0.5 * p).abs().max().item<double>(), 1e-5);
}

TEST(Binary, AddsPositionBits) {
  PosEncodingConfig e;
  e.kind = "binary";
  e.scale = 1.0;  // the bits themselves, not the default 1/sqrt(n_embd)
  e.bits = 4;
  e.signed_bits = false;
  auto binary = make_positional({e, 8, 2, 32});
  auto x = torch::zeros({1, 16, 8});
  auto out = binary->embed(x, torch::arange(16, torch::kLong))[0];  // (16, 8)
  for (int p = 0; p < 16; ++p) {
    for (int b = 0; b < 4; ++b) EXPECT_EQ(out[p][b].item<float>(), static_cast<float>((p >> b) & 1)) << p;
    EXPECT_EQ(out[p].slice(0, 4).abs().sum().item<float>(), 0.0f);  // components past `bits` untouched
  }
  auto signed_table = binary_table(4, 8, 2, true);
  EXPECT_EQ(signed_table[2][0].item<float>(), -1.0f);
  EXPECT_EQ(signed_table[2][1].item<float>(), 1.0f);
  EXPECT_EQ(binary->max_positions(), -1);  // past 2^bits the pattern wraps around
  auto wrapped = binary->embed(torch::zeros({1, 20, 8}), torch::arange(20, torch::kLong))[0];
  EXPECT_TRUE(torch::equal(wrapped[17], wrapped[1]));
}

TEST(Families, EachKindUsesOnlyItsHook) {
  auto x = torch::randn({1, 6, 16});
  auto q = torch::randn({1, 2, 6, 8}), k = torch::randn({1, 2, 6, 8});
  auto positions = torch::arange(6, torch::kLong);
  for (const auto& kind : poslab::testing::kBuiltInKinds) {
    auto pe = make(kind);
    const bool embeds = !torch::equal(pe->embed(x, positions), x);
    const bool rotates = !torch::equal(pe->rotate(q, k, positions).first, q);
    const bool biases = pe->bias(positions, positions).defined();
    EXPECT_EQ(embeds, pe->family() == "additive") << kind;
    EXPECT_EQ(rotates, pe->family() == "rotary") << kind;
    EXPECT_EQ(biases, pe->family() == "bias") << kind;
    const auto att = torch::randn({1, 2, 6, 6});
    EXPECT_EQ(pe->needs_scores(), pe->family() == "context") << kind;
    if (!pe->needs_scores()) EXPECT_TRUE(torch::equal(pe->scores(att, q, 0.5), att)) << kind;
  }
}
