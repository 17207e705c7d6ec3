// One (batch, head) block of bfloat16 attention on AVX512_BF16: operands packed into pairs for vdpbf16ps,
// register tiles of up to 4 rows x 64 columns summed in float, rows rounded to bfloat16 once. Built for that
// instruction set function by function (a target pragma), not with a flag on the file: any inline
// function of a header compiled here with AVX-512 could be the copy the linker keeps for every caller.
#include "model/attention_block_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define POSLAB_BLOCK_KERNELS 1
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "model/attention_kernels.h"
#include "model/kernel_math.h"

namespace poslab::kernels {

#ifdef POSLAB_BLOCK_KERNELS

namespace {

// Scratch for the packed operands, one set per thread (the blocks run on the batch shards' threads),
// grown to the largest block seen and kept. Plain code: outside the AVX-512 region below.
struct Scratch {
  std::vector<uint32_t> a, b, c, d;
  std::vector<bf16> dp, ds;
  std::vector<float> row;
};
Scratch& scratch() {
  static thread_local Scratch s;
  return s;
}
uint32_t* sized(std::vector<uint32_t>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  return v.data();
}
bf16* sized(std::vector<bf16>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  return v.data();
}
float* sized(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  return v.data();
}

constexpr int64_t kLanes = 16;
int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
int64_t keys_seen(int64_t i, int64_t t_k, int64_t offset) { return std::min(t_k, std::max<int64_t>(0, offset + i + 1)); }

}  // namespace

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
#endif
// The vector helpers inside the region, to be built for it: clang refuses 512-bit vectors passed to a
// function of the default target. They are always inlined, so no copy of them is left for the linker.
}  // namespace poslab::kernels
#include "model/kernel_vectors.h"
namespace poslab::kernels {
namespace {

#define POSLAB_AI inline __attribute__((always_inline))

// B for a product x y^T: out[k2 * ld + n] = y's row n, elements 2 k2 and 2 k2 + 1, as one 32-bit pair;
// 0 for rows n >= rows up to ld (a multiple of 16). cols is even.
void pack_pairs_of_cols(const bf16* y, int64_t stride, int64_t rows, int64_t cols, int64_t ld, uint32_t* out) {
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i index = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(stride)));
  for (int64_t n0 = 0; n0 < ld; n0 += kLanes) {
    const int64_t left = std::max<int64_t>(0, std::min(kLanes, rows - n0));
    const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
    for (int64_t k2 = 0; k2 < cols / 2; ++k2) {
      const bf16* base = y + n0 * stride + 2 * k2;
      const __m512i g = m == 0 ? _mm512_setzero_si512()
                               : _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, index, base, 2);
      _mm512_storeu_si512(out + k2 * ld + n0, g);
    }
  }
}

// B for a product x y: out[r2 * ld + c] = (y[2 r2][c], y[2 r2 + 1][c]), rows r2 < ceil(rows / 2); 0 past
// the rows and for columns c >= cols up to ld (a multiple of 16).
void pack_pairs_of_rows(const bf16* y, int64_t stride, int64_t rows, int64_t cols, int64_t ld, uint32_t* out) {
  for (int64_t r2 = 0; r2 < (rows + 1) / 2; ++r2) {
    const bf16* lo = y + 2 * r2 * stride;
    const bool has_hi = 2 * r2 + 1 < rows;
    for (int64_t c0 = 0; c0 < ld; c0 += kLanes) {
      const int64_t left = std::max<int64_t>(0, std::min(kLanes, cols - c0));
      const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
      const vuint a = __builtin_convertvector((vhalf)_mm256_maskz_loadu_epi16(m, lo + c0), vuint);
      const vuint b = has_hi ? __builtin_convertvector((vhalf)_mm256_maskz_loadu_epi16(m, lo + stride + c0), vuint) : vuint{};
      const vuint pairs = a | (b << 16);
      std::memcpy(out + r2 * ld + c0, &pairs, sizeof pairs);
    }
  }
}

