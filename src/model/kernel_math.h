// Scalar helpers the fused CPU loops share (model/fused_kernels.cpp, model/attention_kernels.cpp):
// bfloat16 loads and stores, a vectorisable e^x, lane-wise sums, and the instruction sets each loop
// is built for. Header-only and free of LibTorch, like the loops that include it.
#pragma once

#include <cstdint>
#include <cstring>

namespace poslab::kernels {

using bf16 = uint16_t;  // bfloat16 bits: the top half of a float

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define POSLAB_TARGET_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define POSLAB_TARGET_CLONES
#endif
#define POSLAB_INLINE inline __attribute__((always_inline))

POSLAB_INLINE float to_float(float x) { return x; }
POSLAB_INLINE float to_float(bf16 h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
POSLAB_INLINE void store(float* p, float x) { *p = x; }
// Round to nearest even, NaN kept a (quiet) NaN: c10::BFloat16's conversion.
POSLAB_INLINE void store(bf16* p, float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  *p = x != x ? bf16{0x7FC0} : static_cast<bf16>(rounded);
}

// e^x for x <= 0 (Cephes' expf polynomial on [-ln2/2, ln2/2], within 2 ulp), clamped where it
// underflows: written so that the loops calling it vectorise (no library call, no branch).
POSLAB_INLINE float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  // n = round(x / ln 2) by the 1.5 * 2^23 trick (round to nearest, no rounding instruction needed).
  const float shifter = 12582912.0f;
  const float n = (x * 1.44269504088896341f + shifter) - shifter;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // x - n ln2 in two parts (Cody-Waite)
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const uint32_t scale_bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;  // 2^n, n >= -126
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale;
}

// Sums over a row in 16 independent lanes (one vector register): one chain of dependent adds would be
// bound by the add's latency, and the compiler may not reorder a float sum itself.
template <class F>
POSLAB_INLINE float lane_sum(int64_t C, F term) {
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= C; i += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += term(i + l);
  for (; i < C; ++i) lanes[0] += term(i);
  float s = 0;
  for (float lane : lanes) s += lane;
  return s;
}

}  // namespace poslab::kernels
