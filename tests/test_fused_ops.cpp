// The fused CPU GELU and LayerNorm against their published formulas evaluated here in double (and
// LibTorch's own ops in double as a second oracle for LayerNorm's gradients): forward and backward, fp32
// and bfloat16, with and without bias, rows split over threads, sizes off the vector width; under bf16
// autocast the LayerNorm emits bfloat16; the residual add fused before it; the switch and the fallbacks
// give LibTorch's ops exactly.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <cmath>

#include "model/fused_ops.h"
#include "model/positional/positional.h"
#include "test_fused.h"
#include "util/runtime.h"

using namespace poslab;
using poslab::testing::FusedOn;
using poslab::testing::max_abs_diff;
using poslab::testing::ThreadCount;

namespace {

// GELU and its derivative, element by element in double: x Phi(x), Phi(x) + x phi(x).
torch::Tensor gelu_formula(const torch::Tensor& x) {
  auto xd = x.to(torch::kDouble).contiguous();
  auto y = torch::empty_like(xd);
  const double* xp = xd.data_ptr<double>();
  double* yp = y.data_ptr<double>();
  for (int64_t i = 0; i < xd.numel(); ++i) yp[i] = 0.5 * xp[i] * (1.0 + std::erf(xp[i] / std::sqrt(2.0)));
  return y;
}
torch::Tensor gelu_derivative_formula(const torch::Tensor& x) {
  auto xd = x.to(torch::kDouble).contiguous();
  auto d = torch::empty_like(xd);
  const double* xp = xd.data_ptr<double>();
  double* dp = d.data_ptr<double>();
  for (int64_t i = 0; i < xd.numel(); ++i)
    dp[i] = 0.5 * (1.0 + std::erf(xp[i] / std::sqrt(2.0))) + xp[i] * std::exp(-0.5 * xp[i] * xp[i]) / std::sqrt(2.0 * M_PI);
  return d;
}

// Inputs over GELU's whole range: most near 0, some far out where erf saturates, and exact 0.
torch::Tensor gelu_inputs(int64_t n) {
  torch::manual_seed(7);
  auto x = torch::randn({n}) * 3;
  x.index_put_({torch::indexing::Slice(0, n, 97)}, torch::randn({(n + 96) / 97}) * 30);
  x[0] = 0.0f;
  return x;
}

}  // namespace

TEST_F(FusedOn, GeluMatchesTheFormulaForwardAndBackward) {
  for (int threads : {1, 2}) {
    ThreadCount tc(threads);
    for (int64_t n : {1, 15, 17, 1000, 70001}) {  // off the vector width; 70001 spans several parallel chunks
      auto x = gelu_inputs(n).requires_grad_(true);
      auto y = fused_gelu(x);
      ASSERT_EQ(y.scalar_type(), torch::kFloat);
      // |erf error| <= a few float ulps of 1, times |x| / 2.
      const auto want = gelu_formula(x.detach());
      EXPECT_LE(((y.detach().to(torch::kDouble) - want).abs() / (1.0 + x.detach().to(torch::kDouble).abs())).max().item<double>(), 2e-7)
          << "n " << n;
      auto g = torch::randn({n});
      y.backward(g);
      const auto want_dx = g.to(torch::kDouble) * gelu_derivative_formula(x.detach());
      EXPECT_LE(max_abs_diff(x.grad(), want_dx) / (1.0 + g.abs().max().item<double>()), 1e-6) << "n " << n;
    }
  }
}

TEST_F(FusedOn, GeluInBfloat16IsTheFormulaRoundedOnce) {
  auto x = gelu_inputs(4099).to(torch::kBFloat16).requires_grad_(true);
  auto y = fused_gelu(x);
  ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
  // Computed in float from the bf16 input and rounded once: within half a bf16 ulp (2^-9 relative) of the
  // exact value, plus the float kernel's own error.
  const auto want = gelu_formula(x.detach());
  const auto rel = (y.detach().to(torch::kDouble) - want).abs() / (want.abs() * std::ldexp(1.0, -8) + 1e-6);
  EXPECT_LE(rel.max().item<double>(), 1.0);
  auto g = torch::randn({4099}).to(torch::kBFloat16);
  y.backward(g);
  ASSERT_EQ(x.grad().scalar_type(), torch::kBFloat16);
  const auto want_dx = g.to(torch::kDouble) * gelu_derivative_formula(x.detach());
  const auto rel_dx = (x.grad().to(torch::kDouble) - want_dx).abs() / (want_dx.abs() * std::ldexp(1.0, -8) + 1e-6);
  EXPECT_LE(rel_dx.max().item<double>(), 1.0);
}

