// The fused CPU ops' element loops, in float arithmetic whatever the storage type. Built with -fno-math-errno
// and -fno-trapping-math (CMakeLists.txt) and for AVX-512, AVX2+FMA and baseline x86-64, picked at load time:
// one binary for every machine, and LibTorch 1.13's own kernels run at AVX2 (its default capability).
#include "model/fused_kernels.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "model/kernel_math.h"

namespace poslab::kernels {

namespace {

// erf(z) by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7), the formula of LibTorch's vectorised erf:
// in float, GELU follows LibTorch's own to a few ulp (the PyTorch twin's parity holds at rtol 1e-5 even
// where GELU's inputs are in the tens). e = e^(-z^2) is passed in: GELU's backward needs it as well.
POSLAB_INLINE float erf_with(float z, float e) {
  const float a = z < 0 ? -z : z;
  const float t = 1.0f / (0.3275911f * a + 1.0f);
  float r = 1.061405429f;
  r = r * t - 1.453152027f;
  r = r * t + 1.421413741f;
  r = r * t - 0.284496736f;
  r = r * t + 0.254829592f;
  const float erf_abs = 1.0f - r * t * e;
  return z < 0 ? -erf_abs : erf_abs;
}

// erf(z) as Eigen's fast erf computes it: z P(z^2) / Q(z^2) on z clamped to [-4, 4] (beyond it erf is
// +-1 in float), within a few ulp of 1; no exponential. Used where the result is rounded to bfloat16
// (8 bits), whose rounding is ~10^4 times the difference between the two erfs; twice as fast.
POSLAB_INLINE float erf_rational(float z) {
  z = z < -4.0f ? -4.0f : (z > 4.0f ? 4.0f : z);
  const float z2 = z * z;
  float p = -2.72614225801306e-10f;
  p = p * z2 + 2.77068142495902e-08f;
  p = p * z2 - 2.10102402082508e-06f;
  p = p * z2 - 5.69250639462346e-05f;
  p = p * z2 - 7.34990630326855e-04f;
  p = p * z2 - 2.95459980854025e-03f;
  p = p * z2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * z2 - 2.13374055278905e-04f;
  q = q * z2 - 1.68282697438203e-03f;
  q = q * z2 - 7.37332916720468e-03f;
  q = q * z2 - 1.42647390514189e-02f;
  return z * p / q;
}

constexpr float kSqrtHalf = 0.70710678118654752f;      // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;    // 1 / sqrt(2 pi)

template <class T>
POSLAB_INLINE void gelu_forward_loop(const T* __restrict x, T* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float xi = to_float(x[i]);
    const float z = xi * kSqrtHalf;
    const float erf = std::is_same_v<T, float> ? erf_with(z, exp_nonpositive(-z * z)) : erf_rational(z);
    store(y + i, xi * 0.5f * (1.0f + erf));
  }
}

// The forward for a backward to come: y as gelu_forward_loop writes it and d = Phi(x) + x phi(x) in float
// (the same erf, and phi(x) from the e^(-x^2/2) it shares in float), so that the backward is a product.
template <class T>
POSLAB_INLINE void gelu_forward_derivative_loop(const T* __restrict x, T* __restrict y, float* __restrict d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float xi = to_float(x[i]);
    const float z = xi * kSqrtHalf;
    const float e = exp_nonpositive(-z * z);  // e^(-x^2/2)
    const float erf = std::is_same_v<T, float> ? erf_with(z, e) : erf_rational(z);
    store(y + i, xi * 0.5f * (1.0f + erf));
    const float cdf = 0.5f * (1.0f + erf);
    d[i] = cdf + xi * (kInvSqrt2Pi * e);
  }
}

template <class T>
POSLAB_INLINE void scale_by_loop(const T* __restrict dy, const float* __restrict d, T* __restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store(dx + i, to_float(dy[i]) * d[i]);
}

// With a residual a (may be null): h = x + a is written, then normalised, in the same pass over the rows.
// The row to normalise: x itself, or h = x + a written first.
template <class A>
POSLAB_INLINE const float* residual_row(const float* __restrict x, const A* __restrict a, float* __restrict h,
                                        int64_t C) {
  if (a == nullptr) return x;
  for (int64_t i = 0; i < C; ++i) h[i] = x[i] + to_float(a[i]);
  return h;
}