// The left operand's pairs. Rows: x's row m, elements 2 k2 and 2 k2 + 1 (the second 0 past k elements).
struct RowPairs {
  const bf16* x;
  int64_t stride, k;
  POSLAB_AI uint32_t operator()(int64_t m, int64_t k2) const {
    const bf16* p = x + m * stride + 2 * k2;
    if (2 * k2 + 1 < k) {
      uint32_t u;
      std::memcpy(&u, p, sizeof u);
      return u;
    }
    return *p;
  }
};
// Packed: a pack_pairs_of_rows of x^T's source, read down its columns: pair (m, k2) at p[k2 * ld + m].
struct PackedPairs {
  const uint32_t* p;
  int64_t ld;
  POSLAB_AI uint32_t operator()(int64_t m, int64_t k2) const { return p[k2 * ld + m]; }
};

// The first n of 16 lanes.
POSLAB_AI __mmask16 first(int64_t n) {
  return n >= kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}
// x rounded to bfloat16, nearest even, NaN kept a quiet NaN (c10::BFloat16's conversion, as store(bf16*,
// vfloat) rounds): the 16 bits in each 32-bit lane.
POSLAB_AI vuint bf16_bits(vfloat x) {
  vuint u;
  std::memcpy(&u, &x, sizeof u);
  const vuint rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return x != x ? vuint{} + 0x7FC0u : rounded;
}
POSLAB_AI void store_bits(bf16* out, vuint bits, int64_t n) {
  const vhalf h = __builtin_convertvector(bits, vhalf);
  _mm256_mask_storeu_epi16(out, first(n), (__m256i)h);
}
// x rounded to bfloat16, its first n lanes stored.
template <class V>
POSLAB_AI void store_bf16(bf16* out, V x, int64_t n) { store_bits(out, bf16_bits(x), n); }
// bfloat16 bits (one per 32-bit lane) as floats.
POSLAB_AI vfloat widen(vuint bits) {
  const vuint u = bits << 16;
  vfloat x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
// The first n of 16 bfloat16 values as floats, 0 past them.
POSLAB_AI vfloat load_first(const bf16* p, int64_t n) {
  return widen(__builtin_convertvector((vhalf)_mm256_maskz_loadu_epi16(first(n), p), vuint));
}
POSLAB_AI vfloat load_first(const float* p, int64_t n) { return (vfloat)_mm512_maskz_loadu_ps(first(n), p); }

// f(MR, NV) for 1 <= mr, nv <= 4, as compile-time constants (std::integral_constant): the tiles' shapes.
template <int MR, class F>
POSLAB_AI void with_vectors(int nv, F f) {
  switch (nv) {
    case 1: return f(std::integral_constant<int, MR>{}, std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, MR>{}, std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, MR>{}, std::integral_constant<int, 3>{});
    default: return f(std::integral_constant<int, MR>{}, std::integral_constant<int, 4>{});
  }
}
template <class F>
POSLAB_AI void with_tile(int mr, int nv, F f) {
  switch (mr) {
    case 1: return with_vectors<1>(nv, f);
    case 2: return with_vectors<2>(nv, f);
    case 3: return with_vectors<3>(nv, f);
    default: return with_vectors<4>(nv, f);
  }
}

// acc = rows m0 .. m0 + MR, columns n0 .. n0 + 16 NV of the sum over k2 in [k_lo, k_hi) of A(m, k2) B[k2],
// in float, one vdpbf16ps per pair, row and vector.
template <int MR, int NV, class A>
POSLAB_AI void tile_sums(const A& a, int64_t m0, int64_t k_lo, int64_t k_hi, const uint32_t* B, int64_t ldb, int64_t n0,
                         __m512 (&acc)[MR][NV]) {
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k2 = k_lo; k2 < k_hi; ++k2) {
    __m512i b[NV];
    for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_si512(B + k2 * ldb + n0 + v * kLanes);
    for (int r = 0; r < MR; ++r) {
      const __m512i x = _mm512_set1_epi32(static_cast<int32_t>(a(m0 + r, k2)));
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)x, (__m512bh)b[v]);
    }
  }
}

