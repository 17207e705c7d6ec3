// The fused rotary embedding's loops (model/rotary_kernels.h): float arithmetic, no contraction of a
// product and a sum into one fused multiply-add (CMakeLists.txt), several instruction sets picked at load.
#include "model/rotary_kernels.h"

#include "model/kernel_math.h"

namespace poslab::kernels {

namespace {

POSLAB_INLINE float round_bf16(float x) {
  bf16 h;
  store(&h, x);
  return to_float(h);
}
POSLAB_INLINE float round_as(const float*, float x) { return x; }
POSLAB_INLINE float round_as(const bf16*, float x) { return round_bf16(x); }

template <class T>
POSLAB_INLINE void forward_row(const T* __restrict x, const float* __restrict c, const float* __restrict s,
                               T* __restrict y, int64_t pairs) {
  for (int64_t i = 0; i < pairs; ++i) {
    const float x0 = to_float(x[2 * i]), x1 = to_float(x[2 * i + 1]);
    const float a = x0 * c[i], b = x1 * s[i], d = x0 * s[i], e = x1 * c[i];
    store(y + 2 * i, a - b);
    store(y + 2 * i + 1, d + e);
  }
}

// The products are rounded to the input's type first (LibTorch's autograd casts each gradient to its
// input's type), then summed in float and rounded once more.
template <class T>
POSLAB_INLINE void backward_row(const T* __restrict dy, const float* __restrict c, const float* __restrict s,
                                T* __restrict dx, int64_t pairs) {
  for (int64_t i = 0; i < pairs; ++i) {
    const float g0 = to_float(dy[2 * i]), g1 = to_float(dy[2 * i + 1]);
    const float a = round_as(dy, g0 * c[i]), b = round_as(dy, g1 * s[i]);
    const float d = round_as(dy, -(g0 * s[i])), e = round_as(dy, g1 * c[i]);
    store(dx + 2 * i, a + b);
    store(dx + 2 * i + 1, d + e);
  }
}

}  // namespace

POSLAB_TARGET_CLONES void rotary_forward(const float* x, const float* cos, const float* sin, float* y, int64_t pairs) {
  forward_row(x, cos, sin, y, pairs);
}
POSLAB_TARGET_CLONES void rotary_forward(const bf16* x, const float* cos, const float* sin, bf16* y, int64_t pairs) {
  forward_row(x, cos, sin, y, pairs);
}
POSLAB_TARGET_CLONES void rotary_backward(const float* dy, const float* cos, const float* sin, float* dx, int64_t pairs) {
  backward_row(dy, cos, sin, dx, pairs);
}
POSLAB_TARGET_CLONES void rotary_backward(const bf16* dy, const float* cos, const float* sin, bf16* dx, int64_t pairs) {
  backward_row(dy, cos, sin, dx, pairs);
}

}  // namespace poslab::kernels