// y = (x - m) s w + b over one row, mean and rstd recorded.
template <class Y>
POSLAB_INLINE void normalise_row(const float* __restrict x, float m, float var, const float* __restrict w,
                                 const float* __restrict b, Y* __restrict y, float* mean, float* rstd, int64_t C,
                                 float eps) {
  const float s = 1.0f / std::sqrt(var / static_cast<float>(C) + eps);
  *mean = m;
  *rstd = s;
  if (b != nullptr) {
    for (int64_t i = 0; i < C; ++i) store(y + i, (x[i] - m) * s * w[i] + b[i]);
  } else {
    for (int64_t i = 0; i < C; ++i) store(y + i, (x[i] - m) * s * w[i]);
  }
}

// R rows at a time (C a multiple of 16), each summed as lane_sum sums it: the rows' chains of 16 dependent
// adds (the lanes in order) interleave instead of each waiting on the last's. Written in GCC's vector types
// (16 floats): the auto-vectoriser made scalar code of the R rows' loops. Inlined: no vector crosses a call
// (-Wno-psabi in CMakeLists.txt).
typedef float vfloat __attribute__((vector_size(64)));
POSLAB_INLINE vfloat vload(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <int R, class A, class Y>
POSLAB_INLINE void layer_norm_forward_rows(const float* __restrict x, const A* __restrict a, float* __restrict h,
                                           const float* __restrict w, const float* __restrict b, Y* __restrict y,
                                           float* mean, float* rstd, int64_t C, float eps) {
  const float* xr[R];
  for (int k = 0; k < R; ++k)  // no offsets from a null pointer (UBSan's pointer-overflow check)
    xr[k] = a != nullptr ? residual_row(x + k * C, a + k * C, h + k * C, C) : x + k * C;
  vfloat acc[R];
  for (int k = 0; k < R; ++k) acc[k] = vfloat{};
  for (int64_t i = 0; i < C; i += 16)
    for (int k = 0; k < R; ++k) acc[k] += vload(xr[k] + i);
  float m[R];
  for (int k = 0; k < R; ++k) m[k] = 0;
  for (int l = 0; l < 16; ++l)
    for (int k = 0; k < R; ++k) m[k] += acc[k][l];
  for (int k = 0; k < R; ++k) {
    m[k] /= static_cast<float>(C);
    acc[k] = vfloat{};
  }
  for (int64_t i = 0; i < C; i += 16)
    for (int k = 0; k < R; ++k) {
      const vfloat d = vload(xr[k] + i) - m[k];
      acc[k] += d * d;
    }
  float var[R];
  for (int k = 0; k < R; ++k) var[k] = 0;
  for (int l = 0; l < 16; ++l)
    for (int k = 0; k < R; ++k) var[k] += acc[k][l];
  for (int k = 0; k < R; ++k) normalise_row(xr[k], m[k], var[k], w, b, y + k * C, mean + k, rstd + k, C, eps);
}

// One row, summed by lane_sum: the rows a group leaves, and widths not a multiple of 16.
template <class A, class Y>
POSLAB_INLINE void layer_norm_forward_row(const float* __restrict x, const A* __restrict a, float* __restrict h,
                                          const float* __restrict w, const float* __restrict b, Y* __restrict y,
                                          float* mean, float* rstd, int64_t C, float eps) {
  const float* xr = residual_row(x, a, h, C);
  const float m = lane_sum(C, [&](int64_t i) { return xr[i]; }) / static_cast<float>(C);
  const float var = lane_sum(C, [&](int64_t i) { return (xr[i] - m) * (xr[i] - m); });
  normalise_row(xr, m, var, w, b, y, mean, rstd, C, eps);
}

template <class A, class Y>
POSLAB_INLINE void layer_norm_forward_loop(const float* __restrict x, const A* __restrict a, float* __restrict h,
                                           const float* __restrict w, const float* __restrict b, Y* __restrict y,
                                           float* mean, float* rstd, int64_t rows, int64_t C, float eps) {
  constexpr int R = 4;
  int64_t r = 0;
  auto at = [&](int64_t row) { return row * C; };
  if (C % 16 == 0)
    for (; r + R <= rows; r += R)
      layer_norm_forward_rows<R>(x + at(r), a != nullptr ? a + at(r) : nullptr, h != nullptr ? h + at(r) : nullptr, w,
                                 b, y + at(r), mean + r, rstd + r, C, eps);
  for (; r < rows; ++r)
    layer_norm_forward_row(x + at(r), a != nullptr ? a + at(r) : nullptr, h != nullptr ? h + at(r) : nullptr, w, b,
                           y + at(r), mean + r, rstd + r, C, eps);
}

// With the residual's gradient dres (may be null): dx = dres + the norm's gradient, and da (may be null)
// the same values in the residual's own type, for the branch that produced it.
template <class DY, class DA>
POSLAB_INLINE void layer_norm_backward_loop(const DY* __restrict dy, const float* __restrict x,
                                            const float* __restrict w, const float* mean, const float* rstd,
                                            const float* __restrict dres, float* __restrict dx, DA* __restrict da,
                                            float* __restrict dw, float* __restrict db, int64_t rows, int64_t C) {
  for (int64_t r = 0; r < rows; ++r) {
    const DY* dyr = dy + r * C;
    const float* xr = x + r * C;
    float* dxr = dx + r * C;
    const float m = mean[r], s = rstd[r];
    const float sum_g = lane_sum(C, [&](int64_t i) { return to_float(dyr[i]) * w[i]; });
    const float sum_gx = lane_sum(C, [&](int64_t i) { return to_float(dyr[i]) * w[i] * ((xr[i] - m) * s); });
    const float mean_g = sum_g / static_cast<float>(C), mean_gx = sum_gx / static_cast<float>(C);
    for (int64_t i = 0; i < C; ++i) {
      const float d = to_float(dyr[i]);
      const float xhat = (xr[i] - m) * s;
      dxr[i] = s * (d * w[i] - mean_g - xhat * mean_gx);
      dw[i] += d * xhat;
    }
    if (db != nullptr)
      for (int64_t i = 0; i < C; ++i) db[i] += to_float(dyr[i]);
    if (dres != nullptr) {
      const float* dr = dres + r * C;
      for (int64_t i = 0; i < C; ++i) dxr[i] = dr[i] + dxr[i];
    }
    if (da != nullptr)
      for (int64_t i = 0; i < C; ++i) store(da + r * C + i, dxr[i]);
  }
}

// Cross-entropy over rows of V logits: lse = log sum exp (from the row's maximum, as log_softmax does),
// loss = lse - x[target]; a negative target (ignored) gives 0 and a zero gradient row.
template <class T>
POSLAB_INLINE void cross_entropy_forward_loop(const T* __restrict x, const int64_t* __restrict target, int64_t rows,
                                              int64_t V, float* __restrict lse, float* __restrict loss) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * V;
    float m = to_float(xr[0]);
    for (int64_t j = 1; j < V; ++j) m = to_float(xr[j]) > m ? to_float(xr[j]) : m;
    const float sum = lane_sum(V, [&](int64_t j) { return exp_nonpositive(to_float(xr[j]) - m); });
    lse[r] = m + std::log(sum);
    loss[r] = target[r] < 0 ? 0.0f : lse[r] - to_float(xr[target[r]]);
  }
}