TEST_F(FusedOn, LayerNormMatchesTheFormulaAndLibTorchsGradients) {
  for (int threads : {1, 2}) {
    ThreadCount tc(threads);
    for (bool with_bias : {false, true}) {
      for (auto shape : {std::vector<int64_t>{3, 37}, std::vector<int64_t>{4, 129, 48}, std::vector<int64_t>{1, 1, 128}}) {
        torch::manual_seed(11);
        const int64_t C = shape.back();
        auto x = (torch::randn(shape) * 2 + 0.5).requires_grad_(true);
        auto w = (torch::randn({C}) * 0.5 + 1).requires_grad_(true);
        auto b = with_bias ? (torch::randn({C}) * 0.1).requires_grad_(true) : torch::Tensor();
        auto y = fused_layer_norm(x, w, b, 1e-5);
        ASSERT_EQ(y.scalar_type(), torch::kFloat);
        // The published formula in double: (x - mean) / sqrt(var + eps) * w + b, var biased.
        auto xd = x.detach().to(torch::kDouble);
        auto mean = xd.mean(-1, /*keepdim=*/true);
        auto var = (xd - mean).pow(2).mean(-1, /*keepdim=*/true);
        auto want = (xd - mean) / (var + 1e-5).sqrt() * w.detach().to(torch::kDouble);
        if (with_bias) want = want + b.detach().to(torch::kDouble);
        EXPECT_LE(max_abs_diff(y.detach(), want), 1e-5);

        // Gradients against LibTorch's layer_norm in double.
        auto g = torch::randn(shape);
        y.backward(g);
        auto xr = xd.clone().requires_grad_(true);
        auto wr = w.detach().to(torch::kDouble).requires_grad_(true);
        auto br = with_bias ? b.detach().to(torch::kDouble).requires_grad_(true) : torch::Tensor();
        torch::layer_norm(xr, {C}, wr, br, 1e-5).backward(g.to(torch::kDouble));
        EXPECT_LE(max_abs_diff(x.grad(), xr.grad()), 1e-4 * (1 + xr.grad().abs().max().item<double>()));
        EXPECT_LE(max_abs_diff(w.grad(), wr.grad()), 1e-4 * (1 + wr.grad().abs().max().item<double>()));
        if (with_bias) EXPECT_LE(max_abs_diff(b.grad(), br.grad()), 1e-4 * (1 + br.grad().abs().max().item<double>()));
      }
    }
  }
}

TEST_F(FusedOn, LayerNormUnderBf16AutocastEmitsBfloat16AndTakesItsGradient) {
  torch::manual_seed(5);
  auto x = torch::randn({6, 10, 64}).requires_grad_(true);
  auto w = (torch::randn({64}) * 0.5 + 1).requires_grad_(true);
  auto b = (torch::randn({64}) * 0.1).requires_grad_(true);
  auto y32 = fused_layer_norm(x, w, b, 1e-5);
  torch::Tensor y16;
  {
    Runtime rt;
    rt.bf16 = true;
    AutocastGuard autocast(rt);
    y16 = fused_layer_norm(x, w, b, 1e-5);
  }
  ASSERT_EQ(y16.scalar_type(), torch::kBFloat16);
  // The float result rounded to bfloat16 once: within half a bf16 ulp.
  EXPECT_LE(((y16.detach().to(torch::kFloat) - y32.detach()).abs() / y32.detach().abs().clamp_min(1e-3)).max().item<double>(),
            std::ldexp(1.0, -8));
  // The same gradient as the float path given the same (bfloat16-representable) upstream gradient.
  auto g = torch::randn({6, 10, 64}).to(torch::kBFloat16);
  auto grads16 = torch::autograd::grad({y16}, {x, w, b}, {g});
  auto grads32 = torch::autograd::grad({y32}, {x, w, b}, {g.to(torch::kFloat)});
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(grads16[i].scalar_type(), torch::kFloat);
    EXPECT_LE(max_abs_diff(grads16[i], grads32[i]), 1e-5 * (1 + grads32[i].abs().max().item<double>())) << i;
  }
}

