// Batched bfloat16 matrix products on oneDNN's matmul primitive, created once per shape and kept per
// thread, where LibTorch itself runs on the system's oneDNN (Debian's LibTorch 1.13). Through LibTorch
// each product costs ~10 us of set-up (ideep's descriptors, its checks and views) beside a kernel of
// 25-100 us at a training step's shapes; here ~1 us. Elsewhere LibTorch's matmul.
#pragma once
#include "util/torch_api.h"

namespace poslab {

// Whether the products below go to oneDNN directly (built with it, and the CPU has AVX-512's BW/VL/DQ,
// which oneDNN's bfloat16 kernels need; LibTorch makes the same check before it calls oneDNN).
bool dnnl_matmul_active();

// (..., M, N) = a (..., M, K) times b (..., K, N), plus bias (N,) when defined, in out_type (bfloat16 or
// float). On oneDNN float keeps the products' float sums unrounded; through LibTorch it is the bfloat16
// result widened, as autocast's cast back gives it. a and b: bfloat16 CPU tensors of 2 to 4
// dimensions, the same batch dimensions, any strides (transposed views included). Written into out when
// it is given (the result's sizes and type, its last dimension contiguous; any other strides, such as a
// transposed view of a larger buffer; one that is not dense gets the product through a dense copy, since
// oneDNN's fast kernels write only dense outputs), else into a new contiguous tensor; returns it.
torch::Tensor bf16_matmul(const torch::Tensor& a, const torch::Tensor& b, c10::ScalarType out_type,
                          const torch::Tensor& bias = {}, torch::Tensor out = {});

}  // namespace poslab