// The same tile of C, rounded to bfloat16 and stored, rows ldc apart, up to column n_end.
template <int MR, int NV, class A>
POSLAB_AI void tile(const A& a, int64_t m0, int64_t k_lo, int64_t k_hi, const uint32_t* B, int64_t ldb, int64_t n0,
                    int64_t n_end, bf16* C, int64_t ldc) {
  __m512 acc[MR][NV];
  tile_sums<MR, NV>(a, m0, k_lo, k_hi, B, ldb, n0, acc);
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      const int64_t n = n0 + v * kLanes;
      if (n < n_end) store_bf16(C + (m0 + r) * ldc + n, acc[r][v], n_end - n);
    }
}

struct Span {
  int64_t n_end, k_lo, k_hi;  // columns written, pairs summed
};

// C (M rows, ldc apart) = A B in tiles of 4 rows; span(m0, m1) gives rows m0 .. m1's columns and pairs.
template <class A, class SpanOf>
void product(const A& a, int64_t M, const uint32_t* B, int64_t ldb, bf16* C, int64_t ldc, SpanOf span) {
  for (int64_t m0 = 0; m0 < M; m0 += 4) {
    const int mr = static_cast<int>(std::min<int64_t>(4, M - m0));
    const Span sp = span(m0, m0 + mr);
    for (int64_t n0 = 0; n0 < sp.n_end; n0 += 4 * kLanes) {
      const int nv = static_cast<int>(std::min<int64_t>(4, (sp.n_end - n0 + kLanes - 1) / kLanes));
      with_tile(mr, nv, [&](auto MR, auto NV) { tile<MR, NV>(a, m0, sp.k_lo, sp.k_hi, B, ldb, n0, sp.n_end, C, ldc); });
    }
  }
}

// The columns of scores rows m0 .. m1 need: the keys the last one sees, rounded up to whole vectors
// (the softmax's loops read that far), at most t_k.
int64_t score_columns(const AttentionBlock& b, int64_t m1) {
  return std::min(b.t_k, round_up(keys_seen(m1 - 1, b.t_k, b.offset), kLanes));
}
// The pairs of keys rows m0 .. m1 of p or ds weigh (0 past them).
int64_t key_pairs(const AttentionBlock& b, int64_t m1) { return (keys_seen(m1 - 1, b.t_k, b.offset) + 1) / 2; }

// Blocks whose keys fit one tile's columns (t_k <= 64, training's usual length) keep each row's scores and
// their gradients in registers, four rows at once: the softmax's row loops (model/attention_kernels.cpp),
// written to the same arithmetic, run on the sums as they leave the product. Longer rows go through s and
// dp in memory.
constexpr int64_t kTileKeys = 4 * kLanes;
const vint kIota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// x = scale s + mask on row i's columns j .. j + 16 (those before n_end), -inf from its keys seen m on.
POSLAB_AI vfloat scaled(const AttentionBlock& b, vfloat s, int64_t i, int64_t j, int64_t n_end, int64_t m) {
  vfloat x = s * b.scale;
  if (b.mask != nullptr) x += load_first(b.mask + i * b.mask_stride + j, n_end - j);
  return kIota + static_cast<int32_t>(j) < static_cast<int32_t>(m) ? x : splat(-std::numeric_limits<float>::infinity());
}

// Zeros in row's columns from n_end (a multiple of 16 where it is below t_k) to t_k.
template <class T>
POSLAB_AI void zero_from(T* row, int64_t n_end, int64_t t_k) {
  for (int64_t j = n_end; j < t_k; j += kLanes) {
    if constexpr (std::is_same_v<T, float>) _mm512_mask_storeu_ps(row + j, first(t_k - j), _mm512_setzero_ps());
    else _mm256_mask_storeu_epi16(row + j, first(t_k - j), _mm256_setzero_si256());
  }
}

