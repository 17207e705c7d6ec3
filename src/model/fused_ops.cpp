// Autograd wrappers of the fused CPU loops: when they apply, the tensors they need, the chunks run
// in parallel (at::parallel_for: inline inside a batch shard's thread) and the backward passes.
#include "model/fused_ops.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>

#include <atomic>
#include <optional>
#include <vector>

#include "model/fused_kernels.h"
#include "model/rotary_kernels.h"

namespace poslab {
namespace {

std::atomic<bool> g_enabled{false};

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using kernels::bf16;

// Element-wise work in chunks of at least 16k elements: below that a thread's start costs more than it saves.
template <class F>
void for_elements(int64_t n, F body) {
  at::parallel_for(0, n, /*grain_size=*/16384, body);
}

// y = GELU(x); with d (float, x's size) its derivative too, written for the backward in the same pass.
torch::Tensor gelu_forward(const torch::Tensor& x, float* d = nullptr) {
  auto y = torch::empty_like(x);
  auto run = [&](const auto* xp, auto* yp) {
    for_elements(x.numel(), [&](int64_t b, int64_t e) {
      if (d != nullptr) kernels::gelu_forward_with_derivative(xp + b, yp + b, d + b, e - b);
      else kernels::gelu_forward(xp + b, yp + b, e - b);
    });
  };
  if (x.scalar_type() == torch::kFloat) run(x.data_ptr<float>(), y.data_ptr<float>());
  else run(bf16_data(x), bf16_data(y));
  return y;
}

struct GeluFunction : torch::autograd::Function<GeluFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x) {
    auto d = torch::empty(x.sizes(), x.options().dtype(torch::kFloat));  // the derivative, for the backward
    auto y = gelu_forward(x, d.data_ptr<float>());
    ctx->save_for_backward({d});
    ctx->saved_data["type"] = static_cast<int64_t>(x.scalar_type());
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto d = ctx->get_saved_variables()[0];
    const auto type = static_cast<c10::ScalarType>(ctx->saved_data["type"].toInt());
    const auto dy = grads[0].to(type).contiguous();
    auto dx = torch::empty(d.sizes(), d.options().dtype(type));
    const float* dp = d.data_ptr<float>();
    auto run = [&](const auto* dyp, auto* dxp) {
      for_elements(d.numel(), [&](int64_t b, int64_t e) {
        kernels::gelu_backward_with_derivative(dyp + b, dp + b, dxp + b, e - b);
      });
    };
    if (type == torch::kFloat) run(dy.data_ptr<float>(), dx.data_ptr<float>());
    else run(bf16_data(dy), bf16_data(dx));
    return {dx};
  }
};

// Rows of C: chunks of whole rows, at least 64 rows each.
template <class F>
void for_rows(int64_t rows, F body) {
  at::parallel_for(0, rows, /*grain_size=*/64, body);
}

// y, mean, rstd of x (rows, C) as float, or y as bfloat16. With a residual a (same shape, bfloat16 with a
// bfloat16 y, float with a float y) the norm is of h = x + a, written to h.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> layer_norm_forward(const torch::Tensor& x,
                                                                           const torch::Tensor& w,
                                                                           const torch::Tensor& b, double eps,
                                                                           bool bf16_out,
                                                                           const torch::Tensor& a = {},
                                                                           torch::Tensor* h = nullptr) {
  const int64_t C = x.size(-1), rows = x.numel() / C;
  auto y = torch::empty(x.sizes(), x.options().dtype(bf16_out ? torch::kBFloat16 : torch::kFloat));
  auto stats = torch::empty({2, rows}, x.options());  // mean, rstd
  if (a.defined()) *h = torch::empty_like(x);
  const float *xp = x.data_ptr<float>(), *wp = w.data_ptr<float>(), *bp = b.defined() ? b.data_ptr<float>() : nullptr;
  float *mp = stats[0].data_ptr<float>(), *sp = stats[1].data_ptr<float>();
  const auto e = static_cast<float>(eps);
  for_rows(rows, [&](int64_t r0, int64_t r1) {
    const int64_t n = r1 - r0, o = r0 * C;
    if (a.defined() && bf16_out)
      kernels::add_layer_norm_forward(xp + o, bf16_data(a) + o, h->data_ptr<float>() + o, wp, bp, bf16_data(y) + o,
                                      mp + r0, sp + r0, n, C, e);
    else if (a.defined())
      kernels::add_layer_norm_forward(xp + o, a.data_ptr<float>() + o, h->data_ptr<float>() + o, wp, bp,
                                      y.data_ptr<float>() + o, mp + r0, sp + r0, n, C, e);
    else if (bf16_out)
      kernels::layer_norm_forward(xp + o, wp, bp, bf16_data(y) + o, mp + r0, sp + r0, n, C, e);
    else
      kernels::layer_norm_forward(xp + o, wp, bp, y.data_ptr<float>() + o, mp + r0, sp + r0, n, C, e);
  });
  return {y, stats[0], stats[1]};
}