template <class T>
POSLAB_INLINE void cross_entropy_backward_loop(const T* __restrict x, const int64_t* __restrict target,
                                               const float* __restrict lse, float g, int64_t rows, int64_t V,
                                               T* __restrict dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * V;
    T* dr = dx + r * V;
    if (target[r] < 0) {
      for (int64_t j = 0; j < V; ++j) store(dr + j, 0.0f);
      continue;
    }
    const float l = lse[r];
    for (int64_t j = 0; j < V; ++j) store(dr + j, g * exp_nonpositive(to_float(xr[j]) - l));
    store(dr + target[r], g * (exp_nonpositive(to_float(xr[target[r]]) - l) - 1.0f));
  }
}

}  // namespace

POSLAB_TARGET_CLONES void gelu_forward(const float* x, float* y, int64_t n) { gelu_forward_loop(x, y, n); }
POSLAB_TARGET_CLONES void gelu_forward(const bf16* x, bf16* y, int64_t n) { gelu_forward_loop(x, y, n); }
POSLAB_TARGET_CLONES void gelu_forward_with_derivative(const float* x, float* y, float* d, int64_t n) {
  gelu_forward_derivative_loop(x, y, d, n);
}
POSLAB_TARGET_CLONES void gelu_forward_with_derivative(const bf16* x, bf16* y, float* d, int64_t n) {
  gelu_forward_derivative_loop(x, y, d, n);
}
POSLAB_TARGET_CLONES void gelu_backward_with_derivative(const float* dy, const float* d, float* dx, int64_t n) {
  scale_by_loop(dy, d, dx, n);
}
POSLAB_TARGET_CLONES void gelu_backward_with_derivative(const bf16* dy, const float* d, bf16* dx, int64_t n) {
  scale_by_loop(dy, d, dx, n);
}