// Rows m0 .. m0 + MR: acc (their scores' sums) rounded to bfloat16 into s, and p = their softmax, 0 up
// to t_k, with each row's max and 1 / sum (attention_softmax_forward's arithmetic). Step by step over
// the rows, so that their chains of dependent operations (the folds, the division) overlap.
template <int MR, int NV>
POSLAB_AI void softmax_rows(const AttentionBlock& b, int64_t m0, __m512 (&acc)[MR][NV], int64_t n_end, bf16* s, bf16* p,
                            float* row_max, float* row_inv_sum) {
  vfloat x[MR][NV];
  float mx[MR], inv[MR];
  for (int r = 0; r < MR; ++r) {
    const int64_t i = m0 + r, m = keys_seen(i, b.t_k, b.offset);
    vfloat vmax = splat(-std::numeric_limits<float>::infinity());
    for (int v = 0; v < NV; ++v) {
      const int64_t j = v * kLanes;
      const vuint bits = bf16_bits(acc[r][v]);
      store_bits(s + i * b.t_k + j, bits, n_end - j);
      x[r][v] = scaled(b, widen(bits), i, j, n_end, m);
      vmax = vmax > x[r][v] ? vmax : x[r][v];
    }
    mx[r] = fold_max(vmax);
  }
  for (int r = 0; r < MR; ++r) {
    vfloat sum{};
    for (int v = 0; v < NV; ++v) {
      x[r][v] = shifted_exp(x[r][v], mx[r]);
      sum += x[r][v];
    }
    inv[r] = 1.0f / fold_sum(sum);
  }
  for (int r = 0; r < MR; ++r) {
    const int64_t i = m0 + r;
    for (int v = 0; v < NV; ++v) store_bf16(p + i * b.t_k + v * kLanes, x[r][v] * inv[r], n_end - v * kLanes);
    zero_from(p + i * b.t_k, n_end, b.t_k);
    row_max[i] = mx[r];
    row_inv_sum[i] = inv[r];
  }
}

// Rows m0 .. m0 + MR of the softmax's backward: acc (dp's sums) rounded to bfloat16, p recomputed from s
// and the row's max and 1 / sum, g = p (dp - sum_j p_j dp_j) into datt (when not null) and scale g into
// ds, 0 up to t_k (attention_softmax_backward's arithmetic), step by step over the rows.
template <int MR, int NV>
POSLAB_AI void softmax_backward_rows(const AttentionBlock& b, int64_t m0, __m512 (&acc)[MR][NV], int64_t n_end,
                                     const bf16* s, const float* row_max, const float* row_inv_sum, bf16* ds,
                                     float* datt) {
  vfloat pv[MR][NV];
  float dot[MR];
  for (int r = 0; r < MR; ++r) {
    const int64_t i = m0 + r, m = keys_seen(i, b.t_k, b.offset);
    vfloat vdot{};
    for (int v = 0; v < NV; ++v) {
      const int64_t j = v * kLanes;
      pv[r][v] = shifted_exp(scaled(b, load_first(s + i * b.t_k + j, n_end - j), i, j, n_end, m), row_max[i]) *
                 row_inv_sum[i];
      acc[r][v] = _mm512_maskz_mov_ps(first(n_end - j), (__m512)widen(bf16_bits(acc[r][v])));  // dp, as rounded
      vdot += pv[r][v] * (vfloat)acc[r][v];
    }
    dot[r] = fold_sum(vdot);
  }
  for (int r = 0; r < MR; ++r) {
    const int64_t i = m0 + r;
    for (int v = 0; v < NV; ++v) {
      const int64_t j = v * kLanes;
      const vfloat g = pv[r][v] * ((vfloat)acc[r][v] - dot[r]);
      if (datt != nullptr) _mm512_mask_storeu_ps(datt + i * b.t_k + j, first(n_end - j), (__m512)g);
      store_bf16(ds + i * b.t_k + j, g * b.scale, n_end - j);
    }
    zero_from(ds + i * b.t_k, n_end, b.t_k);
    if (datt != nullptr) zero_from(datt + i * b.t_k, n_end, b.t_k);
  }
}

