// The fused CPU attention softmax against attention's published formula, softmax(scale q k^T + mask) v
// with the causal limit, evaluated here with LibTorch's ops in double (forward, and its gradients for q,
// k, v and a learned bias by autograd): float and bfloat16, queries at the end of the keys, masks of every
// broadcast shape, rows off the vector width, both vector widths (8 and 16 floats) on any CPU, one and two
// threads; masked keys get exactly no weight; long queries without autograd, run in causal blocks; and the
// model with the fused ops on and off.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <array>
#include <limits>

#include "model/attention_kernels.h"
#include "model/dnnl_matmul.h"
#include "model/fused_attention.h"
#include "model/fused_ops.h"
#include "model/gpt.h"
#include "model/positional/registry.h"
#include "test_fused.h"
#include "test_models.h"
#include "util/runtime.h"

using namespace poslab;
using poslab::testing::max_abs_diff;
using poslab::testing::ThreadCount;

// Outside the anonymous namespace: a test class deriving from a type in it draws GCC's -Wsubobject-linkage.
struct FusedAttentionOn : poslab::testing::FusedOn {};

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The formula in double: query i of t_q sees keys j <= t_k - t_q + i; mask broadcast and added.
torch::Tensor attention_formula(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& mask, double scale) {
  const int64_t tq = q.size(2), tk = k.size(2);
  auto causal = torch::zeros({tq, tk}, torch::kDouble);
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = tk - tq + i + 1; j < tk; ++j) causal[i][j] = -kInf;
  auto att = torch::matmul(q, k.transpose(-2, -1)) * scale + causal;
  if (mask.defined()) att = att + mask;
  return torch::matmul(torch::softmax(att, -1), v);
}

struct Case {
  int64_t B, H, tq, tk, hs;
  std::string mask;  // none, causal2d (an explicit causal mask), bias3d (H, tq, tk), bias4d (1, H, tq, tk), row (H, 1, tk)
};

torch::Tensor make_mask(const Case& c) {
  if (c.mask == "none") return {};
  if (c.mask == "causal2d") {
    auto m = torch::zeros({c.tq, c.tk});
    for (int64_t i = 0; i < c.tq; ++i)
      for (int64_t j = c.tk - c.tq + i + 1; j < c.tk; ++j) m[i][j] = -std::numeric_limits<float>::infinity();
    return m;
  }
  if (c.mask == "bias3d") return torch::randn({c.H, c.tq, c.tk});
  if (c.mask == "bias4d") return torch::randn({1, c.H, c.tq, c.tk});
  return torch::randn({c.H, 1, c.tk});
}

const std::vector<Case> kCases = {
    {2, 3, 64, 64, 16, "none"},   {2, 3, 37, 37, 8, "bias3d"}, {1, 2, 5, 70, 16, "bias4d"},  // queries at the end
    {3, 2, 1, 33, 8, "causal2d"}, {2, 2, 17, 17, 8, "row"},    {1, 4, 80, 80, 32, "bias3d"},
    // longer rows, heads of several 16-lane vectors, an odd head size
    {1, 2, 150, 150, 48, "none"}, {1, 1, 40, 130, 80, "row"},  {2, 2, 20, 20, 7, "bias3d"}};

// The softmax's rows in 8- or 16-float vectors on any CPU (the width the CPU would not choose runs slower,
// the same formula): both are checked wherever the tests run, not only the one this machine picks.
struct SoftmaxLanes {
  explicit SoftmaxLanes(int lanes) { kernels::set_softmax_lanes(lanes); }
  ~SoftmaxLanes() { kernels::set_softmax_lanes(0); }
};
constexpr std::array<int, 2> kLanes = {8, 16};

// A case's q, k and v, drawn in float, taking gradients.
std::array<torch::Tensor, 3> draw_qkv(const Case& c) {
  return {torch::randn({c.B, c.H, c.tq, c.hs}).requires_grad_(true), torch::randn({c.B, c.H, c.tk, c.hs}).requires_grad_(true),
          torch::randn({c.B, c.H, c.tk, c.hs}).requires_grad_(true)};
}

