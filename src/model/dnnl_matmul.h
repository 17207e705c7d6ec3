// Two-dimensional bfloat16 matrix products on oneDNN's matmul primitive, created once per shape and
// kept per thread, where LibTorch itself runs on the system's oneDNN (Debian's LibTorch 1.13). Through
// LibTorch each product costs ~10 us of set-up (ideep's descriptors, its checks and views) beside a
// kernel of 25-100 us at a training step's shapes; here it costs ~1 us. Elsewhere LibTorch's mm.
#pragma once
#include <torch/torch.h>

namespace poslab {

// Whether the products below go to oneDNN directly (built with it and the CPU has AVX-512's BW/VL/DQ,
// which oneDNN's bfloat16 kernels need; LibTorch makes the same check before it calls oneDNN).
bool dnnl_matmul_active();

// (M, N) = a (M, K) times b (K, N), plus bias (N,) when defined, written in out_type (bfloat16 or float;
// float keeps the products' float sums unrounded). a and b are bfloat16 CPU matrices of any strides
// (transposed views included); bias is bfloat16 or float.
torch::Tensor bf16_mm(const torch::Tensor& a, const torch::Tensor& b, c10::ScalarType out_type,
                      const torch::Tensor& bias = {});

}  // namespace poslab
