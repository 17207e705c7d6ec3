// The fused Linear and its bfloat16 products against the formula evaluated here in double from the same
// bfloat16-rounded operands: forward and every gradient, transposed and strided operands, with and without
// bias, float and bfloat16 outputs, one and two threads; outside bf16 autocast, or with the fused ops off,
// LibTorch's own linear exactly.
#include <gtest/gtest.h>

#include "model/dnnl_matmul.h"
#include "model/fused_linear.h"
#include "test_fused.h"
#include "util/runtime.h"

using namespace poslab;
using poslab::testing::FusedOn;
using poslab::testing::max_abs_diff;
using poslab::testing::ThreadCount;

namespace {

// a (M, K) times b (K, N) in double: every product and sum exact to double's precision.
torch::Tensor product_formula(const torch::Tensor& a, const torch::Tensor& b) {
  const auto ad = a.to(torch::kDouble).contiguous(), bd = b.to(torch::kDouble).contiguous();
  const int64_t M = ad.size(0), K = ad.size(1), N = bd.size(1);
  auto c = torch::zeros({M, N}, torch::kDouble);
  const double *ap = ad.data_ptr<double>(), *bp = bd.data_ptr<double>();
  double* cp = c.data_ptr<double>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) cp[i * N + j] += ap[i * K + k] * bp[k * N + j];
  return c;
}

torch::Tensor bf16_randn(at::IntArrayRef sizes) { return torch::randn(sizes).to(torch::kBFloat16); }

// A float result of bfloat16 products summed in float: within float's rounding of sums of K terms.
double float_tolerance(const torch::Tensor& expected, int64_t K) {
  return 1e-6 * K * (1 + expected.abs().max().item<double>());
}
// Rounded to bfloat16 once more: half a bfloat16 ulp (2^-9 relative) of the largest value, plus the sums'.
double bf16_tolerance(const torch::Tensor& expected, int64_t K) {
  return std::ldexp(expected.abs().max().item<double>(), -8) + float_tolerance(expected, K);
}
// What a product a b may differ from the formula by. On oneDNN: its float sums, and one rounding for a bfloat16
// output. Through LibTorch (a build without oneDNN, on a CPU with bf16 instructions), LibTorch's own bfloat16
// kernels, which at small sizes round partial sums as well: bounded by 2^-7 of the sum of the terms' magnitudes.
double product_tolerance(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& expected, bool bf16_out) {
  const int64_t K = a.size(-1);
  if (!dnnl_matmul_active()) return std::ldexp(product_formula(a.abs(), b.abs()).max().item<double>(), -7);
  return bf16_out ? bf16_tolerance(expected, K) : float_tolerance(expected, K);
}

struct Bf16Autocast {
  Runtime rt = [] {
    Runtime r;
    r.bf16 = true;
    return r;
  }();
  AutocastGuard guard{rt};
};

}  // namespace

TEST(Bf16Products, MatchTheFormulaForEveryLayoutAndOutputType) {
  POSLAB_SKIP_WITHOUT_CPU_BF16();
  torch::manual_seed(3);
  for (int threads : {1, 2}) {
    ThreadCount tc(threads);
    for (auto [M, K, N] : {std::array<int64_t, 3>{384, 128, 512}, {17, 33, 5}, {1, 8, 1}, {64, 1, 70}}) {
      const auto a = bf16_randn({M, K}), b = bf16_randn({K, N});
      const auto at = bf16_randn({K, M}).t(), bt = bf16_randn({N, K}).t();          // transposed views
      const auto as = bf16_randn({M, 2 * K}).slice(1, 0, K * 2, 2);                 // no unit stride: copied
      for (const auto& [x, y] : {std::pair{a, b}, {at, b}, {a, bt}, {at, bt}, {as, b}}) {
        const auto expected = product_formula(x, y);
        const auto f = bf16_matmul(x, y, torch::kFloat);
        ASSERT_EQ(f.scalar_type(), torch::kFloat);
        ASSERT_EQ(f.sizes(), expected.sizes());
        EXPECT_LE(max_abs_diff(f, expected), product_tolerance(x, y, expected, false)) << M << "x" << K << "x" << N;
        const auto h = bf16_matmul(x, y, torch::kBFloat16);
        ASSERT_EQ(h.scalar_type(), torch::kBFloat16);
        EXPECT_LE(max_abs_diff(h, expected), product_tolerance(x, y, expected, true)) << M << "x" << K << "x" << N;
      }
      for (auto bias_type : {torch::kBFloat16, torch::kFloat}) {
        const auto bias = torch::randn({N}).to(bias_type);
        const auto expected = product_formula(a, b) + bias.to(torch::kDouble);
        EXPECT_LE(max_abs_diff(bf16_matmul(a, b, torch::kFloat, bias), expected), product_tolerance(a, b, expected, false))
            << "bias " << bias_type;
      }
    }
  }
}