// The same values in double, taking gradients of their own: the formula's inputs.
std::array<torch::Tensor, 3> in_double(const std::array<torch::Tensor, 3>& qkv) {
  std::array<torch::Tensor, 3> out;
  for (int i = 0; i < 3; ++i) out[i] = qkv[i].detach().to(torch::kDouble).requires_grad_(true);
  return out;
}

}  // namespace

TEST_F(FusedAttentionOn, MatchesTheFormulaAndItsGradientsInFloat) {
  for (int lanes : kLanes)
  for (int threads : {1, 2}) {
    SoftmaxLanes width(lanes);
    ThreadCount tc(threads);
    for (const auto& c : kCases) {
      torch::manual_seed(3);
      auto [q, k, v] = draw_qkv(c);
      auto mask = make_mask(c);
      const bool learned = mask.defined() && c.mask != "causal2d";
      if (learned) mask.requires_grad_(true);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.hs));
      ASSERT_TRUE(fused_attention_applies(q, k, v, mask));
      auto y = fused_attention(q, k, v, mask, scale);
      ASSERT_EQ(y.scalar_type(), torch::kFloat);

      auto [qd, kd, vd] = in_double({q, k, v});
      auto md = mask.defined() ? mask.detach().to(torch::kDouble).requires_grad_(learned) : torch::Tensor();
      auto want = attention_formula(qd, kd, vd, md, scale);
      const std::string where = c.mask + " tq=" + std::to_string(c.tq) + " tk=" + std::to_string(c.tk) + " threads=" +
                                std::to_string(threads) + " lanes=" + std::to_string(lanes);
      EXPECT_LE(max_abs_diff(y.detach(), want), 2e-6 * (1 + want.abs().max().item<double>())) << where;

      auto g = torch::randn(y.sizes());
      y.backward(g);
      want.backward(g.to(torch::kDouble));
      for (auto [got, ref, name] : {std::make_tuple(q.grad(), qd.grad(), "dq"), std::make_tuple(k.grad(), kd.grad(), "dk"),
                                    std::make_tuple(v.grad(), vd.grad(), "dv")})
        EXPECT_LE(max_abs_diff(got, ref), 1e-5 * (1 + ref.abs().max().item<double>())) << where << " " << name;
      if (learned) {
        ASSERT_TRUE(mask.grad().defined()) << where;
        ASSERT_EQ(mask.grad().sizes(), mask.sizes()) << where;
        EXPECT_LE(max_abs_diff(mask.grad(), md.grad()), 1e-5 * (1 + md.grad().abs().max().item<double>())) << where << " dmask";
      }
    }
  }
}

// Under bf16 autocast the scores and probabilities are bfloat16: the formula within bfloat16's rounding
// (q, k, v rounded once, the scores and the probabilities once each; measured 0.4-0.8% of the largest value).
TEST_F(FusedAttentionOn, UnderBf16AutocastFollowsTheFormulaToBfloat16Rounding) {
  POSLAB_SKIP_WITHOUT_CPU_BF16();
  for (int lanes : kLanes)
  for (const auto& c : kCases) {
    SoftmaxLanes width(lanes);
    torch::manual_seed(4);
    auto [q, k, v] = draw_qkv(c);
    auto mask = make_mask(c);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.hs));
    torch::Tensor y;
    {
      Runtime rt;
      rt.bf16 = true;
      AutocastGuard autocast(rt);
      y = fused_attention(q, k, v, mask, scale);
    }
    ASSERT_EQ(y.scalar_type(), torch::kBFloat16) << c.mask;
    auto [qd, kd, vd] = in_double({q, k, v});
    auto want = attention_formula(qd, kd, vd, mask.defined() ? mask.to(torch::kDouble) : torch::Tensor(), scale);
    EXPECT_LE(max_abs_diff(y.detach(), want), 0.03 * want.abs().max().item<double>()) << c.mask;
    auto g = torch::randn(y.sizes());
    y.backward(g.to(torch::kBFloat16));
    want.backward(g.to(torch::kBFloat16).to(torch::kDouble));
    for (auto [got, ref] : {std::make_pair(q.grad(), qd.grad()), std::make_pair(k.grad(), kd.grad()), std::make_pair(v.grad(), vd.grad())})
      EXPECT_LE(max_abs_diff(got, ref), 0.05 * ref.abs().max().item<double>()) << c.mask;
  }
}