// The residual add fused into the norm: (h, y) = (x + a, norm(x + a)) in one node. Against the sum and the
// norm applied one after the other (autograd adding h's two gradients), bit for bit: float with a float
// branch, and under bf16 autocast with a bfloat16 branch, whose gradient is the float one rounded once;
// with h used further on and not. h itself against the sum in double.
TEST_F(FusedOn, ResidualAddBeforeTheNormIsTheSumThenTheNormBitForBit) {
  for (bool bf16 : {false, true}) {
    for (int threads : {1, 2}) {
      ThreadCount tc(threads);
      for (bool h_used : {true, false}) {
        torch::manual_seed(21);
        const std::vector<int64_t> shape{3, 70, 40};  // 210 rows: split over threads, C off the vector width
        auto x = (torch::randn(shape) * 2).requires_grad_(true);
        auto a = torch::randn(shape).to(bf16 ? torch::kBFloat16 : torch::kFloat).requires_grad_(true);
        auto w = (torch::randn({40}) * 0.5 + 1).requires_grad_(true);
        auto b = (torch::randn({40}) * 0.1).requires_grad_(true);
        auto dh = torch::randn(shape);
        auto dy = torch::randn(shape).to(bf16 ? torch::kBFloat16 : torch::kFloat);
        Runtime rt;
        rt.bf16 = bf16;
        torch::Tensor h, y, h_ref, y_ref;
        {
          AutocastGuard autocast(rt);
          std::tie(h, y) = fused_add_layer_norm(x, a, w, b, 1e-5);
          h_ref = x + a;
          y_ref = fused_layer_norm(h_ref, w, b, 1e-5);
        }
        ASSERT_EQ(h.scalar_type(), torch::kFloat);
        ASSERT_EQ(y.scalar_type(), a.scalar_type());
        EXPECT_TRUE(torch::equal(h, (x.detach().to(torch::kDouble) + a.detach().to(torch::kDouble)).to(torch::kFloat)));
        EXPECT_TRUE(torch::equal(y, y_ref));
        std::vector<torch::Tensor> outs{y}, outs_ref{y_ref}, gs{dy};
        if (h_used) outs.push_back(h), outs_ref.push_back(h_ref), gs.push_back(dh);
        const auto grads = torch::autograd::grad(outs, {x, a, w, b}, gs);
        const auto grads_ref = torch::autograd::grad(outs_ref, {x, a, w, b}, gs);
        for (int i = 0; i < 4; ++i) {
          ASSERT_EQ(grads[i].scalar_type(), grads_ref[i].scalar_type()) << i;
          EXPECT_TRUE(torch::equal(grads[i], grads_ref[i])) << "bf16 " << bf16 << " threads " << threads << " h_used "
                                                            << h_used << " grad " << i;
        }
        // The stream's gradient is h's own plus the norm's: against LibTorch's layer_norm in double.
        auto hd = h.detach().to(torch::kDouble).requires_grad_(true);
        torch::layer_norm(hd, {40}, w.detach().to(torch::kDouble), b.detach().to(torch::kDouble), 1e-5)
            .backward(dy.to(torch::kDouble));
        auto want = hd.grad() + (h_used ? dh.to(torch::kDouble) : torch::zeros_like(hd));
        EXPECT_LE(max_abs_diff(grads[0], want), 1e-4 * (1 + want.abs().max().item<double>()));
      }
    }
  }
}

