// The fused attention softmax's row loops, in float arithmetic whatever the storage type; built like
// model/fused_kernels.cpp (-fno-math-errno, AVX-512, AVX2+FMA and baseline x86-64 picked at load time).
#include "model/attention_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "model/kernel_math.h"

namespace poslab::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Keys row i sees: causal, never fewer than none.
POSLAB_INLINE int64_t keys_seen(int64_t i, int64_t n, int64_t offset) {
  return std::min(n, std::max<int64_t>(0, offset + i + 1));
}

// Rows are short (64 keys in training, half of them seen on average): left to the auto-vectoriser, their
// loops spend more on remainders and set-up than on the work, so they are written in GCC's vector types,
// 16 floats at a time (one AVX-512 register, two AVX2 ones or four SSE ones, per clone), to the keys seen
// rounded up to whole vectors; keys past the causal limit count as -inf there. Only a row whose length is
// not a multiple of 16 has a scalar remainder, at its end.
// The vector helpers are inlined into each clone: no vector crosses a call, whatever -Wpsabi fears.
#pragma GCC diagnostic ignored "-Wpsabi"
using kernels::exp_nonpositive;  // the scalar ones beside the vector overloads below
using kernels::store;
typedef float vfloat __attribute__((vector_size(64)));
typedef int32_t vint __attribute__((vector_size(64)));
typedef uint32_t vuint __attribute__((vector_size(64)));
typedef uint16_t vhalf __attribute__((vector_size(32)));
constexpr int64_t kLanes = 16;
POSLAB_INLINE int64_t vector_end(int64_t m, int64_t n) { return std::min(n, (m + kLanes - 1) / kLanes * kLanes); }

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
POSLAB_INLINE vfloat shifted_exp(vfloat x, float mx) { return x == -std::numeric_limits<float>::infinity() ? vfloat{} : exp_nonpositive(x - mx); }
// e^(x - max), 0 where x is -inf (a masked key: exactly 0, as LibTorch's softmax gives it).
POSLAB_INLINE float shifted_exp(float x, float mx) { return x == kNegInf ? 0.0f : exp_nonpositive(x - mx); }

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

// x_j = scale s_j + mask_j into buf for j < mv, -inf from the causal limit m on; returns the row's maximum.
template <class T>
POSLAB_INLINE float scaled_scores(const T* __restrict s, const float* __restrict mask, int64_t m, int64_t mv,
                                  float scale, float* __restrict buf) {
  const vint iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  vfloat vmax = splat(kNegInf);
  int64_t j = 0;
  for (; j + kLanes <= mv; j += kLanes) {
    vfloat x = load(s + j) * scale;
    if (mask != nullptr) x += load(mask + j);
    x = iota + static_cast<int32_t>(j) < static_cast<int32_t>(m) ? x : splat(kNegInf);
    store(buf + j, x);
    vmax = vmax > x ? vmax : x;
  }
  float mx = fold_max(vmax);
  for (; j < mv; ++j) {
    const float x = j < m ? scale * to_float(s[j]) + (mask != nullptr ? mask[j] : 0.0f) : kNegInf;
    buf[j] = x;
    mx = x > mx ? x : mx;
  }
  return mx;
}

// buf_j = e^(x_j - max) * factor for j < mv; returns the sum of e^(x_j - max).
POSLAB_INLINE float exponentials(float* __restrict buf, int64_t mv, float mx, float factor) {
  vfloat sum{};
  int64_t j = 0;
  for (; j + kLanes <= mv; j += kLanes) {
    const vfloat e = shifted_exp(load(buf + j), mx);
    sum += e;
    store(buf + j, e * factor);
  }
  float total = fold_sum(sum);
  for (; j < mv; ++j) {
    const float e = shifted_exp(buf[j], mx);
    total += e;
    buf[j] = e * factor;
  }
  return total;
}