// bfloat16 q, k and v, as the model's projection hands them over (with oneDNN, both products go to it
// directly in one autograd node): the formula from the same rounded inputs, within bfloat16's rounding,
// and the gradients of q, k, v and a learned bias, on one and two threads.
TEST_F(FusedAttentionOn, Bfloat16InputsFollowTheFormulaAndItsGradients) {
  POSLAB_SKIP_WITHOUT_CPU_BF16();
  for (int lanes : kLanes)
  for (int threads : {1, 2}) {
    SoftmaxLanes width(lanes);
    ThreadCount tc(threads);
    for (const auto& c : kCases) {
      torch::manual_seed(9);
      auto [qf, kf, vf] = draw_qkv(c);
      auto q = qf.detach().to(torch::kBFloat16).requires_grad_(true), k = kf.detach().to(torch::kBFloat16).requires_grad_(true),
           v = vf.detach().to(torch::kBFloat16).requires_grad_(true);
      auto mask = make_mask(c);
      const bool learned = mask.defined() && c.mask != "causal2d";
      if (learned) mask.requires_grad_(true);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.hs));
      auto y = fused_attention(q, k, v, mask, scale);
      ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
      ASSERT_EQ(y.sizes(), q.sizes());
      auto [qd, kd, vd] = in_double({q, k, v});
      auto md = mask.defined() ? mask.detach().to(torch::kDouble).requires_grad_(learned) : torch::Tensor();
      auto want = attention_formula(qd, kd, vd, md, scale);
      const std::string where = c.mask + " tq=" + std::to_string(c.tq) + " threads=" + std::to_string(threads) + " lanes=" +
                                std::to_string(lanes);
      EXPECT_LE(max_abs_diff(y.detach(), want), 0.03 * want.abs().max().item<double>()) << where;
      auto g = torch::randn(y.sizes()).to(torch::kBFloat16);
      y.backward(g);
      want.backward(g.to(torch::kDouble));
      for (auto [got, ref, name] : {std::make_tuple(q.grad(), qd.grad(), "dq"), std::make_tuple(k.grad(), kd.grad(), "dk"),
                                    std::make_tuple(v.grad(), vd.grad(), "dv")}) {
        ASSERT_EQ(got.scalar_type(), torch::kBFloat16) << where << " " << name;
        EXPECT_LE(max_abs_diff(got, ref), 0.05 * ref.abs().max().item<double>()) << where << " " << name;
      }
      if (learned) {
        ASSERT_EQ(mask.grad().sizes(), mask.sizes()) << where;
        EXPECT_LE(max_abs_diff(mask.grad(), md.grad()), 0.05 * md.grad().abs().max().item<double>()) << where << " dmask";
      }
    }
  }
}