// The forward normalises rows in groups (their sums' chains interleaved) where the width is a multiple of 16:
// each row exactly as when it is normalised alone (one row, no group), plain and after the residual add,
// float and bfloat16 outputs, one and two threads, a row count that leaves groups part-filled.
TEST_F(FusedOn, LayerNormRowsInGroupsAreEachRowAloneBitForBit) {
  for (int64_t C : {128, 40}) {
    for (bool bf16 : {false, true}) {
      for (int threads : {1, 2}) {
        ThreadCount tc(threads);
        torch::manual_seed(29);
        auto x = torch::randn({2, 67, C}) * 3 + 0.5;
        auto a = torch::randn({2, 67, C}).to(bf16 ? torch::kBFloat16 : torch::kFloat);
        auto w = torch::randn({C}) * 0.5 + 1, b = torch::randn({C}) * 0.1;
        Runtime rt;
        rt.bf16 = bf16;
        AutocastGuard autocast(rt);
        torch::InferenceMode inference;
        const auto y = fused_layer_norm(x, w, b, 1e-5);
        const auto [h2, y2] = fused_add_layer_norm(x, a, w, b, 1e-5);
        ASSERT_EQ(y.scalar_type(), bf16 ? torch::kBFloat16 : torch::kFloat);
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t t = 0; t < 67; ++t) {
            const auto row = x.narrow(0, i, 1).narrow(1, t, 1);
            ASSERT_TRUE(torch::equal(y[i][t], fused_layer_norm(row, w, b, 1e-5)[0][0]))
                << "C " << C << " bf16 " << bf16 << " threads " << threads << " row " << i << "," << t;
            const auto [h1, y1] = fused_add_layer_norm(row, a.narrow(0, i, 1).narrow(1, t, 1), w, b, 1e-5);
            ASSERT_TRUE(torch::equal(y2[i][t], y1[0][0])) << "with the residual add: C " << C << " row " << i << "," << t;
            ASSERT_TRUE(torch::equal(h2[i][t], h1[0][0]));
          }
      }
    }
  }
}

TEST_F(FusedOn, ResidualAddWithoutGradientsOrNotApplicableIsTheSumThenTheNorm) {
  torch::manual_seed(23);
  auto x = torch::randn({4, 9, 24});
  auto a = torch::randn({4, 9, 24});
  auto w = torch::randn({24});
  torch::Tensor h, y;
  {
    torch::InferenceMode guard;
    std::tie(h, y) = fused_add_layer_norm(x, a, w, {}, 1e-5);
  }
  EXPECT_TRUE(torch::equal(h, x + a));
  EXPECT_TRUE(torch::equal(y, fused_layer_norm(x + a, w, {}, 1e-5)));
  // A bfloat16 branch outside autocast (the norm's output would be float): the sum, then the norm.
  auto a16 = a.to(torch::kBFloat16);
  std::tie(h, y) = fused_add_layer_norm(x, a16, w, {}, 1e-5);
  EXPECT_TRUE(torch::equal(h, x + a16));
  EXPECT_TRUE(torch::equal(y, fused_layer_norm(x + a16, w, {}, 1e-5)));
  // Turned off: LibTorch's add and layer_norm.
  set_fused_ops(false);
  std::tie(h, y) = fused_add_layer_norm(x, a, w, {}, 1e-5);
  set_fused_ops(true);
  EXPECT_TRUE(torch::equal(y, torch::layer_norm(x + a, {24}, w, {}, 1e-5)));
}

