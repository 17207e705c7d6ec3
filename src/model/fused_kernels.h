// Element loops of the fused CPU ops (src/model/fused_ops.cpp wraps them as autograd functions): GELU,
// LayerNorm (with the residual add before it) and the training loss's cross-entropy, forward and backward,
// over raw float or bfloat16 arrays. Free of LibTorch's headers, like the optimizer's loops: built with
// -fno-math-errno and for several instruction sets.
#pragma once

#include <cstdint>

namespace poslab::kernels {

using bf16 = uint16_t;  // bfloat16 bits: the top half of a float

// y = x Phi(x) = x/2 (1 + erf(x / sqrt 2)), exact GELU: in float with LibTorch's own erf formula, in
// bfloat16 with a faster rational erf whose difference lies far below bfloat16's rounding.
void gelu_forward(const float* x, float* y, int64_t n);
void gelu_forward(const bf16* x, bf16* y, int64_t n);
// The forward for training: y as above and the derivative d = Phi(x) + x phi(x) in float, kept for the
// backward, dx = dy d: one product per element there, where recomputing erf and e^x took most of its time.
void gelu_forward_with_derivative(const float* x, float* y, float* d, int64_t n);
void gelu_forward_with_derivative(const bf16* x, bf16* y, float* d, int64_t n);
void gelu_backward_with_derivative(const float* dy, const float* d, float* dx, int64_t n);
void gelu_backward_with_derivative(const bf16* dy, const float* d, bf16* dx, int64_t n);

// Rows of C floats: y = (x - mean) * rstd * w + b (b may be null), rstd = 1/sqrt(var + eps), var biased;
// mean and rstd written per row for the backward. y as float, or as bfloat16 (rounded to nearest even)
// for the matmul that reads it under bf16 autocast.
void layer_norm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                        int64_t rows, int64_t C, float eps);
void layer_norm_forward(const float* x, const float* w, const float* b, bf16* y, float* mean, float* rstd,
                        int64_t rows, int64_t C, float eps);
// dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w, xhat = (x - mean) rstd; dw += sum over rows
// of dy xhat and db += sum of dy (db may be null), accumulated in float into the caller's arrays.
void layer_norm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd,
                         float* dx, float* dw, float* db, int64_t rows, int64_t C);
void layer_norm_backward(const bf16* dy, const float* x, const float* w, const float* mean, const float* rstd,
                         float* dx, float* dw, float* db, int64_t rows, int64_t C);

// The residual stream's add and the norm after it in one pass: h = x + a (a's values widened to float),
// then y, mean and rstd of h as above. a is the branch output: bfloat16 with a bfloat16 y (under bf16
// autocast), float with a float y.
void add_layer_norm_forward(const float* x, const float* a, float* h, const float* w, const float* b, float* y,
                            float* mean, float* rstd, int64_t rows, int64_t C, float eps);
void add_layer_norm_forward(const float* x, const bf16* a, float* h, const float* w, const float* b, bf16* y,
                            float* mean, float* rstd, int64_t rows, int64_t C, float eps);
// Its backward: dx = dres + the norm's dx of h (dres, h's gradient from later in the stream, may be null),
// da = dx in a's type; dw and db accumulated as above.
void add_layer_norm_backward(const float* dy, const float* h, const float* w, const float* mean, const float* rstd,
                             const float* dres, float* dx, float* da, float* dw, float* db, int64_t rows, int64_t C);
void add_layer_norm_backward(const bf16* dy, const float* h, const float* w, const float* mean, const float* rstd,
                             const float* dres, float* dx, bf16* da, float* dw, float* db, int64_t rows, int64_t C);

// Cross-entropy of rows of V logits against their targets (a negative target: the row is ignored):
// lse = log sum_j e^x_j per row and loss = lse - x[target] (0 for an ignored row), in float.
void cross_entropy_forward(const float* x, const int64_t* target, int64_t rows, int64_t V, float* lse, float* loss);
void cross_entropy_forward(const bf16* x, const int64_t* target, int64_t rows, int64_t V, float* lse, float* loss);
// Its gradient times g: dx = g (e^(x - lse) - [j == target]), a zero row where the target is ignored.
void cross_entropy_backward(const float* x, const int64_t* target, const float* lse, float g, int64_t rows, int64_t V,
                            float* dx);
void cross_entropy_backward(const bf16* x, const int64_t* target, const float* lse, float g, int64_t rows, int64_t V,
                            bf16* dx);

}  // namespace poslab::kernels