template <class T>
POSLAB_INLINE void forward_block(const T* __restrict s, const float* __restrict mask, int64_t mask_stride, int64_t t_q,
                                 int64_t n, int64_t offset, float scale, T* __restrict p, float* row_max,
                                 float* row_inv_sum, float* __restrict buf) {
  for (int64_t i = 0; i < t_q; ++i) {
    const int64_t m = keys_seen(i, n, offset), mv = vector_end(m, n);
    const float mx = scaled_scores(s + i * n, mask != nullptr ? mask + i * mask_stride : nullptr, m, mv, scale, buf);
    const float inv = 1.0f / exponentials(buf, mv, mx, 1.0f);
    T* pi = p + i * n;
    int64_t j = 0;
    for (; j + kLanes <= mv; j += kLanes) store(pi + j, load(buf + j) * inv);
    for (; j < mv; ++j) store(pi + j, buf[j] * inv);
    for (; j < n; ++j) store(pi + j, 0.0f);
    row_max[i] = mx;
    row_inv_sum[i] = inv;
  }
}

template <class T>
POSLAB_INLINE void backward_block(const T* __restrict s, const float* __restrict mask, int64_t mask_stride,
                                  const float* row_max, const float* row_inv_sum, const T* __restrict dp, int64_t t_q,
                                  int64_t n, int64_t offset, float scale, T* __restrict ds, float* __restrict datt,
                                  float* __restrict buf) {
  for (int64_t i = 0; i < t_q; ++i) {
    const int64_t m = keys_seen(i, n, offset), mv = vector_end(m, n);
    const T* dpi = dp + i * n;
    T* dsi = ds + i * n;
    float* di = datt != nullptr ? datt + i * n : nullptr;
    scaled_scores(s + i * n, mask != nullptr ? mask + i * mask_stride : nullptr, m, mv, scale, buf);
    exponentials(buf, mv, row_max[i], row_inv_sum[i]);  // p_j, as the forward had it
    vfloat vdot{};
    int64_t j = 0;
    for (; j + kLanes <= mv; j += kLanes) vdot += load(buf + j) * load(dpi + j);
    float dot = fold_sum(vdot);
    for (; j < mv; ++j) dot += buf[j] * to_float(dpi[j]);
    for (j = 0; j + kLanes <= mv; j += kLanes) {
      const vfloat g = load(buf + j) * (load(dpi + j) - dot);
      if (di != nullptr) store(di + j, g);
      store(dsi + j, g * scale);
    }
    for (; j < mv; ++j) {
      const float g = buf[j] * (to_float(dpi[j]) - dot);
      if (di != nullptr) di[j] = g;
      store(dsi + j, g * scale);
    }
    for (; j < n; ++j) {
      if (di != nullptr) di[j] = 0.0f;
      store(dsi + j, 0.0f);
    }
  }
}

}  // namespace

POSLAB_TARGET_CLONES void attention_softmax_forward(const float* s, const float* mask, int64_t mask_stride, int64_t t_q,
                                                    int64_t n, int64_t offset, float scale, float* p, float* row_max,
                                                    float* row_inv_sum, float* buf) {
  forward_block(s, mask, mask_stride, t_q, n, offset, scale, p, row_max, row_inv_sum, buf);
}
POSLAB_TARGET_CLONES void attention_softmax_forward(const bf16* s, const float* mask, int64_t mask_stride, int64_t t_q,
                                                    int64_t n, int64_t offset, float scale, bf16* p, float* row_max,
                                                    float* row_inv_sum, float* buf) {
  forward_block(s, mask, mask_stride, t_q, n, offset, scale, p, row_max, row_inv_sum, buf);
}
POSLAB_TARGET_CLONES void attention_softmax_backward(const float* s, const float* mask, int64_t mask_stride,
                                                     const float* row_max, const float* row_inv_sum, const float* dp,
                                                     int64_t t_q, int64_t n, int64_t offset, float scale, float* ds,
                                                     float* datt, float* buf) {
  backward_block(s, mask, mask_stride, row_max, row_inv_sum, dp, t_q, n, offset, scale, ds, datt, buf);
}
POSLAB_TARGET_CLONES void attention_softmax_backward(const bf16* s, const float* mask, int64_t mask_stride,
                                                     const float* row_max, const float* row_inv_sum, const bf16* dp,
                                                     int64_t t_q, int64_t n, int64_t offset, float scale, bf16* ds,
                                                     float* datt, float* buf) {
  backward_block(s, mask, mask_stride, row_max, row_inv_sum, dp, t_q, n, offset, scale, ds, datt, buf);
}

}  // namespace poslab::kernels