// The training loss against the formula in double: sum over scored rows of log sum_j e^x_j - x_target, and
// its gradient e^(x - lse) - onehot (a zero row where the target is -1), float and bfloat16 logits (the
// gradient in their type), rows over threads, a vocabulary off the vector width.
TEST_F(FusedOn, CrossEntropySumMatchesTheFormulaAndItsGradient) {
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (int threads : {1, 2}) {
      ThreadCount tc(threads);
      torch::manual_seed(31);
      const int64_t B = 3, T = 70, V = 37;
      auto logits = (torch::randn({B, T, V}) * 3).to(dtype).requires_grad_(true);
      auto targets = torch::randint(0, V, {B, T}, torch::kLong);
      targets.index_put_({0, torch::indexing::Slice(0, 10)}, -1);  // ignored rows
      auto loss = fused_cross_entropy_sum(logits, targets);
      ASSERT_EQ(loss.scalar_type(), torch::kFloat);
      ASSERT_EQ(loss.dim(), 0);
      auto xd = logits.detach().to(torch::kDouble).reshape({-1, V});
      auto t = targets.reshape({-1});
      auto lse = xd.exp().sum(-1).log();  // |x| < ~15: no overflow in double
      double want = 0;
      auto grad_want = torch::zeros_like(xd);
      for (int64_t r = 0; r < xd.size(0); ++r) {
        const int64_t tr = t[r].item<int64_t>();
        if (tr < 0) continue;
        want += lse[r].item<double>() - xd[r][tr].item<double>();
        grad_want[r] = (xd[r] - lse[r]).exp();
        grad_want[r][tr] -= 1.0;
      }
      const std::string where = std::string(dtype == torch::kFloat ? "float" : "bf16") + " threads " + std::to_string(threads);
      EXPECT_NEAR(loss.item<double>(), want, 1e-5 * std::abs(want)) << where;
      loss.backward(torch::full({}, 0.5));
      ASSERT_EQ(logits.grad().scalar_type(), dtype);
      const double tol = dtype == torch::kFloat ? 1e-6 : std::ldexp(1.0, -8);  // bf16: its own rounding, |g| <= 0.5
      EXPECT_LE(max_abs_diff(logits.grad().reshape({-1, V}), grad_want * 0.5), tol) << where;
      EXPECT_EQ(logits.grad()[0].narrow(0, 0, 10).abs().max().item<double>(), 0.0) << where;  // ignored rows
      // Without a graph: the same loss.
      torch::NoGradGuard no_grad;
      EXPECT_EQ(fused_cross_entropy_sum(logits, targets).item<float>(), loss.item<float>()) << where;
    }
  }
}

TEST_F(FusedOn, CrossEntropySumRefusesTargetsOutOfRangeAndFallsBackToLibTorch) {
  auto logits = torch::randn({4, 5});
  EXPECT_THROW(fused_cross_entropy_sum(logits, torch::tensor({0, 1, 5, 2})), c10::Error);
  EXPECT_THROW(fused_cross_entropy_sum(logits, torch::tensor({0, -2, 1, 2})), c10::Error);
  const auto targets = torch::tensor({0, -1, 4, 2});
  const auto libtorch = torch::nn::functional::cross_entropy(
      logits, targets, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1).reduction(torch::kSum));
  EXPECT_NEAR(fused_cross_entropy_sum(logits, targets).item<double>(), libtorch.item<double>(), 1e-5);
  // Doubles, or the fused ops off: LibTorch's op exactly.
  EXPECT_TRUE(torch::equal(fused_cross_entropy_sum(logits.to(torch::kDouble), targets), libtorch));
  set_fused_ops(false);
  const auto off = fused_cross_entropy_sum(logits, targets);
  set_fused_ops(true);
  EXPECT_TRUE(torch::equal(off, libtorch));
}

TEST_F(FusedOn, WithoutGradientsTheSameValues) {
  torch::manual_seed(9);
  auto x = torch::randn({5, 33});
  auto w = torch::randn({33});
  auto with_grad = fused_layer_norm(x.clone().requires_grad_(true), w, {}, 1e-5).detach();
  torch::Tensor inference;
  {
    torch::InferenceMode guard;
    inference = fused_layer_norm(x, w, {}, 1e-5);
    EXPECT_TRUE(torch::equal(fused_gelu(x), fused_gelu(x.clone().requires_grad_(true)).detach()));
  }
  EXPECT_TRUE(torch::equal(inference, with_grad));
}

