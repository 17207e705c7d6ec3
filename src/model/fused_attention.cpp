// The fused attention softmax's autograd function: the mask broadcast without a copy, (batch, head) blocks
// run in parallel (at::parallel_for: inline inside a batch shard's thread), and the backward, which
// recomputes the probabilities from the scores and each row's saved maximum and sum; in bfloat16 on
// oneDNN (model/dnnl_matmul.h), attention whole, both products and the softmax, as one node.
#include "model/fused_attention.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>

#include <array>
#include <vector>

#include "model/attention_kernels.h"
#include "model/dnnl_matmul.h"
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
  // Rows and heads may sit at any stride (a block's slice of a whole bias); the keys must be contiguous.
  auto m = mask.stride(-1) == 1 ? mask : mask.contiguous();
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

// The softmax's backward: ds (the scores' type, scale included) and, when mask_grad, the mask's gradient
// summed to its shape, from the scores s, the rows' saved (max, 1 / sum) and dp, the probabilities' gradient.
std::pair<torch::Tensor, torch::Tensor> softmax_backward(const torch::Tensor& s, const torch::Tensor& stats,
                                                         const torch::Tensor& mask, const torch::Tensor& dp_in,
                                                         double scale_in, bool mask_grad) {
  const float scale = static_cast<float>(scale_in);
  const auto dp = dp_in.to(s.scalar_type()).contiguous();
  const int64_t B = s.size(0), H = s.size(1), tq = s.size(2), tk = s.size(3), offset = tk - tq;
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
  return {ds, mask_grad ? at::sum_to(datt, mask.sizes()) : torch::Tensor()};
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
    const auto mask = ctx->saved_data["mask"].toTensor();
    auto [ds, dmask] = softmax_backward(saved[0], saved[1], mask, grads[0], ctx->saved_data["scale"].toDouble(),
                                        mask.numel() > 0 && ctx->needs_input_grad(1));
    return {ds, dmask, torch::Tensor()};
  }
};

// Calls body(i0, i1, n1, mask) for query blocks [i0, i1) of q (B, H, t_q, hs) against keys [0, n1) of k,
// the mask cut to the block's rows and keys (an empty tensor stays empty; a dimension of 1 is broadcast
// and stays whole). One block, the whole, where t_q is within kInferenceQueryBlock. The queries are the
// last t_q of the keys, so block [i0, i1)'s last query sees keys 0 .. t_k - t_q + i1 - 1: the scores'
// upper triangle, half of them at long lengths, is never computed.
template <class Body>
void causal_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& mask, Body body) {
  const int64_t tq = q.size(2), tk = k.size(2), offset = tk - tq;
  const int64_t block = std::min(tq, kInferenceQueryBlock);
  for (int64_t i0 = 0; i0 < tq; i0 += block) {
    const int64_t i1 = std::min(tq, i0 + block), n1 = offset + i1;  // query i1 - 1 sees keys 0 .. offset + i1 - 1
    torch::Tensor m = mask;
    if (m.numel() > 0 && block < tq) {
      if (m.dim() >= 2 && m.size(-2) > 1) m = m.slice(-2, i0, i1);
      if (m.size(-1) > 1) m = m.slice(-1, 0, n1);
    }
    body(i0, i1, n1, m);
  }
}

// Attention in bfloat16 with both products on oneDNN directly (model/dnnl_matmul.h): one autograd node for
// q k^T, the softmax and p v, where LibTorch's matmuls run ~20 small ops each way. The output is written
// in the rows the output projection reads, (B, t_q, H, hs), so the copy into rows that follows is none.
struct Bf16Attention {
  torch::Tensor q, k, v, s, stats, p, rows;  // rows: y as (B, t_q, H hs)