POSLAB_TARGET_CLONES void layer_norm_forward(const float* x, const float* w, const float* b, float* y, float* mean,
                                             float* rstd, int64_t rows, int64_t C, float eps) {
  layer_norm_forward_loop(x, static_cast<const float*>(nullptr), nullptr, w, b, y, mean, rstd, rows, C, eps);
}
POSLAB_TARGET_CLONES void layer_norm_forward(const float* x, const float* w, const float* b, bf16* y, float* mean,
                                             float* rstd, int64_t rows, int64_t C, float eps) {
  layer_norm_forward_loop(x, static_cast<const float*>(nullptr), nullptr, w, b, y, mean, rstd, rows, C, eps);
}
POSLAB_TARGET_CLONES void layer_norm_backward(const float* dy, const float* x, const float* w, const float* mean,
                                              const float* rstd, float* dx, float* dw, float* db, int64_t rows,
                                              int64_t C) {
  layer_norm_backward_loop(dy, x, w, mean, rstd, nullptr, dx, static_cast<float*>(nullptr), dw, db, rows, C);
}
POSLAB_TARGET_CLONES void layer_norm_backward(const bf16* dy, const float* x, const float* w, const float* mean,
                                              const float* rstd, float* dx, float* dw, float* db, int64_t rows,
                                              int64_t C) {
  layer_norm_backward_loop(dy, x, w, mean, rstd, nullptr, dx, static_cast<float*>(nullptr), dw, db, rows, C);
}

POSLAB_TARGET_CLONES void add_layer_norm_forward(const float* x, const float* a, float* h, const float* w,
                                                 const float* b, float* y, float* mean, float* rstd, int64_t rows,
                                                 int64_t C, float eps) {
  layer_norm_forward_loop(x, a, h, w, b, y, mean, rstd, rows, C, eps);
}
POSLAB_TARGET_CLONES void add_layer_norm_forward(const float* x, const bf16* a, float* h, const float* w,
                                                 const float* b, bf16* y, float* mean, float* rstd, int64_t rows,
                                                 int64_t C, float eps) {
  layer_norm_forward_loop(x, a, h, w, b, y, mean, rstd, rows, C, eps);
}
POSLAB_TARGET_CLONES void add_layer_norm_backward(const float* dy, const float* h, const float* w, const float* mean,
                                                  const float* rstd, const float* dres, float* dx, float* da,
                                                  float* dw, float* db, int64_t rows, int64_t C) {
  layer_norm_backward_loop(dy, h, w, mean, rstd, dres, dx, da, dw, db, rows, C);
}
POSLAB_TARGET_CLONES void add_layer_norm_backward(const bf16* dy, const float* h, const float* w, const float* mean,
                                                  const float* rstd, const float* dres, float* dx, bf16* da,
                                                  float* dw, float* db, int64_t rows, int64_t C) {
  layer_norm_backward_loop(dy, h, w, mean, rstd, dres, dx, da, dw, db, rows, C);
}

POSLAB_TARGET_CLONES void cross_entropy_forward(const float* x, const int64_t* target, int64_t rows, int64_t V,
                                                float* lse, float* loss) {
  cross_entropy_forward_loop(x, target, rows, V, lse, loss);
}
POSLAB_TARGET_CLONES void cross_entropy_forward(const bf16* x, const int64_t* target, int64_t rows, int64_t V,
                                                float* lse, float* loss) {
  cross_entropy_forward_loop(x, target, rows, V, lse, loss);
}
POSLAB_TARGET_CLONES void cross_entropy_backward(const float* x, const int64_t* target, const float* lse, float g,
                                                 int64_t rows, int64_t V, float* dx) {
  cross_entropy_backward_loop(x, target, lse, g, rows, V, dx);
}
POSLAB_TARGET_CLONES void cross_entropy_backward(const bf16* x, const int64_t* target, const float* lse, float g,
                                                 int64_t rows, int64_t V, bf16* dx) {
  cross_entropy_backward_loop(x, target, lse, g, rows, V, dx);
}

}  // namespace poslab::kernels