// The norm's backward over x (the normalised input: h for the residual form): dx, and dw, db summed.
// With a residual (a_type set): dx also carries dres, h's gradient from later (may be undefined), and da
// is dx in a_type. Returns dx, da (or undefined), dw, db (or undefined).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, torch::Tensor> layer_norm_backward(
    torch::Tensor dy, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& mean,
    const torch::Tensor& rstd, bool has_bias, std::optional<c10::ScalarType> a_type = std::nullopt,
    const torch::Tensor& dres = {}) {
  dy = dy.contiguous();
  // A float residual takes its gradient in float: then so is dy read.
  if (dy.scalar_type() != torch::kBFloat16 || (a_type && *a_type == torch::kFloat)) dy = dy.to(torch::kFloat);
  const bool bf16_dy = dy.scalar_type() == torch::kBFloat16;
  torch::Tensor dr = dres.defined() ? dres.to(torch::kFloat).contiguous() : torch::Tensor();
  const int64_t C = x.size(-1), rows = x.numel() / C;
  auto dx = torch::empty_like(x);
  // The residual's gradient in its own type, written in the same pass (bfloat16 only with a bfloat16 dy).
  torch::Tensor da;
  if (a_type) da = torch::empty_like(x, x.options().dtype(bf16_dy ? torch::kBFloat16 : torch::kFloat));
  // dw and db summed per chunk of rows, then over the chunks: no two threads add into one array.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), rows / 64));
  auto partial = torch::zeros({chunks, 2, C}, x.options());
  const float *xp = x.data_ptr<float>(), *wp = w.data_ptr<float>(), *mp = mean.data_ptr<float>(),
              *sp = rstd.data_ptr<float>(), *drp = dr.defined() ? dr.data_ptr<float>() : nullptr;
  float *dxp = dx.data_ptr<float>(), *pp = partial.data_ptr<float>();
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  at::parallel_for(0, chunks, /*grain_size=*/1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = c * per_chunk, r1 = std::min(rows, r0 + per_chunk), o = r0 * C;
      if (r0 >= r1) continue;
      float* dw = pp + c * 2 * C;
      float* db = has_bias ? dw + C : nullptr;
      const float* dro = drp ? drp + o : nullptr;
      if (a_type && bf16_dy)
        kernels::add_layer_norm_backward(bf16_data(dy) + o, xp + o, wp, mp + r0, sp + r0, dro, dxp + o,
                                         bf16_data(da) + o, dw, db, r1 - r0, C);
      else if (a_type)
        kernels::add_layer_norm_backward(dy.data_ptr<float>() + o, xp + o, wp, mp + r0, sp + r0, dro, dxp + o,
                                         da.data_ptr<float>() + o, dw, db, r1 - r0, C);
      else if (bf16_dy)
        kernels::layer_norm_backward(bf16_data(dy) + o, xp + o, wp, mp + r0, sp + r0, dxp + o, dw, db, r1 - r0, C);
      else
        kernels::layer_norm_backward(dy.data_ptr<float>() + o, xp + o, wp, mp + r0, sp + r0, dxp + o, dw, db,
                                     r1 - r0, C);
    }
  });
  auto sums = partial.sum(0);  // (2, C)
  if (da.defined() && da.scalar_type() != *a_type) da = da.to(*a_type);
  return {dx, da, sums[0], has_bias ? sums[1] : torch::Tensor()};
}