// Keys past the causal limit and keys masked with -inf take exactly no weight: changing their values
// changes nothing, bit for bit, in the output and in every gradient but their own (which is exactly 0).
TEST_F(FusedAttentionOn, MaskedKeysTakeExactlyNoWeight) {
  for (int lanes : kLanes)
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    SoftmaxLanes width(lanes);
    torch::manual_seed(6);
    const int64_t tq = 20, tk = 20;
    auto q = torch::randn({2, 2, tq, 8}).to(dtype), k = torch::randn({2, 2, tk, 8}).to(dtype);
    auto v = torch::randn({2, 2, tk, 8}).to(dtype);
    auto mask = torch::zeros({2, tq, tk});
    mask.select(2, 3).fill_(-std::numeric_limits<float>::infinity());  // key 3 masked for every query
    auto run = [&](const torch::Tensor& kk, const torch::Tensor& vv) {
      auto kg = kk.clone().requires_grad_(true), vg = vv.clone().requires_grad_(true);
      auto y = fused_attention(q, kg, vg, mask, 0.35);
      y.backward(torch::ones_like(y));
      return std::make_tuple(y.detach(), kg.grad(), vg.grad());
    };
    auto [y0, dk0, dv0] = run(k, v);
    auto k2 = k.clone(), v2 = v.clone();
    k2.select(2, 3).mul_(5).add_(1);   // a masked key
    v2.select(2, 3).mul_(-7).add_(2);
    k2.select(2, tk - 1).mul_(3);      // the last key: seen only by the last query
    v2.select(2, tk - 1).add_(1);
    auto [y1, dk1, dv1] = run(k2, v2);
    EXPECT_TRUE(torch::equal(y0.narrow(2, 0, tq - 1), y1.narrow(2, 0, tq - 1)));
    EXPECT_FALSE(torch::equal(y0.narrow(2, tq - 1, 1), y1.narrow(2, tq - 1, 1)));  // and the last query does see it
    EXPECT_EQ(dk0.select(2, 3).abs().max().item<double>(), 0.0);
    EXPECT_EQ(dv0.select(2, 3).abs().max().item<double>(), 0.0);
  }
}

// The widths are two summation orders of one formula: asked for, each runs (long rows then differ in their
// last bits between them), and 0 gives the choice back to the CPU.
TEST_F(FusedAttentionOn, EachVectorWidthRunsWhenAskedFor) {
  torch::manual_seed(12);
  auto q = torch::randn({1, 2, 150, 16}), k = torch::randn({1, 2, 150, 16}), v = torch::randn({1, 2, 150, 16});
  std::vector<torch::Tensor> y;
  for (int lanes : kLanes) {
    SoftmaxLanes width(lanes);
    EXPECT_EQ(kernels::softmax_lanes(), lanes);
    y.push_back(fused_attention(q, k, v, torch::Tensor(), 0.25));
  }
  EXPECT_FALSE(torch::equal(y[0], y[1])) << "8 and 16 lanes gave the same bits: one width did not run";
  EXPECT_LE(max_abs_diff(y[0], y[1]), 1e-5);
  const int native = kernels::softmax_lanes();
  EXPECT_TRUE(native == 8 || native == 16);
  EXPECT_THROW(kernels::set_softmax_lanes(4), std::invalid_argument);
  EXPECT_EQ(kernels::softmax_lanes(), native);
}

TEST_F(FusedAttentionOn, ThreadsAndGradientModeChangeNothing) {
  torch::manual_seed(8);
  auto q = torch::randn({4, 4, 48, 16}), k = torch::randn({4, 4, 48, 16}), v = torch::randn({4, 4, 48, 16});
  auto bias = torch::randn({4, 48, 48});
  torch::Tensor one, two, no_grad;
  {
    ThreadCount tc(1);
    one = fused_attention(q.requires_grad_(true), k, v, bias, 0.25).detach();
  }
  {
    ThreadCount tc(2);
    two = fused_attention(q, k, v, bias, 0.25).detach();
    torch::NoGradGuard guard;
    no_grad = fused_attention(q, k, v, bias, 0.25);
  }
  EXPECT_TRUE(torch::equal(one, two));
  EXPECT_TRUE(torch::equal(one, no_grad));
  // And in bfloat16 (the products on oneDNN where it is linked), gradients included.
  auto run = [&](int threads, bool grad) {
    ThreadCount tc(threads);
    torch::AutoGradMode mode(grad);
    auto qb = q.detach().to(torch::kBFloat16).requires_grad_(true);
    auto y = fused_attention(qb, k.to(torch::kBFloat16), v.to(torch::kBFloat16), bias, 0.25);
    if (grad) y.backward(torch::ones_like(y));
    return std::make_pair(y.detach(), grad ? qb.grad() : torch::Tensor());
  };
  const auto [y1, dq1] = run(1, true);
  const auto [y2, dq2] = run(2, true);
  EXPECT_TRUE(torch::equal(y1, y2));
  EXPECT_TRUE(torch::equal(dq1, dq2));
  EXPECT_TRUE(torch::equal(y1, run(2, false).first));
}

