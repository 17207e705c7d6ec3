// Attention on one (batch, head) block in bfloat16, forward and backward, with the CPU's bfloat16 dot
// product (AVX512_BF16's vdpbf16ps: pairs of bfloat16 products summed into float lanes): the five small
// products, the causal limit skipped by whole vectors, and the softmax's row loops (model/attention_kernels.h)
// on operands that stay in the core's caches. Free of LibTorch's headers; model/fused_attention.cpp runs it
// over the blocks where bf16_attention_blocks_available().
#pragma once

#include <cstdint>

namespace poslab::kernels {

using bf16 = uint16_t;  // bfloat16 bits: the top half of a float

// Whether this build has the kernels and this CPU runs them (AVX-512 F/BW/VL/DQ and AVX512_BF16).
bool bf16_attention_blocks_available();

// One block's operands: q (t_q rows of hs), k and v (t_k rows), each row's elements contiguous, rows
// *_stride elements apart (so heads can be read in place from the projection's rows). Query i sees keys
// j < min(t_k, offset + i + 1); offset = t_k - t_q puts the queries at the keys' end. mask, when not null,
// adds mask[i * mask_stride + j] to the scaled scores (attention_softmax_forward's convention).
struct AttentionBlock {
  const bf16* q;
  int64_t q_stride;
  const bf16* k;
  int64_t k_stride;
  const bf16* v;
  int64_t v_stride;
  int64_t t_q, t_k, hs, offset;
  const float* mask;
  int64_t mask_stride;
  float scale;
};

// s = q k^T (bfloat16, t_q x t_k, rows t_k apart: the keys each row sees, rounded up to 16), p =
// softmax(scale s + mask) with the rows' max and 1 / sum (attention_softmax_forward on s), and y = p v
// (bfloat16, t_q rows of hs, y_stride apart). Each product sums in float and is rounded once.
void attention_block_forward(const AttentionBlock& b, bf16* s, bf16* p, float* row_max, float* row_inv_sum, bf16* y,
                             int64_t y_stride);

// Its backward from dy (t_q rows of hs, dy_stride apart) and what the forward wrote: dp = dy v^T,
// ds = the softmax's backward (attention_softmax_backward: scale included, datt = its gradient before the
// scale when not null, float t_q x t_k), dq = ds k, dk = ds^T q, dv = p^T dy, each written in bfloat16
// to rows of hs *_stride apart.
void attention_block_backward(const AttentionBlock& b, const bf16* s, const bf16* p, const float* row_max,
                              const float* row_inv_sum, const bf16* dy, int64_t dy_stride, bf16* dq, int64_t dq_stride,
                              bf16* dk, int64_t dk_stride, bf16* dv, int64_t dv_stride, float* datt);

}  // namespace poslab::kernels