// Into an out that is a view of a wider buffer (q's part of a (B, T, 3C) gradient, a block of a (B, T, C) row
// tensor's rows, as attention writes them) the product is the one a fresh tensor gets, to the bit, and the rest of
// the buffer keeps what it held.
TEST(Bf16Products, IntoAViewOfAWiderBufferAsIntoANewTensor) {
  POSLAB_SKIP_WITHOUT_CPU_BF16();
  torch::manual_seed(5);
  const int64_t B = 3, H = 4, T = 16, hs = 8, C = H * hs;
  const auto a = bf16_randn({B, H, T, T}), b = bf16_randn({B, H, T, hs});
  auto heads = [&](const torch::Tensor& rows) { return rows.view({B, rows.size(1), H, hs}).permute({0, 2, 1, 3}); };
  for (auto type : {torch::kBFloat16, torch::kFloat}) {
    const auto fresh = bf16_matmul(a, b, type);
    auto wide = torch::full({B, T, 3 * C}, 7.0, torch::TensorOptions().dtype(type));
    bf16_matmul(a, b, type, {}, heads(wide.narrow(2, C, C)));  // the middle third of each row
    EXPECT_TRUE(torch::equal(heads(wide.narrow(2, C, C)), fresh)) << type;
    EXPECT_TRUE((wide.narrow(2, 0, C) == 7).all().item<bool>() && (wide.narrow(2, 2 * C, C) == 7).all().item<bool>());
    auto rows = torch::full({B, 2 * T, C}, 7.0, torch::TensorOptions().dtype(type));
    bf16_matmul(a, b, type, {}, heads(rows.slice(1, 5, 5 + T)));  // a block of rows
    EXPECT_TRUE(torch::equal(heads(rows.slice(1, 5, 5 + T)), fresh)) << type;
    EXPECT_TRUE((rows.slice(1, 0, 5) == 7).all().item<bool>() && (rows.slice(1, 5 + T) == 7).all().item<bool>());
  }
}

TEST(Bf16Products, AnEmptySumIsTheBiasAlone) {
  const auto a = torch::empty({3, 0}, torch::kBFloat16), b = torch::empty({0, 4}, torch::kBFloat16);
  EXPECT_EQ(bf16_matmul(a, b, torch::kFloat).abs().max().item<float>(), 0.0f);
  const auto bias = torch::randn({4});
  EXPECT_TRUE(torch::equal(bf16_matmul(a, b, torch::kFloat, bias), bias.expand({3, 4})));
}

TEST_F(FusedOn, LinearUnderBf16AutocastMatchesTheFormulaForwardAndBackward) {
  POSLAB_SKIP_WITHOUT_CPU_BF16();
  torch::manual_seed(4);
  for (bool with_bias : {false, true}) {
    for (auto x_type : {torch::kBFloat16, torch::kFloat}) {
      const int64_t B = 3, T = 7, K = 40, N = 24;
      auto x = torch::randn({B, T, K}).to(x_type).requires_grad_(true);
      auto w = torch::randn({N, K}).requires_grad_(true);
      auto b = with_bias ? torch::randn({N}).requires_grad_(true) : torch::Tensor();
      torch::Tensor y;
      {
        Bf16Autocast autocast;
        y = fused_linear(x, w, b);
      }
      ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
      ASSERT_EQ(y.sizes(), (std::vector<int64_t>{B, T, N}));
      // The operands as the product reads them: rounded to bfloat16 once.
      const auto x2 = x.detach().reshape({-1, K}).to(torch::kBFloat16), wb = w.detach().to(torch::kBFloat16);
      auto expected = product_formula(x2, wb.t());
      if (with_bias) expected += b.detach().to(torch::kBFloat16).to(torch::kDouble);
      EXPECT_LE(max_abs_diff(y.reshape({-1, N}), expected), product_tolerance(x2, wb.t(), expected, true));

      const auto dy = bf16_randn({B, T, N});
      y.backward(dy);
      const auto dy2 = dy.reshape({-1, N});
      ASSERT_EQ(x.grad().scalar_type(), x_type);  // as autocast's cast back gives it
      ASSERT_EQ(w.grad().scalar_type(), torch::kFloat);
      const auto dx = product_formula(dy2, wb), dw = product_formula(dy2.t(), x2);
      EXPECT_LE(max_abs_diff(x.grad().reshape({-1, K}), dx), product_tolerance(dy2, wb, dx, true));
      EXPECT_LE(max_abs_diff(w.grad(), dw), product_tolerance(dy2.t(), x2, dw, false));  // on oneDNN, float sums not rounded to bfloat16
      if (with_bias) {
        ASSERT_EQ(b.grad().scalar_type(), torch::kFloat);
        const auto db = dy2.to(torch::kDouble).sum(0);
        EXPECT_LE(max_abs_diff(b.grad(), db), float_tolerance(db, B * T));
      }
    }
  }
}

TEST_F(FusedOn, LinearWithoutGradientsGivesTheSameProduct) {
  torch::manual_seed(5);
  auto x = torch::randn({5, 16}).to(torch::kBFloat16), w = torch::randn({8, 16}), b = torch::randn({8});
  torch::Tensor with_graph, without;
  {
    Bf16Autocast autocast;
    with_graph = fused_linear(x, w.requires_grad_(true), b).detach();
    torch::NoGradGuard no_grad;
    without = fused_linear(x, w, b);
  }
  EXPECT_TRUE(torch::equal(with_graph, without));
}

TEST(FusedLinear, ElsewhereItIsLibTorchsLinearExactly) {
  torch::manual_seed(6);
  auto x = torch::randn({4, 9, 32}), w = torch::randn({12, 32}), b = torch::randn({12});
  namespace F = torch::nn::functional;
  set_fused_ops(true);
  EXPECT_TRUE(torch::equal(fused_linear(x, w, b), F::linear(x, w, b)));  // fused ops on, no autocast: float
  EXPECT_TRUE(torch::equal(fused_linear(x.to(torch::kDouble), w.to(torch::kDouble)),
                           F::linear(x.to(torch::kDouble), w.to(torch::kDouble))));
  set_fused_ops(false);
  Bf16Autocast autocast;  // autocast on, fused ops off: autocast's own bfloat16 linear
  const auto y = fused_linear(x, w, b);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(y, F::linear(x, w, b)));
}
