// The fused optimizer's two loops over raw float arrays (src/train/fused_adamw.cpp runs them over
// chunks of every parameter in parallel). Kept apart from LibTorch's headers: this file is built with
// -fno-math-errno, which the precompiled LibTorch header cannot be used with.
#pragma once

#include <cstdint>

namespace poslab {

struct AdamWScalars {
  float clip, decay, b1, one_minus_b1, b2, one_minus_b2, bc2_sqrt, neg_step_size, eps;
};

// m = b1 m + (1-b1) g', v = b2 v + (1-b2) g'^2, p = decay p - step m / (sqrt(v)/bc2_sqrt + eps),
// with g' = clip g: torch::optim::AdamW::step's arithmetic, element by element. With p_bf16, the new p is
// also written there in bfloat16 (rounded to nearest even, as LibTorch's cast rounds).
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, AdamWScalars s,
                  uint16_t* p_bf16 = nullptr);
// g = parts[0] + parts[1] + ... (in that order; none: g as it is), then the sum of g's squares in
// double, in one pass: the batch shards' gradients summed into the one the optimizer steps on.
double sum_parts_and_squares(const float* const* parts, int n_parts, float* g, int64_t n);

}  // namespace poslab
