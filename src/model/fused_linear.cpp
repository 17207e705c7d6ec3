// The fused Linear: x (M, K) rows times the weight (N, K) transposed, forward and backward, on
// two-dimensional products only, outside autocast's dispatch (its casts are done here, once).
#include "model/fused_linear.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include "model/bf16_weights.h"
#include "model/dnnl_matmul.h"
#include "model/fused_ops.h"

namespace poslab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The products below are already in the autocast type: autocast's dispatch would only re-check them.
struct NoAutocast {
  c10::impl::ExcludeDispatchKeyGuard guard{c10::DispatchKey::AutocastCPU};
};

torch::Tensor to_bf16(const torch::Tensor& t) { return t.scalar_type() == torch::kBFloat16 ? t : t.to(torch::kBFloat16); }

// The product on x's rows: x2 (M, K) and w (N, K), the operands in bfloat16 (the weight's kept copy,
// model/bf16_weights.h), and y, x (..., K) times w transposed plus the bias, shaped (..., N).
struct RowsProduct {
  torch::Tensor x2, w, y;
  RowsProduct(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias)
      : x2(to_bf16(x.reshape({-1, x.size(-1)}))), w(bf16_weight(weight)) {
    auto shape = x.sizes().vec();
    shape.back() = w.size(0);
    y = bf16_matmul(x2, w.t(), torch::kBFloat16, bias.defined() ? bf16_weight(bias) : torch::Tensor()).view(shape);
  }
};

struct LinearFunction : torch::autograd::Function<LinearFunction> {
  // bias is an empty tensor when the layer has none (a custom function cannot take an undefined one).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias) {
    NoAutocast no_autocast;
    const bool has_bias = bias.numel() > 0;
    RowsProduct p(x, weight, has_bias ? bias : torch::Tensor());
    ctx->save_for_backward({p.x2, p.w});
    ctx->saved_data["x_type"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["has_bias"] = has_bias;
    return p.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    NoAutocast no_autocast;
    const auto saved = ctx->get_saved_variables();
    const auto &x2 = saved[0], &w = saved[1];  // (M, K), (N, K)
    const auto N = w.size(0);
    const auto dy = to_bf16(grads[0].reshape({-1, N}));  // (M, N)
    torch::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      const auto x_type = static_cast<c10::ScalarType>(ctx->saved_data["x_type"].toInt());
      dx = bf16_matmul(dy, w, x_type);  // (M, K), in the input's type as autocast's cast back gives it
      auto shape = grads[0].sizes().vec();
      shape.back() = w.size(1);
      dx = dx.view(shape);
    }
    if (ctx->needs_input_grad(1)) dw = bf16_matmul(dy.t(), x2, torch::kFloat);  // (N, K), float sums unrounded
    if (ctx->needs_input_grad(2) && ctx->saved_data["has_bias"].toBool()) db = dy.sum(0, /*keepdim=*/false, torch::kFloat);
    return {dx, dw, db};
  }
};

bool cpu_float(const torch::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == torch::kFloat; }

bool applies(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  return fused_ops_enabled() && cpu_autocast_bf16() && x.device().is_cpu() &&
         (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16) && x.dim() >= 1 &&
         x.numel() > 0 && cpu_float(weight) && weight.dim() == 2 && x.size(-1) == weight.size(1) &&
         (!bias.defined() || (cpu_float(bias) && bias.dim() == 1 && bias.size(0) == weight.size(0)));
}

}  // namespace

torch::Tensor fused_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!applies(x, weight, bias)) return torch::nn::functional::linear(x, weight, bias);
  const bool grad = torch::GradMode::is_enabled() &&
                    (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  if (grad) return LinearFunction::apply(x, weight, bias.defined() ? bias : torch::empty({0}));
  NoAutocast no_autocast;
  return RowsProduct(x, weight, bias).y;
}

}  // namespace poslab