  // keep: whether s, stats and p are kept for a backward. Without, queries past kInferenceQueryBlock run
  // in causal blocks (causal_blocks above) and s, stats and p are left undefined.
  Bf16Attention(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
                const torch::Tensor& mask, double scale, bool keep = true)
      : q(q_in.contiguous()), k(k_in.contiguous()), v(v_in.contiguous()) {  // (B, H, t, hs): dense, as the kernels read best
    const int64_t B = q.size(0), H = q.size(1), tq = q.size(2), hs = v.size(3);
    rows = torch::empty({B, tq, H * hs}, q.options());
    if (!keep) {
      causal_blocks(q, k, mask, [&](int64_t i0, int64_t i1, int64_t n1, const torch::Tensor& block_mask) {
        const auto sb = bf16_matmul(q.slice(2, i0, i1), k.slice(2, 0, n1).transpose(-2, -1), torch::kBFloat16);
        const auto pb = softmax_forward(sb, block_mask, scale).first;  // (B, H, i1 - i0, n1)
        bf16_matmul(pb, v.slice(2, 0, n1), torch::kBFloat16, {}, heads(rows.slice(1, i0, i1), H));
      });
      return;
    }
    s = bf16_matmul(q, k.transpose(-2, -1), torch::kBFloat16);  // (B, H, t_q, t_k)
    std::tie(p, stats) = softmax_forward(s, mask, scale);
    bf16_matmul(p, v, torch::kBFloat16, {}, heads(rows, H));
  }
  // y as (B, H, t_q, hs): a view of rows.
  torch::Tensor y() const { return heads(rows, q.size(1)); }

  // (B, t, H hs) rows (or any slice of a row's columns) seen as (B, H, t, hs) heads, without a copy.
  static torch::Tensor heads(const torch::Tensor& rows, int64_t H) {
    return rows.view({rows.size(0), rows.size(1), H, rows.size(2) / H}).permute({0, 2, 1, 3});
  }

  // The gradients of q, k, v (written into dq, dk, dv, (B, H, t, hs) views) and of the mask (when mask_grad)
  // from dy (B, H, t_q, hs), with what the forward saved.
  static torch::Tensor backward(const variable_list& saved, const torch::Tensor& mask, const torch::Tensor& dy_in,
                                double scale, bool mask_grad, const torch::Tensor& dq, const torch::Tensor& dk,
                                const torch::Tensor& dv) {
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &s = saved[3], &stats = saved[4], &p = saved[5];
    const auto dy = dy_in.to(torch::kBFloat16).contiguous();                  // (B, H, t_q, hs)
    const auto dp = bf16_matmul(dy, v.transpose(-2, -1), torch::kBFloat16);  // (B, H, t_q, t_k)
    auto [ds, dmask] = softmax_backward(s, stats, mask, dp, scale, mask_grad);
    bf16_matmul(ds, k, torch::kBFloat16, {}, dq);                  // (B, H, t_q, hs)
    bf16_matmul(ds.transpose(-2, -1), q, torch::kBFloat16, {}, dk);  // (B, H, t_k, hs)
    bf16_matmul(p.transpose(-2, -1), dy, torch::kBFloat16, {}, dv);  // (B, H, t_k, hs)
    return dmask;
  }
};

struct AttentionFunction : torch::autograd::Function<AttentionFunction> {
  // mask: an empty tensor for none.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& mask, double scale) {
    Bf16Attention a(q, k, v, mask, scale);
    ctx->save_for_backward({a.q, a.k, a.v, a.s, a.stats, a.p});
    ctx->saved_data["mask"] = mask;  // a value, as in AttentionSoftmaxFunction
    ctx->saved_data["scale"] = scale;
    return a.y();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto mask = ctx->saved_data["mask"].toTensor();
    auto dq = torch::empty_like(saved[0]), dk = torch::empty_like(saved[1]), dv = torch::empty_like(saved[2]);
    auto dmask = Bf16Attention::backward(saved, mask, grads[0], ctx->saved_data["scale"].toDouble(),
                                         mask.numel() > 0 && ctx->needs_input_grad(3), dq, dk, dv);
    return {dq, dk, dv, dmask, torch::Tensor()};
  }
};

// q, k and v as (B, H, T, hs) views of the fused projection's (B, T, 3C) output.
std::array<torch::Tensor, 3> qkv_heads(const torch::Tensor& qkv, int64_t n_head) {
  const int64_t C = qkv.size(2) / 3;
  return {Bf16Attention::heads(qkv.narrow(2, 0, C), n_head), Bf16Attention::heads(qkv.narrow(2, C, C), n_head),
          Bf16Attention::heads(qkv.narrow(2, 2 * C, C), n_head)};
}

