// Evaluation-time RoPE scaling against the published formulas (HF modeling_rope_utils), written
// out here with plain loops in double, independently of the tensor code under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/positional/positional.h"
#include "model/positional/rope_scaling.h"

using namespace poslab;

static std::vector<double> expected_default(int d, double base) {
  std::vector<double> f;
  for (int k = 0; k < d / 2; ++k) f.push_back(1.0 / std::pow(base, 2.0 * k / d));
  return f;
}

static std::vector<double> expected_yarn(int d, double base, double s, double L, double* mscale) {
  auto fcd = [&](double r) { return d * std::log(L / (r * 2 * M_PI)) / (2 * std::log(base)); };
  double low = std::max(std::floor(fcd(32.0)), 0.0), high = std::min(std::ceil(fcd(1.0)), d - 1.0);
  if (low == high) high += 0.001;
  std::vector<double> f;
  for (int k = 0; k < d / 2; ++k) {
    const double pos = std::pow(base, 2.0 * k / d);
    const double ramp = std::clamp((k - low) / (high - low), 0.0, 1.0);
    const double extrap = 1 - ramp;
    f.push_back(1.0 / (s * pos) * (1 - extrap) + 1.0 / pos * extrap);
  }
  *mscale = 0.1 * std::log(s) + 1.0;
  return f;
}

static void expect_freqs(const torch::Tensor& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  auto g = got.to(torch::kDouble).contiguous();
  double worst = 0;
  for (size_t k = 0; k < want.size(); ++k) worst = std::max(worst, std::abs(g[k].item<double>() - want[k]) / want[k]);
  EXPECT_LT(worst, 1e-12) << what << ": largest relative difference " << worst;
}

struct Case {
  int d;
  double base, s;
  int64_t L;
};

class RopeScalingCases : public ::testing::TestWithParam<Case> {};

TEST_P(RopeScalingCases, FrequenciesMatchTheFormulas) {
  const auto [d, base, s, L] = GetParam();
  const auto def = expected_default(d, base);
  expect_freqs(rope_frequencies(d, base, {}, 4 * L).inv_freq, def, "none");

  std::vector<double> linear;
  for (double f : def) linear.push_back(f / s);
  expect_freqs(rope_frequencies(d, base, {"linear", s, L}, 4 * L).inv_freq, linear, "linear");

  expect_freqs(rope_frequencies(d, base, {"ntk", s, L}, 4 * L).inv_freq,
               expected_default(d, base * std::pow(s, d / (d - 2.0))), "ntk");

  // Dynamic NTK: the default frequencies up to L; at seq tokens the base is base * (s*seq/L - (s-1))^(d/(d-2)).
  expect_freqs(rope_frequencies(d, base, {"dynamic_ntk", s, L}, L / 2).inv_freq, def, "dynamic_ntk below L");
  const double seq = 3.0 * L;
  expect_freqs(rope_frequencies(d, base, {"dynamic_ntk", s, L}, 3 * L).inv_freq,
               expected_default(d, base * std::pow(s * seq / L - (s - 1), d / (d - 2.0))), "dynamic_ntk at 3L");

  double mscale = 0;
  const auto yarn = expected_yarn(d, base, s, static_cast<double>(L), &mscale);
  const auto got = rope_frequencies(d, base, {"yarn", s, L}, 4 * L);
  expect_freqs(got.inv_freq, yarn, "yarn");
  EXPECT_NEAR(got.attention_factor, mscale, 1e-12);
  EXPECT_DOUBLE_EQ(rope_frequencies(d, base, {"linear", s, L}, 4 * L).attention_factor, 1.0);
}

INSTANTIATE_TEST_SUITE_P(Issue13, RopeScalingCases,
                         ::testing::Values(Case{16, 10000.0, 4.0, 64}, Case{64, 10000.0, 4.0, 512},
                                           Case{32, 500.0, 8.0, 128}));

TEST(RopeScaling, YarnKeepsFastPairsAndInterpolatesSlowOnes) {
  // D = 16, L = 64: pair 0 turns ~10 times within L (more than beta_slow) and is kept as is;
  // the last pair turns far less than once and is divided by s exactly.
  const auto f = rope_frequencies(16, 10000.0, {"yarn", 4.0, 64}, 256);
  EXPECT_DOUBLE_EQ(f.inv_freq[0].item<double>(), 1.0);
  EXPECT_NEAR(f.inv_freq[7].item<double>(), std::pow(10000.0, -14.0 / 16) / 4, 1e-15);
  EXPECT_NEAR(f.attention_factor, 1.0 + 0.1 * std::log(4.0), 1e-12);
}