// Without autograd, queries past kInferenceQueryBlock run in blocks, each against the keys its queries see:
// the formula still, queries at the end of the keys or not, with masks of every shape cut to each block,
// and no further from the autograd path's output than bfloat16's rounding (float: a few ulp).
TEST_F(FusedAttentionOn, LongQueriesWithoutAutogradFollowTheFormulaInCausalBlocks) {
  const int64_t Q = kInferenceQueryBlock;
  const std::vector<Case> cases = {{2, 3, Q + 1, Q + 1, 16, "none"},         {1, 2, 2 * Q + 45, 2 * Q + 45, 8, "bias3d"},
                                   {1, 2, Q + 70, 3 * Q, 16, "bias4d"},       {2, 2, 2 * Q, 2 * Q, 8, "row"},
                                   {1, 2, 2 * Q + 3, 2 * Q + 3, 8, "causal2d"}, {1, 1, 3 * Q, 3 * Q + 1, 8, "none"}};
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    if (dtype == torch::kBFloat16 && !cpu_has_bf16()) continue;  // as POSLAB_SKIP_WITHOUT_CPU_BF16, for this half alone
    for (const auto& c : cases) {
      torch::manual_seed(21);
      auto [qf, kf, vf] = draw_qkv(c);
      auto q = qf.detach().to(dtype), k = kf.detach().to(dtype), v = vf.detach().to(dtype);
      const auto mask = make_mask(c);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.hs));
      torch::Tensor blocked, whole;
      {
        torch::NoGradGuard no_grad;
        blocked = fused_attention(q, k, v, mask, scale);
      }
      whole = fused_attention(q.clone().requires_grad_(true), k, v, mask, scale).detach();  // attended whole
      ASSERT_EQ(blocked.sizes(), q.sizes());
      ASSERT_EQ(blocked.scalar_type(), whole.scalar_type());
      auto [qd, kd, vd] = in_double({q, k, v});
      const auto want = attention_formula(qd, kd, vd, mask.defined() ? mask.to(torch::kDouble) : torch::Tensor(), scale);
      const double top = want.abs().max().item<double>();
      const bool f32 = dtype == torch::kFloat;
      const std::string where = c.mask + " tq=" + std::to_string(c.tq) + " tk=" + std::to_string(c.tk) + (f32 ? " float" : " bf16");
      EXPECT_LE(max_abs_diff(blocked, want), (f32 ? 1e-4 : 0.03) * top) << where;
      EXPECT_LE(max_abs_diff(blocked, whole), (f32 ? 1e-5 : 0.01) * top) << where;
    }
  }
}

