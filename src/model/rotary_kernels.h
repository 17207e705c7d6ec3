// Element loops of the fused CPU rotary embedding (RoPE's apply_rotary, src/model/positional/rotary.cpp
// wraps them as an autograd function): each pair (x0, x1) of a row turned by its angle in one pass, and
// the backward. Free of LibTorch's headers; built with -ffp-contract=off so that every product and sum is
// rounded as LibTorch's composition rounds it: the results are LibTorch's bit for bit.
#pragma once

#include <cstdint>

namespace poslab::kernels {

using bf16 = uint16_t;  // bfloat16 bits: the top half of a float

// One row of `pairs` interleaved pairs: y0 = x0 cos - x1 sin, y1 = x0 sin + x1 cos, in float, y rounded
// once to its type.
void rotary_forward(const float* x, const float* cos, const float* sin, float* y, int64_t pairs);
void rotary_forward(const bf16* x, const float* cos, const float* sin, bf16* y, int64_t pairs);
// Its backward: dx0 = dy0 cos + dy1 sin, dx1 = dy1 cos - dy0 sin. In bfloat16 each product is rounded to
// bfloat16 before the sum, and the sum again, as LibTorch's autograd does for a bfloat16 input.
void rotary_backward(const float* dy, const float* cos, const float* sin, float* dx, int64_t pairs);
void rotary_backward(const bf16* dy, const float* cos, const float* sin, bf16* dx, int64_t pairs);

}  // namespace poslab::kernels