TEST(RopeScaling, LinearScalingIsPositionInterpolation) {
  // Position Interpolation: the scaled model at position s*m sees the angles the unscaled one saw at m.
  const int d = 16;
  const double s = 4;
  auto scaled = rope_frequencies(d, 10000, {"linear", s, 64}, 256).inv_freq * (s * 37);
  auto plain = rope_frequencies(d, 10000, {}, 64).inv_freq * 37;
  EXPECT_TRUE(torch::allclose(scaled, plain, 1e-12, 1e-12));
}

TEST(RopeScaling, ScaledRotationStillDependsOnlyOnDistance) {
  // q_m . k_n after rotation depends on m - n only, under every scaling (ntk at a fixed length).
  PosEncodingConfig pc;
  pc.kind = "rope";
  auto pe = make_positional({pc, /*n_embd=*/16, /*n_head=*/1, /*block_size=*/32});
  for (const char* kind : {"linear", "ntk", "yarn"}) {
    pe->set_rope_scaling({kind, 4.0, 32});
    torch::manual_seed(0);
    auto q = torch::randn({1, 1, 1, 16}).expand({1, 1, 64, 16}).contiguous();
    auto k = torch::randn({1, 1, 1, 16}).expand({1, 1, 64, 16}).contiguous();
    auto [rq, rk] = pe->rotate(q, k, torch::arange(64, torch::kLong));
    auto scores = torch::matmul(rq, rk.transpose(-2, -1))[0][0];  // (64, 64)
    EXPECT_NEAR(scores[40][30].item<double>(), scores[20][10].item<double>(), 1e-4) << kind;
    EXPECT_NEAR(scores[63][13].item<double>(), scores[50][0].item<double>(), 1e-4) << kind;
  }
}

TEST(RopeScaling, RefusedWhereItCannotApply) {
  PosEncodingConfig pc;
  pc.kind = "alibi";
  auto alibi = make_positional({pc, 16, 2, 32});
  EXPECT_THROW(alibi->set_rope_scaling({"linear", 2.0, 32}), ConfigError);
  EXPECT_NO_THROW(alibi->set_rope_scaling({}));  // "none" is fine anywhere
  pc.kind = "rope";
  auto rope = make_positional({pc, 16, 2, 32});
  EXPECT_THROW(rope->set_rope_scaling({"linear", 0.5, 32}), ConfigError);  // factor below 1
  EXPECT_THROW(rope->set_rope_scaling({"yarn", 2.0, 0}), ConfigError);     // no original length
  EXPECT_THROW(rope->set_rope_scaling({"stretch", 2.0, 32}), ConfigError);
}

TEST(RopeScaling, NtkRefusedWithOneRotatedPair) {
  // NTK-aware scaling keeps the first (highest) frequency: with a single rotated pair it would change nothing.
  // From the formula: base' = base * s^(d / (d - 2)) is infinite at d = 2, and inv_freq_0 = base'^0 = 1 either way.
  PosEncodingConfig pc;
  pc.kind = "rope";
  pc.rotary_fraction = 0.25;  // a head of 8: 2 dims rotate
  auto one_pair = make_positional({pc, /*n_embd=*/16, /*n_head=*/2, /*block_size=*/32});
  for (const char* kind : {"ntk", "dynamic_ntk"}) {
    try {
      one_pair->set_rope_scaling({kind, 4.0, 32});
      ADD_FAILURE() << kind << " with one rotated pair was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("one pair"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(one_pair->set_rope_scaling({"linear", 4.0, 32}));  // linear divides every frequency, the one pair's too
  EXPECT_NO_THROW(one_pair->set_rope_scaling({"yarn", 4.0, 32}));
  pc.rotary_fraction = 0.5;  // 4 dims: the second pair's frequency moves
  auto two_pairs = make_positional({pc, 16, 2, 32});
  EXPECT_NO_THROW(two_pairs->set_rope_scaling({"ntk", 4.0, 32}));
}