struct LayerNormFunction : torch::autograd::Function<LayerNormFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b, double eps, bool bf16_out) {
    const bool has_bias = b.numel() > 0;  // fused_layer_norm passes an empty tensor for none
    auto [y, mean, rstd] = layer_norm_forward(x, w, has_bias ? b : torch::Tensor(), eps, bf16_out);
    ctx->save_for_backward({x, w, mean, rstd});
    ctx->saved_data["has_bias"] = has_bias;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [dx, da, dw, db] = layer_norm_backward(grads[0], saved[0], saved[1], saved[2], saved[3],
                                                ctx->saved_data["has_bias"].toBool());
    return {dx, dw, db, torch::Tensor(), torch::Tensor()};
  }
};

// h = x + a and the norm of h, as one node: outputs h (the residual stream, float) and y.
struct AddLayerNormFunction : torch::autograd::Function<AddLayerNormFunction> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& a,
                               const torch::Tensor& w, const torch::Tensor& b, double eps, bool bf16_out) {
    const bool has_bias = b.numel() > 0;
    torch::Tensor h;
    auto [y, mean, rstd] = layer_norm_forward(x, w, has_bias ? b : torch::Tensor(), eps, bf16_out, a, &h);
    ctx->save_for_backward({h, w, mean, rstd});
    ctx->saved_data["has_bias"] = has_bias;
    ctx->saved_data["a_type"] = static_cast<int64_t>(a.scalar_type());
    return {h, y};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto a_type = static_cast<c10::ScalarType>(ctx->saved_data["a_type"].toInt());
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    if (!grads[1].defined()) {  // only h is used further on
      if (!grads[0].defined()) return {{}, {}, {}, {}, {}, {}};
      return {grads[0], grads[0].to(a_type), torch::Tensor(), torch::Tensor(), {}, {}};
    }
    auto [dx, da, dw, db] = layer_norm_backward(grads[1], saved[0], saved[1], saved[2], saved[3], has_bias, a_type,
                                                grads[0]);
    return {dx, da, dw, db, torch::Tensor(), torch::Tensor()};
  }
};

// The rows' log-sum-exp and their summed loss.
std::pair<torch::Tensor, double> cross_entropy_rows(const torch::Tensor& logits, const torch::Tensor& targets) {
  const int64_t rows = logits.size(0), V = logits.size(1);
  auto lse = torch::empty({rows}, logits.options().dtype(torch::kFloat));
  std::vector<float> loss(rows);
  const int64_t* tp = targets.data_ptr<int64_t>();
  float* lp = lse.data_ptr<float>();
  for_rows(rows, [&](int64_t r0, int64_t r1) {
    if (logits.scalar_type() == torch::kFloat)
      kernels::cross_entropy_forward(logits.data_ptr<float>() + r0 * V, tp + r0, r1 - r0, V, lp + r0, loss.data() + r0);
    else
      kernels::cross_entropy_forward(bf16_data(logits) + r0 * V, tp + r0, r1 - r0, V, lp + r0, loss.data() + r0);
  });
  double total = 0;  // in row order: the same sum for any thread count
  for (float l : loss) total += l;
  return {lse, total};
}