// Attention read from the fused projection's rows and written to c_proj's, against the same attention on
// q, k and v split, viewed and transposed as the model did before: bit for bit, the output and the
// gradients of the rows and of a learned bias, with every mask shape of self-attention.
TEST_F(FusedAttentionOn, FromTheProjectionRowsIsTheSplitAttentionBitForBit) {
  const auto probe = torch::zeros({1, 4, 6}, torch::kBFloat16);
  if (!dnnl_matmul_active()) {
    EXPECT_FALSE(fused_attention_qkv_applies(probe, 2, {}));
    GTEST_SKIP() << "no oneDNN products here: the model splits q, k and v itself";
  }
  EXPECT_TRUE(fused_attention_qkv_applies(probe, 2, {}));
  EXPECT_FALSE(fused_attention_qkv_applies(probe.to(torch::kFloat), 2, {}));
  EXPECT_FALSE(fused_attention_qkv_applies(probe, 4, {}));  // 6 columns are not 3 x 4 heads
  for (int threads : {1, 2}) {
    ThreadCount tc(threads);
    for (const auto& c : kCases) {
      if (c.tq != c.tk) continue;  // self-attention: one T for queries and keys
      torch::manual_seed(12);
      const int64_t C = c.H * c.hs;
      auto rows = torch::randn({c.B, c.tq, 3 * C}).to(torch::kBFloat16).requires_grad_(true);
      auto mask = make_mask(c);
      const bool learned = mask.defined() && c.mask != "causal2d";
      if (learned) mask.requires_grad_(true);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.hs));
      auto y = fused_attention_qkv(rows, c.H, mask, scale);
      ASSERT_EQ(y.sizes(), (std::vector<int64_t>{c.B, c.tq, C}));
      auto rows_ref = rows.detach().clone().requires_grad_(true);
      auto mask_ref = mask.defined() ? mask.detach().clone().requires_grad_(learned) : torch::Tensor();
      auto split = rows_ref.split(C, 2);
      auto heads = [&](const torch::Tensor& t) { return t.view({c.B, c.tq, c.H, c.hs}).transpose(1, 2); };
      auto y_ref = fused_attention(heads(split[0]), heads(split[1]), heads(split[2]), mask_ref, scale)
                       .transpose(1, 2)
                       .reshape({c.B, c.tq, C});
      const std::string where = c.mask + " T=" + std::to_string(c.tq) + " threads=" + std::to_string(threads);
      EXPECT_TRUE(torch::equal(y.detach(), y_ref.detach())) << where;
      auto g = torch::randn(y.sizes()).to(torch::kBFloat16);
      y.backward(g);
      y_ref.backward(g);
      EXPECT_TRUE(torch::equal(rows.grad(), rows_ref.grad())) << where;
      if (learned) EXPECT_TRUE(torch::equal(mask.grad(), mask_ref.grad())) << where;
    }
  }
}

TEST_F(FusedAttentionOn, AppliesOnlyToCpuFloatAndBfloat16WithTheOpsOn) {
  auto q = torch::randn({1, 1, 4, 4});
  EXPECT_TRUE(fused_attention_applies(q, q, q, {}));
  EXPECT_TRUE(fused_attention_applies(q.to(torch::kBFloat16), q, q, torch::zeros({4, 4})));
  EXPECT_FALSE(fused_attention_applies(q.to(torch::kDouble), q, q, {}));
  EXPECT_FALSE(fused_attention_applies(q, q, q, torch::zeros({4, 4}, torch::kDouble)));
  set_fused_ops(false);
  EXPECT_FALSE(fused_attention_applies(q, q, q, {}));
}

// The whole model, every kind, in float: the fused ops on against LibTorch's ops, loss and every
// parameter's gradient (the kinds with a bias pass it as the mask, with its gradient for the learned ones).
TEST(FusedAttentionModel, EveryKindGivesLibTorchsLossAndGradients) {
  for (const auto& kind : poslab::testing::kBuiltInKinds) {
    torch::manual_seed(2);
    auto config = poslab::testing::tiny(kind);
    GPT model(config);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->named_parameters())
        if (p.key().rfind("pos.", 0) == 0) p.value().normal_(0.0, 0.3);  // zero-initialised tables would hide a bias
    }
    auto idx = torch::randint(0, config.vocab_size, {3, config.block_size}, torch::kLong);
    auto run = [&](bool fused) {
      set_fused_ops(fused);
      model->zero_grad();
      torch::manual_seed(5);  // randomized positions draw the same
      auto logits = model->forward(idx);
      auto loss = model->loss(logits, idx);
      loss.backward();
      std::vector<torch::Tensor> grads;
      for (auto& p : model->parameters()) grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
      set_fused_ops(false);
      return std::make_pair(loss.item<double>(), grads);
    };
    auto [loss_off, grads_off] = run(false);
    auto [loss_on, grads_on] = run(true);
    EXPECT_NEAR(loss_on, loss_off, 1e-5) << kind;
    for (size_t i = 0; i < grads_on.size(); ++i)
      EXPECT_LE(max_abs_diff(grads_on[i], grads_off[i]), 1e-4 * (1 + grads_off[i].abs().max().item<double>())) << kind << " parameter " << i;
  }
}