// s, p and the rows' stats from q and kt (k packed by pack_pairs_of_cols), t_k <= kTileKeys.
void scores_and_softmax(const AttentionBlock& b, const uint32_t* kt, int64_t ldb, bf16* s, bf16* p, float* row_max,
                        float* row_inv_sum) {
  const RowPairs q{b.q, b.q_stride, b.hs};
  for (int64_t m0 = 0; m0 < b.t_q; m0 += 4) {
    const int mr = static_cast<int>(std::min<int64_t>(4, b.t_q - m0));
    const int64_t n_end = score_columns(b, m0 + mr);
    with_tile(mr, static_cast<int>((n_end + kLanes - 1) / kLanes), [&](auto MR, auto NV) {
      __m512 acc[MR][NV];
      tile_sums<MR, NV>(q, m0, 0, b.hs / 2, kt, ldb, 0, acc);
      softmax_rows<MR, NV>(b, m0, acc, n_end, s, p, row_max, row_inv_sum);
    });
  }
}

// ds (and datt) from dy, vt (v packed by pack_pairs_of_cols) and what the forward saved, t_k <= kTileKeys.
void scores_backward(const AttentionBlock& b, const bf16* dy, int64_t dy_stride, const uint32_t* vt, int64_t ldb,
                     const bf16* s, const float* row_max, const float* row_inv_sum, bf16* ds, float* datt) {
  const RowPairs a{dy, dy_stride, b.hs};
  for (int64_t m0 = 0; m0 < b.t_q; m0 += 4) {
    const int mr = static_cast<int>(std::min<int64_t>(4, b.t_q - m0));
    const int64_t n_end = score_columns(b, m0 + mr);
    with_tile(mr, static_cast<int>((n_end + kLanes - 1) / kLanes), [&](auto MR, auto NV) {
      __m512 acc[MR][NV];
      tile_sums<MR, NV>(a, m0, 0, b.hs / 2, vt, ldb, 0, acc);
      softmax_backward_rows<MR, NV>(b, m0, acc, n_end, s, row_max, row_inv_sum, ds, datt);
    });
  }
}

void forward_block(const AttentionBlock& b, Scratch& sc, bf16* s, bf16* p, float* row_max, float* row_inv_sum, bf16* y,
                   int64_t y_stride) {
  const int64_t tk16 = round_up(b.t_k, kLanes), hs16 = round_up(b.hs, kLanes), kp = (b.t_k + 1) / 2;
  uint32_t* kt = sized(sc.a, b.hs / 2 * tk16);
  pack_pairs_of_cols(b.k, b.k_stride, b.t_k, b.hs, tk16, kt);
  if (b.t_k <= kTileKeys) {
    scores_and_softmax(b, kt, tk16, s, p, row_max, row_inv_sum);
  } else {
    product(RowPairs{b.q, b.q_stride, b.hs}, b.t_q, kt, tk16, s, b.t_k,
            [&](int64_t, int64_t m1) { return Span{score_columns(b, m1), 0, b.hs / 2}; });
    attention_softmax_forward(s, b.mask, b.mask_stride, b.t_q, b.t_k, b.offset, b.scale, p, row_max, row_inv_sum,
                              sized(sc.row, b.t_k));
  }
  uint32_t* vp = sized(sc.b, kp * hs16);
  pack_pairs_of_rows(b.v, b.v_stride, b.t_k, b.hs, hs16, vp);
  product(RowPairs{p, b.t_k, b.t_k}, b.t_q, vp, hs16, y, y_stride,
          [&](int64_t, int64_t m1) { return Span{b.hs, 0, key_pairs(b, m1)}; });
}