// The summed cross-entropy of logits (rows, V) against targets (rows,), -1 ignored: one node, the logits
// read in their own type (no float copy), the backward written in it.
struct CrossEntropyFunction : torch::autograd::Function<CrossEntropyFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits, const torch::Tensor& targets) {
    auto [lse, total] = cross_entropy_rows(logits, targets);
    ctx->save_for_backward({logits, targets, lse});
    return torch::full({}, total, logits.options().dtype(torch::kFloat));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &logits = saved[0], &targets = saved[1], &lse = saved[2];
    const int64_t rows = logits.size(0), V = logits.size(1);
    const auto g = grads[0].item<float>();
    auto dx = torch::empty_like(logits);
    const int64_t* tp = targets.data_ptr<int64_t>();
    const float* lp = lse.data_ptr<float>();
    for_rows(rows, [&](int64_t r0, int64_t r1) {
      if (logits.scalar_type() == torch::kFloat)
        kernels::cross_entropy_backward(logits.data_ptr<float>() + r0 * V, tp + r0, lp + r0, g, r1 - r0, V,
                                        dx.data_ptr<float>() + r0 * V);
      else
        kernels::cross_entropy_backward(bf16_data(logits) + r0 * V, tp + r0, lp + r0, g, r1 - r0, V,
                                        bf16_data(dx) + r0 * V);
    });
    return {dx, torch::Tensor()};
  }
};

// y = the pairs of x turned (or, backward, dx from dy turned back): rows (b, h, t) of x at their strides,
// y written contiguous.
torch::Tensor rotary_rows(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, bool backward) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), P = x.size(3) / 2;
  auto y = torch::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const float *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
  const int64_t s0 = x.stride(0), s1 = x.stride(1), s2 = x.stride(2);
  // One row of each type: the same loop over the rows, the data pointers looked up once.
  auto rows = [&](const auto* xp, auto* yp) {
    at::parallel_for(0, B * H * T, /*grain_size=*/std::max<int64_t>(1, 16384 / std::max<int64_t>(1, 2 * P)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / (H * T), h = (r / T) % H, t = r % T;
        const auto* xr = xp + b * s0 + h * s1 + t * s2;
        auto* yr = yp + r * 2 * P;
        if (backward) kernels::rotary_backward(xr, cp + t * P, sp + t * P, yr, P);
        else kernels::rotary_forward(xr, cp + t * P, sp + t * P, yr, P);
      }
    });
  };
  if (x.scalar_type() == torch::kFloat) rows(x.data_ptr<float>(), y.data_ptr<float>());
  else rows(bf16_data(x), bf16_data(y));
  return y;
}

struct RotaryFunction : torch::autograd::Function<RotaryFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
    // Kept as values: tables made during an evaluation are inference tensors, which autograd refuses to save.
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    return rotary_rows(x, cos, sin, /*backward=*/false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto cos = ctx->saved_data["cos"].toTensor(), sin = ctx->saved_data["sin"].toTensor();
    return {rotary_rows(grads[0].contiguous(), cos, sin, /*backward=*/true), torch::Tensor(), torch::Tensor()};
  }
};

bool on_cpu_float(const torch::Tensor& t) { return !t.defined() || (t.device().is_cpu() && t.scalar_type() == torch::kFloat); }

}  // namespace

bool cpu_autocast_bf16() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  return at::autocast::is_autocast_enabled(at::kCPU) && at::autocast::get_autocast_dtype(at::kCPU) == at::kBFloat16;
#else
  return at::autocast::is_cpu_enabled() && at::autocast::get_autocast_cpu_dtype() == at::kBFloat16;
#endif
}

void set_fused_ops(bool enabled) { g_enabled = enabled; }
bool fused_ops_enabled() { return g_enabled; }

torch::Tensor fused_gelu(const torch::Tensor& x) {
  const bool applies = g_enabled && x.device().is_cpu() &&
                       (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16);
  if (!applies) return torch::gelu(x);
  if (torch::GradMode::is_enabled() && x.requires_grad()) return GeluFunction::apply(x.contiguous());
  return gelu_forward(x.contiguous());
}