// Attention from the projection's output to the rows c_proj reads, (B, T, 3C) -> (B, T, C), as one node:
// its backward writes the gradients of q, k and v into one (B, T, 3C) tensor, where split, view and
// transpose would each take a node and the gradient a copy per view and a concatenation.
struct QkvAttentionFunction : torch::autograd::Function<QkvAttentionFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& qkv, const torch::Tensor& mask,
                               int64_t n_head, double scale) {
    const auto [q, k, v] = qkv_heads(qkv, n_head);
    Bf16Attention a(q, k, v, mask, scale);
    ctx->save_for_backward({a.q, a.k, a.v, a.s, a.stats, a.p});
    ctx->saved_data["mask"] = mask;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["n_head"] = n_head;
    return a.rows;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto mask = ctx->saved_data["mask"].toTensor();
    const int64_t H = ctx->saved_data["n_head"].toInt();
    const auto& q = saved[0];
    const int64_t B = q.size(0), T = q.size(2), C = q.size(1) * q.size(3);
    // dq, dk and dv each in rows (B, T, C) of their own, then side by side: into the views of one (B, T, 3C) tensor
    // the products would not be dense and would go through a copy each (model/dnnl_matmul.h); one cat is ~2% faster.
    auto grad_rows = torch::empty({3, B, T, C}, q.options());
    auto dmask = Bf16Attention::backward(saved, mask, Bf16Attention::heads(grads[0].contiguous(), H),
                                         ctx->saved_data["scale"].toDouble(), mask.numel() > 0 && ctx->needs_input_grad(1),
                                         Bf16Attention::heads(grad_rows[0], H), Bf16Attention::heads(grad_rows[1], H),
                                         Bf16Attention::heads(grad_rows[2], H));
    return {torch::cat({grad_rows[0], grad_rows[1], grad_rows[2]}, /*dim=*/2), dmask, torch::Tensor(), torch::Tensor()};  // (B, T, 3C)
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
  const torch::Tensor m = mask.defined() ? mask : torch::empty({0});
  const bool grad = torch::GradMode::is_enabled() &&
                    (q.requires_grad() || k.requires_grad() || v.requires_grad() || m.requires_grad());
  if (dnnl_matmul_active() && q.scalar_type() == torch::kBFloat16 && k.scalar_type() == torch::kBFloat16 &&
      v.scalar_type() == torch::kBFloat16)
    return grad ? AttentionFunction::apply(q, k, v, m, scale) : Bf16Attention(q, k, v, m, scale, /*keep=*/false).y();
  auto scores = [](const torch::Tensor& q, const torch::Tensor& k) {  // (B, H, t_q, t_k): bfloat16 under autocast
    auto s = torch::matmul(q, k.transpose(-2, -1)).contiguous();
    return s.scalar_type() != torch::kFloat && s.scalar_type() != torch::kBFloat16 ? s.to(torch::kFloat) : s;
  };
  if (grad) {
    const auto s = scores(q, k);
    return torch::matmul(AttentionSoftmaxFunction::apply(s, m, scale), v);  // (B, H, t_q, hs)
  }
  std::vector<torch::Tensor> blocks;
  causal_blocks(q, k, m, [&](int64_t i0, int64_t i1, int64_t n1, const torch::Tensor& block_mask) {
    const auto p = softmax_forward(scores(q.slice(2, i0, i1), k.slice(2, 0, n1)), block_mask, scale).first;
    blocks.push_back(torch::matmul(p, v.slice(2, 0, n1)));  // (B, H, i1 - i0, hs)
  });
  return blocks.size() == 1 ? blocks[0] : torch::cat(blocks, 2);
}

bool fused_attention_qkv_applies(const torch::Tensor& qkv, int64_t n_head, const torch::Tensor& mask) {
  return fused_ops_enabled() && dnnl_matmul_active() && qkv.dim() == 3 && qkv.device().is_cpu() &&
         qkv.scalar_type() == torch::kBFloat16 && qkv.size(2) % (3 * n_head) == 0 && qkv.size(1) > 0 &&
         (!mask.defined() || (mask.device().is_cpu() && mask.scalar_type() == torch::kFloat));
}

torch::Tensor fused_attention_qkv(const torch::Tensor& qkv, int64_t n_head, const torch::Tensor& mask, double scale) {
  const torch::Tensor m = mask.defined() ? mask : torch::empty({0});
  const bool grad = torch::GradMode::is_enabled() && (qkv.requires_grad() || m.requires_grad());
  if (grad) return QkvAttentionFunction::apply(qkv, m, n_head, scale);
  const auto [q, k, v] = qkv_heads(qkv, n_head);
  return Bf16Attention(q, k, v, m, scale, /*keep=*/false).rows;
}

}  // namespace poslab
