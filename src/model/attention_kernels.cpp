// The fused attention softmax's row loops, in float arithmetic whatever the storage type; built like
// model/fused_kernels.cpp (-fno-math-errno, AVX-512, AVX2+FMA and baseline x86-64 picked at load time).
#include "model/attention_kernels.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <stdexcept>

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
// W floats at a time, to the keys seen rounded up to whole vectors; keys past the causal limit count as -inf
// there. Only a row whose length is not a multiple of W has a scalar remainder, at its end. W is one register:
// 16 in the AVX-512 clone, 8 in the others. (With 16 lanes in two AVX2 registers GCC 12 lowers every
// comparison and selection lane by lane: on an AVX2-only Zen 3 the softmax was 28% of a passkey probe, and
// with 8 lanes a main-job cell trained 1.06-1.41x and evaluated 1.06-1.45x faster.)
// The vector helpers are inlined into each clone: no vector crosses a call, whatever -Wpsabi fears (the file
// builds with -Wno-psabi: CMakeLists.txt).
using kernels::exp_nonpositive;  // the scalar ones beside the vector overloads below
using kernels::store;

template <int W>
struct Lanes;
template <>
struct Lanes<16> {
  typedef float f __attribute__((vector_size(64)));
  typedef int32_t i __attribute__((vector_size(64)));
  typedef uint32_t u __attribute__((vector_size(64)));
  typedef uint16_t h __attribute__((vector_size(32)));
  static constexpr i iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  // Lane i + w brought to lane i (the upper lanes repeated): folding halves, as a loop over the lanes pairs them.
  static f upper_half(f v, int w) {
    switch (w) {
      case 8: return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
      case 4: return __builtin_shufflevector(v, v, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7);
      case 2: return __builtin_shufflevector(v, v, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
      default: return __builtin_shufflevector(v, v, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    }
  }
};
template <>
struct Lanes<8> {
  typedef float f __attribute__((vector_size(32)));
  typedef int32_t i __attribute__((vector_size(32)));
  typedef uint32_t u __attribute__((vector_size(32)));
  typedef uint16_t h __attribute__((vector_size(16)));
  static constexpr i iota = {0, 1, 2, 3, 4, 5, 6, 7};
  static f upper_half(f v, int w) {
    switch (w) {
      case 4: return __builtin_shufflevector(v, v, 4, 5, 6, 7, 4, 5, 6, 7);
      case 2: return __builtin_shufflevector(v, v, 2, 3, 2, 3, 2, 3, 2, 3);
      default: return __builtin_shufflevector(v, v, 1, 1, 1, 1, 1, 1, 1, 1);
    }
  }
};
template <int W>
using vfloat = typename Lanes<W>::f;

template <int W>
POSLAB_INLINE int64_t vector_end(int64_t m, int64_t n) { return std::min<int64_t>(n, (m + W - 1) / W * W); }

template <int W>
POSLAB_INLINE vfloat<W> splat(float x) { return vfloat<W>{} + x; }
template <int W>
POSLAB_INLINE vfloat<W> load(const float* p) {
  vfloat<W> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <int W>
POSLAB_INLINE vfloat<W> load(const bf16* p) {
  typename Lanes<W>::h h;
  std::memcpy(&h, p, sizeof h);
  const typename Lanes<W>::u u = __builtin_convertvector(h, typename Lanes<W>::u) << 16;
  vfloat<W> v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}
template <int W>
POSLAB_INLINE void store(float* p, vfloat<W> v) { std::memcpy(p, &v, sizeof v); }
// Round to nearest even, NaN kept a quiet NaN: store(bf16*, float) on W lanes.
template <int W>
POSLAB_INLINE void store(bf16* p, vfloat<W> v) {
  typedef typename Lanes<W>::u vuint;
  vuint u;
  std::memcpy(&u, &v, sizeof u);
  const vuint rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const typename Lanes<W>::h h = __builtin_convertvector(v != v ? vuint{} + 0x7FC0u : rounded, typename Lanes<W>::h);
  std::memcpy(p, &h, sizeof h);
}
// exp_nonpositive (kernel_math.h) on W lanes: the same polynomial, the same rounding trick.
template <int W>
POSLAB_INLINE vfloat<W> exp_nonpositive(vfloat<W> x) {
  x = x < -87.0f ? splat<W>(-87.0f) : x;
  const vfloat<W> n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const vfloat<W> r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  vfloat<W> q = splat<W>(1.9875691500e-4f);
  q = q * r + 1.3981999507e-3f;
  q = q * r + 8.3334519073e-3f;
  q = q * r + 4.1665795894e-2f;
  q = q * r + 1.6666665459e-1f;
  q = q * r + 5.0000001201e-1f;
  q = q * r * r + r + 1.0f;
  const typename Lanes<W>::i bits = (__builtin_convertvector(n, typename Lanes<W>::i) + 127) << 23;
  vfloat<W> scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return q * scale;
}
// e^(x - max), 0 where x is -inf (a masked key: exactly 0, as LibTorch's softmax gives it).
template <int W>
POSLAB_INLINE vfloat<W> shifted_exp(vfloat<W> x, float mx) {
  return x == -std::numeric_limits<float>::infinity() ? vfloat<W>{} : exp_nonpositive<W>(x - mx);
}
POSLAB_INLINE float shifted_exp(float x, float mx) { return x == kNegInf ? 0.0f : exp_nonpositive(x - mx); }

// The W lanes folded in halves, log2 W steps deep (lane by lane would be a chain of W dependent operations).
template <int W>
POSLAB_INLINE float fold_sum(vfloat<W> v) {
  for (int w = W / 2; w >= 1; w /= 2) v += Lanes<W>::upper_half(v, w);
  return v[0];
}
template <int W>
POSLAB_INLINE float fold_max(vfloat<W> v) {
  for (int w = W / 2; w >= 1; w /= 2) {
    const vfloat<W> u = Lanes<W>::upper_half(v, w);
    v = v > u ? v : u;
  }
  return v[0];
}

// x_j = scale s_j + mask_j into buf for j < mv, -inf from the causal limit m on; returns the row's maximum.
template <int W, class T>
POSLAB_INLINE float scaled_scores(const T* __restrict s, const float* __restrict mask, int64_t m, int64_t mv,
                                  float scale, float* __restrict buf) {
  vfloat<W> vmax = splat<W>(kNegInf);
  int64_t j = 0;
  for (; j + W <= mv; j += W) {
    vfloat<W> x = load<W>(s + j) * scale;
    if (mask != nullptr) x += load<W>(mask + j);
    x = Lanes<W>::iota + static_cast<int32_t>(j) < static_cast<int32_t>(m) ? x : splat<W>(kNegInf);
    store<W>(buf + j, x);
    vmax = vmax > x ? vmax : x;
  }
  float mx = fold_max<W>(vmax);
  for (; j < mv; ++j) {
    const float x = j < m ? scale * to_float(s[j]) + (mask != nullptr ? mask[j] : 0.0f) : kNegInf;
    buf[j] = x;
    mx = x > mx ? x : mx;
  }
  return mx;
}

// buf_j = e^(x_j - max) * factor for j < mv; returns the sum of e^(x_j - max).
template <int W>
POSLAB_INLINE float exponentials(float* __restrict buf, int64_t mv, float mx, float factor) {
  vfloat<W> sum{};
  int64_t j = 0;
  for (; j + W <= mv; j += W) {
    const vfloat<W> e = shifted_exp<W>(load<W>(buf + j), mx);
    sum += e;
    store<W>(buf + j, e * factor);
  }
  float total = fold_sum<W>(sum);
  for (; j < mv; ++j) {
    const float e = shifted_exp(buf[j], mx);
    total += e;
    buf[j] = e * factor;
  }
  return total;
}

template <int W, class T>
POSLAB_INLINE void forward_block(const T* __restrict s, const float* __restrict mask, int64_t mask_stride, int64_t t_q,
                                 int64_t n, int64_t offset, float scale, T* __restrict p, float* row_max,
                                 float* row_inv_sum, float* __restrict buf) {
  for (int64_t i = 0; i < t_q; ++i) {
    const int64_t m = keys_seen(i, n, offset), mv = vector_end<W>(m, n);
    const float mx = scaled_scores<W>(s + i * n, mask != nullptr ? mask + i * mask_stride : nullptr, m, mv, scale, buf);
    const float inv = 1.0f / exponentials<W>(buf, mv, mx, 1.0f);
    T* pi = p + i * n;
    int64_t j = 0;
    for (; j + W <= mv; j += W) store<W>(pi + j, load<W>(buf + j) * inv);
    for (; j < mv; ++j) store(pi + j, buf[j] * inv);
    for (; j < n; ++j) store(pi + j, 0.0f);
    row_max[i] = mx;
    row_inv_sum[i] = inv;
  }
}

template <int W, class T>
POSLAB_INLINE void backward_block(const T* __restrict s, const float* __restrict mask, int64_t mask_stride,
                                  const float* row_max, const float* row_inv_sum, const T* __restrict dp, int64_t t_q,
                                  int64_t n, int64_t offset, float scale, T* __restrict ds, float* __restrict datt,
                                  float* __restrict buf) {
  for (int64_t i = 0; i < t_q; ++i) {
    const int64_t m = keys_seen(i, n, offset), mv = vector_end<W>(m, n);
    const T* dpi = dp + i * n;
    T* dsi = ds + i * n;
    float* di = datt != nullptr ? datt + i * n : nullptr;
    scaled_scores<W>(s + i * n, mask != nullptr ? mask + i * mask_stride : nullptr, m, mv, scale, buf);
    exponentials<W>(buf, mv, row_max[i], row_inv_sum[i]);  // p_j, as the forward had it
    vfloat<W> vdot{};
    int64_t j = 0;
    for (; j + W <= mv; j += W) vdot += load<W>(buf + j) * load<W>(dpi + j);
    float dot = fold_sum<W>(vdot);
    for (; j < mv; ++j) dot += buf[j] * to_float(dpi[j]);
    for (j = 0; j + W <= mv; j += W) {
      const vfloat<W> g = load<W>(buf + j) * (load<W>(dpi + j) - dot);
      if (di != nullptr) store<W>(di + j, g);
      store<W>(dsi + j, g * scale);
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

std::atomic<int> lanes_set{0};  // set_softmax_lanes: 0, 8 or 16

// One register's lanes: 16 where the CPU runs the AVX-512 clone (x86-64-v4), else 8; asked once. Without
// clones (other compilers and architectures) 16, which their vectorisers split by themselves.
bool cpu_wide_lanes() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  static const bool wide = __builtin_cpu_supports("x86-64-v4");
  return wide;
#else
  return true;
#endif
}

POSLAB_INLINE bool wide_lanes() {
  const int set = lanes_set.load(std::memory_order_relaxed);
  return set == 0 ? cpu_wide_lanes() : set == 16;
}

}  // namespace

void set_softmax_lanes(int lanes) {
  if (lanes != 0 && lanes != 8 && lanes != 16) throw std::invalid_argument("set_softmax_lanes: 0, 8 or 16");
  lanes_set.store(lanes, std::memory_order_relaxed);
}

int softmax_lanes() { return wide_lanes() ? 16 : 8; }

POSLAB_TARGET_CLONES void attention_softmax_forward(const float* s, const float* mask, int64_t mask_stride, int64_t t_q,
                                                    int64_t n, int64_t offset, float scale, float* p, float* row_max,
                                                    float* row_inv_sum, float* buf) {
  if (wide_lanes()) return forward_block<16>(s, mask, mask_stride, t_q, n, offset, scale, p, row_max, row_inv_sum, buf);
  forward_block<8>(s, mask, mask_stride, t_q, n, offset, scale, p, row_max, row_inv_sum, buf);
}
POSLAB_TARGET_CLONES void attention_softmax_forward(const bf16* s, const float* mask, int64_t mask_stride, int64_t t_q,
                                                    int64_t n, int64_t offset, float scale, bf16* p, float* row_max,
                                                    float* row_inv_sum, float* buf) {
  if (wide_lanes()) return forward_block<16>(s, mask, mask_stride, t_q, n, offset, scale, p, row_max, row_inv_sum, buf);
  forward_block<8>(s, mask, mask_stride, t_q, n, offset, scale, p, row_max, row_inv_sum, buf);
}
POSLAB_TARGET_CLONES void attention_softmax_backward(const float* s, const float* mask, int64_t mask_stride,
                                                     const float* row_max, const float* row_inv_sum, const float* dp,
                                                     int64_t t_q, int64_t n, int64_t offset, float scale, float* ds,
                                                     float* datt, float* buf) {
  if (wide_lanes()) return backward_block<16>(s, mask, mask_stride, row_max, row_inv_sum, dp, t_q, n, offset, scale, ds, datt, buf);
  backward_block<8>(s, mask, mask_stride, row_max, row_inv_sum, dp, t_q, n, offset, scale, ds, datt, buf);
}
POSLAB_TARGET_CLONES void attention_softmax_backward(const bf16* s, const float* mask, int64_t mask_stride,
                                                     const float* row_max, const float* row_inv_sum, const bf16* dp,
                                                     int64_t t_q, int64_t n, int64_t offset, float scale, bf16* ds,
                                                     float* datt, float* buf) {
  if (wide_lanes()) return backward_block<16>(s, mask, mask_stride, row_max, row_inv_sum, dp, t_q, n, offset, scale, ds, datt, buf);
  backward_block<8>(s, mask, mask_stride, row_max, row_inv_sum, dp, t_q, n, offset, scale, ds, datt, buf);
}

}  // namespace poslab::kernels
