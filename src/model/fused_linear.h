// A Linear layer's product under bf16 autocast on the CPU as one autograd node: the input as rows, one
// matrix product each way, the weight's bfloat16 copy kept between uses (model/bf16_weights.h). LibTorch's
// path (autocast's casts, matmul's reshapes and views, their backward nodes) runs ~50 small ops per layer
// where this runs ~8.
#pragma once
#include "util/torch_api.h"

namespace poslab {

// torch::nn::functional::linear(x, weight, bias): x (..., K), weight (N, K), bias (N,) or undefined.
// With the fused ops on and bf16 autocast on for the CPU, the product runs in bfloat16 as autocast's
// would and returns bfloat16 (..., N); the weight's gradient is float, as autocast's cast back gives it.
// Elsewhere it is LibTorch's own linear.
torch::Tensor fused_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});

}  // namespace poslab