torch::Tensor fused_layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                               double eps) {
  const bool applies = g_enabled && on_cpu_float(x) && on_cpu_float(weight) && on_cpu_float(bias) &&
                       weight.defined() && weight.dim() == 1 && x.dim() >= 1 && x.size(-1) == weight.size(0) &&
                       x.numel() > 0;
  if (!applies) return torch::layer_norm(x, {weight.size(0)}, weight, bias, eps);
  const bool bf16_out = cpu_autocast_bf16();
  const bool grad = torch::GradMode::is_enabled() &&
                    (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  // A custom function cannot take an undefined tensor: no bias is passed as an empty one.
  if (grad)
    return LayerNormFunction::apply(x.contiguous(), weight.contiguous(), bias.defined() ? bias : torch::empty({0}), eps,
                                    bf16_out);
  return std::get<0>(layer_norm_forward(x.contiguous(), weight.contiguous(), bias, eps, bf16_out));
}

std::pair<torch::Tensor, torch::Tensor> fused_add_layer_norm(const torch::Tensor& x, const torch::Tensor& a,
                                                             const torch::Tensor& weight, const torch::Tensor& bias,
                                                             double eps) {
  const bool bf16_out = cpu_autocast_bf16();
  // The fused form where the norm itself is fused and a has the type of y (the matmul output feeding it).
  const bool applies = g_enabled && on_cpu_float(x) && on_cpu_float(weight) && on_cpu_float(bias) && a.defined() &&
                       weight.defined() && weight.dim() == 1 && x.dim() >= 1 && x.size(-1) == weight.size(0) &&
                       x.numel() > 0 && a.device().is_cpu() && a.sizes() == x.sizes() &&
                       a.scalar_type() == (bf16_out ? torch::kBFloat16 : torch::kFloat);
  if (!applies) {
    auto h = x + a;
    return {h, fused_layer_norm(h, weight, bias, eps)};
  }
  const bool grad = torch::GradMode::is_enabled() && (x.requires_grad() || a.requires_grad() ||
                                                      weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  if (grad) {
    auto out = AddLayerNormFunction::apply(x.contiguous(), a.contiguous(), weight.contiguous(),
                                           bias.defined() ? bias : torch::empty({0}), eps, bf16_out);
    return {out[0], out[1]};
  }
  torch::Tensor h;
  auto y = std::get<0>(layer_norm_forward(x.contiguous(), weight.contiguous(), bias, eps, bf16_out, a.contiguous(), &h));
  return {h, y};
}

torch::Tensor fused_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets) {
  const int64_t V = logits.dim() >= 1 ? logits.size(-1) : 0;
  const bool applies = g_enabled && logits.device().is_cpu() &&
                       (logits.scalar_type() == torch::kFloat || logits.scalar_type() == torch::kBFloat16) &&
                       logits.dim() >= 2 && V > 0 && targets.device().is_cpu() && targets.scalar_type() == torch::kLong &&
                       targets.numel() * V == logits.numel();
  if (!applies)
    return torch::nn::functional::cross_entropy(
        logits.reshape({-1, V}).to(torch::kFloat), targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1).reduction(torch::kSum));
  const auto x = logits.reshape({-1, V}).contiguous();
  const auto t = targets.reshape({-1}).contiguous();
  // LibTorch's nll_loss refuses a target out of range; so does this, with the same bounds.
  const int64_t* tp = t.data_ptr<int64_t>();
  for (int64_t r = 0; r < t.numel(); ++r)
    TORCH_CHECK(tp[r] >= -1 && tp[r] < V, "cross_entropy: target ", tp[r], " is out of bounds for ", V,
                " classes (-1 is ignored)");
  if (torch::GradMode::is_enabled() && x.requires_grad()) return CrossEntropyFunction::apply(x, t);
  return torch::full({}, cross_entropy_rows(x, t).second, x.options().dtype(torch::kFloat));
}

bool fused_rotary_applies(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const bool table = on_cpu_float(cos) && on_cpu_float(sin) && cos.defined() && sin.defined() && cos.dim() == 2 &&
                     cos.sizes() == sin.sizes() && cos.is_contiguous() && sin.is_contiguous() && !cos.requires_grad() &&
                     !sin.requires_grad();
  return g_enabled && table && x.device().is_cpu() && (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16) &&
         x.dim() == 4 && x.stride(-1) == 1 && x.size(2) == cos.size(0) && x.size(3) == 2 * cos.size(1);
}

torch::Tensor fused_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (torch::GradMode::is_enabled() && x.requires_grad()) return RotaryFunction::apply(x, cos, sin);
  return rotary_rows(x, cos, sin, /*backward=*/false);
}

}  // namespace poslab
