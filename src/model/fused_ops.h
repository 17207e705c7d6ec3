// GELU and LayerNorm on the CPU as autograd functions over poslab's own loops (model/fused_kernels.h):
// one pass each way instead of LibTorch's several, and under bf16 autocast a LayerNorm that writes the
// bfloat16 its matmul reads, in place of a float output and a cast. Elsewhere (CUDA, doubles, turned
// off) they are LibTorch's own ops.
#pragma once
#include "util/torch_api.h"

namespace poslab {

// Process-wide switch, set by make_runtime from train.fused_ops (on by default there); off until a
// runtime sets it, so that a program using the model alone gets LibTorch's own ops.
void set_fused_ops(bool enabled);
bool fused_ops_enabled();

// Whether bf16 autocast is on for the CPU on this thread.
bool cpu_autocast_bf16();

// torch::gelu (exact, erf form).
torch::Tensor fused_gelu(const torch::Tensor& x);
// torch::layer_norm over the last dimension; bias may be undefined. Its output is bfloat16 when bf16
// autocast is on for the CPU (only matmuls read it, which would cast it to bfloat16 anyway).
torch::Tensor fused_layer_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                               double eps);

// The residual stream's add and the norm after it: h = x + a and torch::layer_norm(h), returned as
// (h, y), in one pass each way. a is the branch's output (bfloat16 under bf16 autocast). Where the fused
// form does not apply, the same values from x + a and fused_layer_norm.
std::pair<torch::Tensor, torch::Tensor> fused_add_layer_norm(const torch::Tensor& x, const torch::Tensor& a,
                                                             const torch::Tensor& weight, const torch::Tensor& bias,
                                                             double eps);

// The training loss: cross-entropy of logits (..., V) against targets (...), int64, -1 ignored, summed over
// the tokens, as a float scalar: torch's cross_entropy(logits as float, ignore_index -1, sum) to float
// rounding, in one pass each way over the logits in their own type. LibTorch's op where it does not apply.
torch::Tensor fused_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets);

// RoPE's rotation of interleaved pairs, (B, H, T, 2P) by (T, P) cos and sin tables: LibTorch's
// composition (positional/rotary.cpp's apply_rotary) in one pass each way, its results bit for bit.
// Whether it applies: the fused ops on, x a CPU float or bfloat16 (B, H, T, 2P) with contiguous pairs,
// the tables constant (T, P) floats.
bool fused_rotary_applies(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
torch::Tensor fused_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

// A bfloat16 tensor's data as the raw bits the fused loops take (kernels::bf16).
inline const uint16_t* bf16_data(const torch::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>()); }
inline uint16_t* bf16_data(torch::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); }

}  // namespace poslab
