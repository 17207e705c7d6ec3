// The fused optimizer's element loops. Built with -fno-math-errno (CMakeLists.txt): the loops vectorise
// only when sqrt need not set errno (it never sees a negative), and without LibTorch's headers, so that
// this one flag costs a second-long compile instead of a unit without the precompiled header.
#include "train/adamw_kernels.h"

#include <cmath>

#include "model/kernel_math.h"

namespace poslab {

// Built for AVX-512, AVX2 and baseline x86-64, picked at load time (POSLAB_TARGET_CLONES, kernel_math.h):
// the project builds without -march (one binary for every machine), and scalar sqrt and division here
// ran slower than LibTorch's ten vectorised passes.

// The update's arithmetic for element j; returns the new parameter.
POSLAB_INLINE float update_one(float* __restrict p, const float* __restrict g, float* __restrict m,
                               float* __restrict v, int64_t j, const AdamWScalars& s) {
  const float gj = g[j] * s.clip;  // clip is 1 unless clipping: x * 1 == x exactly
  const float pj = p[j] * s.decay;
  const float mj = m[j] * s.b1 + s.one_minus_b1 * gj;
  const float vj = v[j] * s.b2 + s.one_minus_b2 * gj * gj;
  m[j] = mj;
  v[j] = vj;
  return p[j] = pj + s.neg_step_size * (mj / (std::sqrt(vj) / s.bc2_sqrt + s.eps));
}

POSLAB_TARGET_CLONES
void adamw_update(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v, int64_t n,
                  AdamWScalars s, uint16_t* __restrict p_bf16) {
  // Two loops, not a test per element: each vectorises on its own.
  if (p_bf16 == nullptr) {
    for (int64_t j = 0; j < n; ++j) update_one(p, g, m, v, j, s);
  } else {
    for (int64_t j = 0; j < n; ++j) kernels::store(p_bf16 + j, update_one(p, g, m, v, j, s));
  }
}

POSLAB_TARGET_CLONES
double sum_parts_and_squares(const float* const* parts, int n_parts, float* __restrict g, int64_t n) {
  // Blocks of 1024 elements, each squared while its sum is in L1. Eight independent partial sums of
  // the squares: one chain of dependent adds would bound the loop by add latency.
  constexpr int64_t kBlock = 1024;
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = b + kBlock < n ? b + kBlock : n;
    if (n_parts > 0) {
      const float* __restrict first = parts[0];
      for (int64_t i = b; i < e; ++i) g[i] = first[i];
      for (int k = 1; k < n_parts; ++k) {
        const float* __restrict part = parts[k];
        for (int64_t i = b; i < e; ++i) g[i] += part[i];
      }
    }
    for (; j + 8 <= e; j += 8)
      for (int l = 0; l < 8; ++l) lanes[l] += static_cast<double>(g[j + l]) * g[j + l];
  }
  for (; j < n; ++j) lanes[0] += static_cast<double>(g[j]) * g[j];
  double acc = 0;
  for (double lane : lanes) acc += lane;
  return acc;
}

}  // namespace poslab
