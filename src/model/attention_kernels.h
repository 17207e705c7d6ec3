// Element loops of the fused CPU attention softmax (src/model/fused_attention.cpp wraps them as an
// autograd function): scale, mask or bias, the causal limit, softmax and the cast to the matmul's type
// in one pass over each row, and the backward in one more. Free of LibTorch's headers, like
// model/fused_kernels.h: built with -fno-math-errno and for several instruction sets.
#pragma once

#include <cstdint>

namespace poslab::kernels {

using bf16 = uint16_t;  // bfloat16 bits: the top half of a float

// One (batch, head) block: t_q rows of n scores s, row-major. Row i sees keys j < min(n, offset + i + 1)
// (causal, the queries being the last t_q of the keys when offset = n - t_q). mask, when not null, adds
// mask[i * mask_stride + j] (0 or -inf, or a bias; stride 0 shares one row). p = softmax over the keys
// seen of scale * s + mask, 0 past them, as float or bfloat16 (rounded once); row_max and row_inv_sum
// keep each row's maximum and 1 / sum for the backward. buf: n floats of scratch.
void attention_softmax_forward(const float* s, const float* mask, int64_t mask_stride, int64_t t_q, int64_t n,
                               int64_t offset, float scale, float* p, float* row_max, float* row_inv_sum, float* buf);
void attention_softmax_forward(const bf16* s, const float* mask, int64_t mask_stride, int64_t t_q, int64_t n,
                               int64_t offset, float scale, bf16* p, float* row_max, float* row_inv_sum, float* buf);

// Its backward on the same block: p recomputed in float from s, mask and the saved max and 1 / sum (the
// forward's values before any rounding), g = p (dp - sum_j p_j dp_j); ds = scale g, and datt = g (float,
// t_q x n) where not null, for a mask that takes a gradient. 0 past the keys seen.
void attention_softmax_backward(const float* s, const float* mask, int64_t mask_stride, const float* row_max,
                                const float* row_inv_sum, const float* dp, int64_t t_q, int64_t n, int64_t offset,
                                float scale, float* ds, float* datt, float* buf);
void attention_softmax_backward(const bf16* s, const float* mask, int64_t mask_stride, const float* row_max,
                                const float* row_inv_sum, const bf16* dp, int64_t t_q, int64_t n, int64_t offset,
                                float scale, bf16* ds, float* datt, float* buf);

// The rows' vector width: 16 floats where the CPU runs the AVX-512 clone, else 8 (attention_kernels.cpp
// says why). set_softmax_lanes(8 or 16) runs the other width on any CPU (slower, the same formula), so that
// tests check both wherever they run; 0 gives the choice back to the CPU. Not for use while kernels run.
void set_softmax_lanes(int lanes);
int softmax_lanes();

}  // namespace poslab::kernels
