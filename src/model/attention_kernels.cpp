// The fused attention softmax's row loops, in float arithmetic whatever the storage type; built like
// model/fused_kernels.cpp (-fno-math-errno, AVX-512, AVX2+FMA and baseline x86-64 picked at load time).
#include "model/attention_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "model/kernel_math.h"
#include "model/kernel_vectors.h"

namespace poslab::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Keys row i sees: causal, never fewer than none.
POSLAB_INLINE int64_t keys_seen(int64_t i, int64_t n, int64_t offset) {
  return std::min(n, std::max<int64_t>(0, offset + i + 1));
}

// Rows are short (64 keys in training, half of them seen on average): left to the auto-vectoriser, their
// loops spend more on remainders and set-up than on the work, so they are written in GCC's vector types
// (model/kernel_vectors.h), 16 floats at a time, to the keys seen rounded up to whole vectors; keys past
// the causal limit count as -inf there. Only a row whose length is not a multiple of 16 has a scalar
// remainder, at its end.
using kernels::exp_nonpositive;  // the scalar ones beside the vector overloads
using kernels::store;
using kernels::shifted_exp;
POSLAB_INLINE int64_t vector_end(int64_t m, int64_t n) { return std::min(n, (m + kLanes - 1) / kLanes * kLanes); }
// e^(x - max), 0 where x is -inf (a masked key: exactly 0, as LibTorch's softmax gives it).
POSLAB_INLINE float shifted_exp(float x, float mx) { return x == kNegInf ? 0.0f : exp_nonpositive(x - mx); }

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