TEST_F(FusedOn, TurnedOffOrNotApplicableTheyAreLibTorchsOps) {
  torch::manual_seed(13);
  auto x = torch::randn({4, 24});
  auto w = torch::randn({24});
  auto b = torch::randn({24});
  // Doubles are not fused: LibTorch's results exactly.
  auto xd = x.to(torch::kDouble);
  EXPECT_TRUE(torch::equal(fused_gelu(xd), torch::gelu(xd)));
  EXPECT_TRUE(torch::equal(fused_layer_norm(xd, w.to(torch::kDouble), b.to(torch::kDouble), 1e-5),
                           torch::layer_norm(xd, {24}, w.to(torch::kDouble), b.to(torch::kDouble), 1e-5)));
  set_fused_ops(false);
  const auto gelu_off = fused_gelu(x);
  const auto ln_off = fused_layer_norm(x, w, b, 1e-5);
  set_fused_ops(true);
  EXPECT_TRUE(torch::equal(gelu_off, torch::gelu(x)));
  EXPECT_TRUE(torch::equal(ln_off, torch::layer_norm(x, {24}, w, b, 1e-5)));
  // On, they are not LibTorch's kernels (else the tests above would test LibTorch).
  EXPECT_FALSE(torch::equal(fused_gelu(x * 3), torch::gelu(x * 3)));
}

TEST(FusedOpsSwitch, TheConfigKeyReachesTheModelThroughTheRuntime) {
  Config c;
  c.device = "cpu";
  c.train.fused_ops = true;
  EXPECT_TRUE(make_runtime(c).fused_ops);
  EXPECT_TRUE(fused_ops_enabled());
  c.train.fused_ops = false;
  EXPECT_FALSE(make_runtime(c).fused_ops);
  EXPECT_FALSE(fused_ops_enabled());
}

// RoPE's rotation, fused, against LibTorch's composition (apply_rotary with the fused ops off: multiplies,
// a subtraction and an addition, a stack and a cast): equal bit for bit, forward and backward, in float and
// in bfloat16 (whose backward rounds each product before the sum, as LibTorch's autograd does), on q as the
// model makes it (a transposed view of the projection) and on a narrowed head (partial rotary).
TEST_F(FusedOn, RotaryIsLibTorchsCompositionBitForBit) {
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (int threads : {1, 2}) {
      ThreadCount tc(threads);
      torch::manual_seed(21);
      const int64_t B = 3, T = 37, H = 4, hs = 16;
      auto qkv = (torch::randn({B, T, 3 * H * hs}) * 2).to(dtype);
      auto angles = torch::outer(torch::arange(T, torch::kDouble), torch::rand({hs / 2}, torch::kDouble) * 3);
      const auto cos = angles.cos().to(torch::kFloat), sin = angles.sin().to(torch::kFloat);
      const auto cos_part = cos.narrow(1, 0, hs / 4).contiguous(), sin_part = sin.narrow(1, 0, hs / 4).contiguous();
      for (bool partial : {false, true}) {
        const auto g = torch::randn({B, H, T, partial ? hs / 2 : hs}).to(dtype);  // the same upstream gradient for both
        auto run = [&](bool fused) {
          set_fused_ops(fused);
          auto src = qkv.clone().requires_grad_(true);
          auto q = src.narrow(2, 0, H * hs).view({B, T, H, hs}).transpose(1, 2);  // (B, H, T, hs), strided
          if (partial) q = q.narrow(-1, 0, hs / 2);
          EXPECT_EQ(fused_rotary_applies(q, partial ? cos_part : cos, partial ? sin_part : sin), fused);
          auto y = apply_rotary(q, partial ? cos_part : cos, partial ? sin_part : sin);
          y.backward(g);
          set_fused_ops(true);
          return std::make_pair(y.detach(), src.grad());
        };
        auto [y_ref, dx_ref] = run(false);
        auto [y, dx] = run(true);
        ASSERT_EQ(y.scalar_type(), dtype);
        EXPECT_TRUE(torch::equal(y, y_ref)) << dtype << " partial " << partial << ": largest difference "
                                            << max_abs_diff(y, y_ref);
        EXPECT_TRUE(torch::equal(dx, dx_ref)) << dtype << " partial " << partial << ": largest difference "
                                              << max_abs_diff(dx, dx_ref);
      }
    }
  }
}
