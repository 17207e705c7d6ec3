// 16 float lanes in GCC's vector types, for the fused loops that work on short rows (the attention
// softmax's, model/attention_kernels.cpp and model/attention_block_kernels.cpp): loads and stores of float
// and bfloat16, e^x, and the lanes folded to one value. One AVX-512 register, two AVX2 or four SSE ones,
// whatever the instruction set of the function they are inlined into.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#include "model/kernel_math.h"

// Always inlined into the loops that use them: no vector crosses a call, whatever -Wpsabi fears.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace poslab::kernels {

typedef float vfloat __attribute__((vector_size(64)));
typedef int32_t vint __attribute__((vector_size(64)));
typedef uint32_t vuint __attribute__((vector_size(64)));
typedef uint16_t vhalf __attribute__((vector_size(32)));
constexpr int64_t kLanes = 16;

POSLAB_INLINE vfloat splat(float x) { return vfloat{} + x; }
POSLAB_INLINE vfloat load(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
POSLAB_INLINE vfloat load(const bf16* p) {
  vhalf h;
  std::memcpy(&h, p, sizeof h);
  const vuint u = __builtin_convertvector(h, vuint) << 16;
  vfloat v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}
POSLAB_INLINE void store(float* p, vfloat v) { std::memcpy(p, &v, sizeof v); }
// Round to nearest even, NaN kept a quiet NaN: store(bf16*, float) on 16 lanes.
POSLAB_INLINE void store(bf16* p, vfloat v) {
  vuint u;
  std::memcpy(&u, &v, sizeof u);
  const vuint rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const vhalf h = __builtin_convertvector(v != v ? vuint{} + 0x7FC0u : rounded, vhalf);
  std::memcpy(p, &h, sizeof h);
}
// exp_nonpositive (kernel_math.h) on 16 lanes: the same polynomial, the same rounding trick.
POSLAB_INLINE vfloat exp_nonpositive(vfloat x) {
  x = x < -87.0f ? splat(-87.0f) : x;
  const vfloat n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const vfloat r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  vfloat q = splat(1.9875691500e-4f);
  q = q * r + 1.3981999507e-3f;
  q = q * r + 8.3334519073e-3f;
  q = q * r + 4.1665795894e-2f;
  q = q * r + 1.6666665459e-1f;
  q = q * r + 5.0000001201e-1f;
  q = q * r * r + r + 1.0f;
  const vint bits = (__builtin_convertvector(n, vint) + 127) << 23;
  vfloat scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return q * scale;
}
// e^(x - max), 0 where x is -inf (a masked key: exactly 0, as LibTorch's softmax gives it).
POSLAB_INLINE vfloat shifted_exp(vfloat x, float mx) { return x == -std::numeric_limits<float>::infinity() ? vfloat{} : exp_nonpositive(x - mx); }

// The 16 lanes folded in halves, 4 steps deep (lane by lane would be a chain of 16 dependent operations),
// by lane shuffles: lane i meets lane i + w, as a loop over an array of the lanes would pair them.
POSLAB_INLINE vfloat upper_half(vfloat v, int w) {
  switch (w) {
    case 8: return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
    case 4: return __builtin_shufflevector(v, v, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7);
    case 2: return __builtin_shufflevector(v, v, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    default: return __builtin_shufflevector(v, v, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  }
}
POSLAB_INLINE float fold_sum(vfloat v) {
  for (int w = 8; w >= 1; w /= 2) v += upper_half(v, w);
  return v[0];
}
POSLAB_INLINE float fold_max(vfloat v) {
  for (int w = 8; w >= 1; w /= 2) {
    const vfloat u = upper_half(v, w);
    v = v > u ? v : u;
  }
  return v[0];
}

}  // namespace poslab::kernels
