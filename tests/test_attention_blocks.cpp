// The bfloat16 attention block kernels (model/attention_block_kernels.h) on their own, without LibTorch:
// every product and the softmax against the formula in double, from the same bfloat16 operands, over
// shapes that reach each of their edges (one key, odd key counts, rows of one, two and several register
// tiles, head sizes of one pair to five vectors, rows read with strides, queries at the keys' end, masks),
// in buffers of exactly their size (the sanitizer build sees any read or write past them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/attention_block_kernels.h"

namespace {

using poslab::kernels::AttentionBlock;
using poslab::kernels::bf16;

bf16 to_bf16(float x) {  // round to nearest even (finite values only here)
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return static_cast<bf16>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
double from_bf16(bf16 h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

struct Worst {  // the largest error against the largest reference value, per output
  double err = 0, ref = 1e-12;
  void add(double want, bf16 got) {
    err = std::max(err, std::fabs(want - from_bf16(got)));
    ref = std::max(ref, std::fabs(want));
  }
  void add(double want, float got) {
    err = std::max(err, std::fabs(want - got));
    ref = std::max(ref, std::fabs(want));
  }
};

TEST(AttentionBlocks, FollowTheFormulaAndItsGradientsOnEveryShape) {
  if (!poslab::kernels::bf16_attention_blocks_available()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  int cases = 0;
  for (int tk : {1, 2, 5, 16, 17, 33, 63, 64, 65, 100, 130})
    for (int tq : {1, 3, tk})
      for (int hs : {2, 8, 16, 30, 48, 80})
        for (bool masked : {false, true}) {
          if (tq > tk) continue;
          ++cases;
          const int qs = hs + 3, ks = hs + 5, vs = hs + 1, off = tk - tq;  // rows strided, as heads in place
          std::vector<bf16> q(tq * qs), k(tk * ks), v(tk * vs), dy(tq * hs);
          for (auto* t : {&q, &k, &v, &dy})
            for (auto& x : *t) x = to_bf16(normal(gen));
          std::vector<float> mask(masked ? tq * tk : 0);
          for (auto& x : mask) x = normal(gen);
          const float scale = 0.3f;
          const AttentionBlock b{q.data(), qs, k.data(), ks, v.data(), vs, tq, tk, hs, off,
                                 masked ? mask.data() : nullptr, tk, scale};
          std::vector<bf16> s(tq * tk), p(tq * tk), y(tq * hs), dq(tq * hs), dk(tk * hs), dv(tk * hs);
          std::vector<float> row_max(tq), row_inv(tq), datt(masked ? tq * tk : 0);
          poslab::kernels::attention_block_forward(b, s.data(), p.data(), row_max.data(), row_inv.data(), y.data(), hs);
          poslab::kernels::attention_block_backward(b, s.data(), p.data(), row_max.data(), row_inv.data(), dy.data(), hs,
                                                    dq.data(), hs, dk.data(), hs, dv.data(), hs,
                                                    masked ? datt.data() : nullptr);
          // The formula: query i sees keys j < min(t_k, off + i + 1); P = softmax(scale q k^T + mask) there.
          std::vector<double> P(tq * tk, 0.0), G(tq * tk, 0.0);  // G: the scores' gradient before the scale
          Worst wy, wp, wq, wk, wv, wa;
          for (int i = 0; i < tq; ++i) {
            const int m = std::min(tk, off + i + 1);
            std::vector<double> x(m), dp(m);
            double mx = -1e300, sum = 0, dot = 0;
            for (int j = 0; j < m; ++j) {
              double d = 0, e = 0;
              for (int c = 0; c < hs; ++c) {
                d += from_bf16(q[i * qs + c]) * from_bf16(k[j * ks + c]);
                e += from_bf16(dy[i * hs + c]) * from_bf16(v[j * vs + c]);
              }
              x[j] = scale * d + (masked ? mask[i * tk + j] : 0.0);
              dp[j] = e;
              mx = std::max(mx, x[j]);
            }
            for (int j = 0; j < m; ++j) sum += std::exp(x[j] - mx);
            for (int j = 0; j < m; ++j) {
              P[i * tk + j] = std::exp(x[j] - mx) / sum;
              dot += P[i * tk + j] * dp[j];
            }
            for (int j = 0; j < m; ++j) G[i * tk + j] = P[i * tk + j] * (dp[j] - dot);
            for (int j = 0; j < tk; ++j) {
              wp.add(P[i * tk + j], p[i * tk + j]);
              if (masked) wa.add(G[i * tk + j], datt[i * tk + j]);
            }
            for (int c = 0; c < hs; ++c) {
              double o = 0, g = 0;
              for (int j = 0; j < m; ++j) {
                o += P[i * tk + j] * from_bf16(v[j * vs + c]);
                g += scale * G[i * tk + j] * from_bf16(k[j * ks + c]);
              }
              wy.add(o, y[i * hs + c]);
              wq.add(g, dq[i * hs + c]);
            }
          }
          for (int j = 0; j < tk; ++j)
            for (int c = 0; c < hs; ++c) {
              double gk = 0, gv = 0;
              for (int i = 0; i < tq; ++i) {
                gk += scale * G[i * tk + j] * from_bf16(q[i * qs + c]);
                gv += P[i * tk + j] * from_bf16(dy[i * hs + c]);
              }
              wk.add(gk, dk[j * hs + c]);
              wv.add(gv, dv[j * hs + c]);
            }
          const std::string where = "t_k=" + std::to_string(tk) + " t_q=" + std::to_string(tq) +
                                    " hs=" + std::to_string(hs) + (masked ? " masked" : "");
          // bfloat16 rounding of the operands' products (s, p, dp, ds each rounded once): a few 2^-8.
          EXPECT_LE(wp.err, 0.02 * wp.ref) << where << " p";
          EXPECT_LE(wy.err, 0.03 * wy.ref) << where << " y";
          EXPECT_LE(wq.err, 0.06 * wq.ref) << where << " dq";
          EXPECT_LE(wk.err, 0.06 * wk.ref) << where << " dk";
          EXPECT_LE(wv.err, 0.03 * wv.ref) << where << " dv";
          if (masked) EXPECT_LE(wa.err, 0.06 * wa.ref) << where << " dmask";
        }
  EXPECT_EQ(cases, 2 * 6 * (11 * 3 - 2));  // t_k = 1 and 2 give t_q = 1 twice and 3 > t_k once: 31 pairs
}

}  // namespace
