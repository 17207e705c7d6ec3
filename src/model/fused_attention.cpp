// The fused attention softmax's autograd function: the mask broadcast without a copy, (batch, head) blocks
// run in parallel (at::parallel_for: inline inside a batch shard's thread), and the backward, which
// recomputes the probabilities from the scores and each row's saved maximum and sum.
#include "model/fused_attention.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>

#include <vector>

#include "model/attention_kernels.h"
#include "model/fused_ops.h"

namespace poslab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using kernels::bf16;


// The mask seen as (B, H, t_q, t_k) without a copy: block (b, h) starts at b * sb + h * sh, its rows sq
// apart (0 where one row serves every query), its keys contiguous.
struct MaskView {
  torch::Tensor expanded;  // keeps the data alive
  const float* data = nullptr;
  int64_t sb = 0, sh = 0, sq = 0;
  // Block bh = b H + h's first row, or null without a mask.
  const float* block(int64_t bh, int64_t H) const { return data != nullptr ? data + (bh / H) * sb + (bh % H) * sh : nullptr; }
};

MaskView mask_view(const torch::Tensor& mask, at::IntArrayRef sizes) {
  MaskView v;
  if (mask.numel() == 0) return v;  // no mask: the causal limit alone
  auto m = mask.contiguous();
  if (m.size(-1) != sizes.back()) m = m.expand(sizes).contiguous();  // broadcast over keys: made whole
  v.expanded = m.expand(sizes);
  v.data = v.expanded.data_ptr<float>();
  v.sb = v.expanded.stride(0), v.sh = v.expanded.stride(1), v.sq = v.expanded.stride(2);
  return v;
}

// (batch, head) blocks per parallel chunk: at least 16k scores, below which a thread's start costs more.
template <class F>
void for_blocks(int64_t blocks, int64_t block_size, F body) {
  at::parallel_for(0, blocks, /*grain_size=*/std::max<int64_t>(1, 16384 / std::max<int64_t>(1, block_size)), body);
}

// p (the scores' type) and the rows' (max, 1 / sum), (2, B H t_q) float.
std::pair<torch::Tensor, torch::Tensor> softmax_forward(const torch::Tensor& s, const torch::Tensor& mask, double scale) {
  const int64_t B = s.size(0), H = s.size(1), tq = s.size(2), tk = s.size(3), offset = tk - tq;
  auto p = torch::empty_like(s);
  auto stats = torch::empty({2, B * H * tq}, s.options().dtype(torch::kFloat));
  const MaskView mv = mask_view(mask, s.sizes());
  float *mx = stats[0].data_ptr<float>(), *inv = stats[1].data_ptr<float>();
  const bool is_float = s.scalar_type() == torch::kFloat;
  for_blocks(B * H, tq * tk, [&](int64_t b0, int64_t b1) {
    std::vector<float> buf(tk);
    for (int64_t bh = b0; bh < b1; ++bh) {
      const float* mp = mv.block(bh, H);
      const int64_t at = bh * tq * tk;
      if (is_float)
        kernels::attention_softmax_forward(s.data_ptr<float>() + at, mp, mv.sq, tq, tk, offset, static_cast<float>(scale),
                                           p.data_ptr<float>() + at, mx + bh * tq, inv + bh * tq, buf.data());
      else
        kernels::attention_softmax_forward(bf16_data(s) + at, mp, mv.sq, tq, tk, offset, static_cast<float>(scale),
                                           bf16_data(p) + at, mx + bh * tq, inv + bh * tq, buf.data());
    }
  });
  return {p, stats};
}

struct AttentionSoftmaxFunction : torch::autograd::Function<AttentionSoftmaxFunction> {
  // mask: an empty tensor for none (a custom function cannot take an undefined one).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& s, const torch::Tensor& mask, double scale) {
    auto [p, stats] = softmax_forward(s, mask, scale);
    ctx->save_for_backward({s, stats});
    // The mask is read again, never differentiated through: kept as a value, since a cached bias made
    // during an evaluation is an inference tensor, which autograd refuses to save.
    ctx->saved_data["mask"] = mask;
    ctx->saved_data["scale"] = scale;
    return p;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &s = saved[0], &stats = saved[1];
    const auto mask = ctx->saved_data["mask"].toTensor();
    const float scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const auto dp = grads[0].to(s.scalar_type()).contiguous();
    const int64_t B = s.size(0), H = s.size(1), tq = s.size(2), tk = s.size(3), offset = tk - tq;
    const bool mask_grad = mask.numel() > 0 && ctx->needs_input_grad(1);
    auto ds = torch::empty_like(s);
    torch::Tensor datt = mask_grad ? torch::empty(s.sizes(), s.options().dtype(torch::kFloat)) : torch::Tensor();
    const MaskView mv = mask_view(mask, s.sizes());
    const float *mx = stats[0].data_ptr<float>(), *inv = stats[1].data_ptr<float>();
    const bool is_float = s.scalar_type() == torch::kFloat;
    for_blocks(B * H, tq * tk, [&](int64_t b0, int64_t b1) {
      std::vector<float> buf(tk);
      for (int64_t bh = b0; bh < b1; ++bh) {
        const float* mp = mv.block(bh, H);
        const int64_t at = bh * tq * tk;
        float* dap = mask_grad ? datt.data_ptr<float>() + at : nullptr;
        if (is_float)
          kernels::attention_softmax_backward(s.data_ptr<float>() + at, mp, mv.sq, mx + bh * tq, inv + bh * tq,
                                              dp.data_ptr<float>() + at, tq, tk, offset, scale, ds.data_ptr<float>() + at,
                                              dap, buf.data());
        else
          kernels::attention_softmax_backward(bf16_data(s) + at, mp, mv.sq, mx + bh * tq, inv + bh * tq, bf16_data(dp) + at,
                                              tq, tk, offset, scale, bf16_data(ds) + at, dap, buf.data());
      }
    });
    torch::Tensor dmask = mask_grad ? at::sum_to(datt, mask.sizes()) : torch::Tensor();
    return {ds, dmask, torch::Tensor()};
  }
};

bool float_or_bf16_on_cpu(const torch::Tensor& t) {
  return t.device().is_cpu() && (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16);
}

}  // namespace

bool fused_attention_applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& mask) {
  return fused_ops_enabled() && q.dim() == 4 && float_or_bf16_on_cpu(q) && float_or_bf16_on_cpu(k) &&
         float_or_bf16_on_cpu(v) && (!mask.defined() || (mask.device().is_cpu() && mask.scalar_type() == torch::kFloat));
}

torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& mask, double scale) {
  auto s = torch::matmul(q, k.transpose(-2, -1)).contiguous();  // (B, H, t_q, t_k): bfloat16 under autocast
  if (s.scalar_type() != torch::kFloat && s.scalar_type() != torch::kBFloat16) s = s.to(torch::kFloat);
  const torch::Tensor m = mask.defined() ? mask : torch::empty({0});
  const bool grad = torch::GradMode::is_enabled() && (s.requires_grad() || m.requires_grad());
  const auto p = grad ? AttentionSoftmaxFunction::apply(s, m, scale) : softmax_forward(s, m, scale).first;
  return torch::matmul(p, v);  // (B, H, t_q, hs)
}

}  // namespace poslab