void backward_block(const AttentionBlock& b, Scratch& sc, const bf16* s, const bf16* p, const float* row_max,
                    const float* row_inv_sum, const bf16* dy, int64_t dy_stride, bf16* dq, int64_t dq_stride, bf16* dk,
                    int64_t dk_stride, bf16* dv, int64_t dv_stride, float* datt) {
  const int64_t tk16 = round_up(b.t_k, kLanes), hs16 = round_up(b.hs, kLanes), kp = (b.t_k + 1) / 2,
                qp = (b.t_q + 1) / 2, n = b.t_q * b.t_k;
  // dp = dy v^T, on the columns the softmax's backward reads
  uint32_t* vt = sized(sc.a, b.hs / 2 * tk16);
  pack_pairs_of_cols(b.v, b.v_stride, b.t_k, b.hs, tk16, vt);
  bf16* ds = sized(sc.ds, n);
  if (b.t_k <= kTileKeys) {
    scores_backward(b, dy, dy_stride, vt, tk16, s, row_max, row_inv_sum, ds, datt);
  } else {
    bf16* dp = sized(sc.dp, n);
    product(RowPairs{dy, dy_stride, b.hs}, b.t_q, vt, tk16, dp, b.t_k,
            [&](int64_t, int64_t m1) { return Span{score_columns(b, m1), 0, b.hs / 2}; });
    attention_softmax_backward(s, b.mask, b.mask_stride, row_max, row_inv_sum, dp, b.t_q, b.t_k, b.offset, b.scale, ds,
                               datt, sized(sc.row, b.t_k));
  }
  // dq = ds k
  uint32_t* kr = sized(sc.b, kp * hs16);
  pack_pairs_of_rows(b.k, b.k_stride, b.t_k, b.hs, hs16, kr);
  product(RowPairs{ds, b.t_k, b.t_k}, b.t_q, kr, hs16, dq, dq_stride,
          [&](int64_t, int64_t m1) { return Span{b.hs, 0, key_pairs(b, m1)}; });
  // dk = ds^T q and dv = p^T dy: key j is weighed by queries i >= j - offset only
  const auto queries = [&](int64_t m0, int64_t) { return Span{b.hs, std::max<int64_t>(0, m0 - b.offset) / 2, qp}; };
  uint32_t* at = sized(sc.c, qp * tk16);
  uint32_t* br = sized(sc.d, qp * hs16);
  pack_pairs_of_rows(ds, b.t_k, b.t_q, b.t_k, tk16, at);
  pack_pairs_of_rows(b.q, b.q_stride, b.t_q, b.hs, hs16, br);
  product(PackedPairs{at, tk16}, b.t_k, br, hs16, dk, dk_stride, queries);
  pack_pairs_of_rows(p, b.t_k, b.t_q, b.t_k, tk16, at);
  pack_pairs_of_rows(dy, dy_stride, b.t_q, b.hs, hs16, br);
  product(PackedPairs{at, tk16}, b.t_k, br, hs16, dv, dv_stride, queries);
}

}  // namespace
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

bool bf16_attention_blocks_available() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512bf16");
  return ok;
}

void attention_block_forward(const AttentionBlock& b, bf16* s, bf16* p, float* row_max, float* row_inv_sum, bf16* y,
                             int64_t y_stride) {
  forward_block(b, scratch(), s, p, row_max, row_inv_sum, y, y_stride);
}

void attention_block_backward(const AttentionBlock& b, const bf16* s, const bf16* p, const float* row_max,
                              const float* row_inv_sum, const bf16* dy, int64_t dy_stride, bf16* dq, int64_t dq_stride,
                              bf16* dk, int64_t dk_stride, bf16* dv, int64_t dv_stride, float* datt) {
  backward_block(b, scratch(), s, p, row_max, row_inv_sum, dy, dy_stride, dq, dq_stride, dk, dk_stride, dv, dv_stride,
                 datt);
}

#else

bool bf16_attention_blocks_available() { return false; }
void attention_block_forward(const AttentionBlock&, bf16*, bf16*, float*, float*, bf16*, int64_t) {}
void attention_block_backward(const AttentionBlock&, const bf16*, const bf16*, const float*, const float*, const bf16*,
                              int64_t, bf16*, int64_t, bf16*, int64_t, bf16*, int64_t, float*) {}

#endif

}  // namespace poslab::kernels
