#!/usr/bin/env python3
"""Checks the twin's positional formulas against textbook definitions written independently
(plain Python loops / complex numbers in float64, and the ALiBi authors' get_slopes).

check_parity.py shows that poslab and the twin agree; this shows that what they agree on is the
published encoding. Exit 0 pass, 1 fail, 77 when torch is missing.

    /usr/bin/python3 scripts/reference/check_formulas.py
"""
import math
import os
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import poslab_ref as ref  # noqa: E402

failures = []


def check(name, ok, detail=""):
    print(f"  {name:<52} {'ok' if ok else 'FAIL'} {detail}")
    if not ok:
        failures.append(name)


def max_diff(a, b):
    return (torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)).abs().max().item()


# ALiBi: the authors' reference code (github.com/ofirpress/attention_with_linear_biases).
def press_get_slopes(n):
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + press_get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]


def main():
    print("textbook formulas vs poslab_ref (float64 unless stated)")
    # Sinusoidal (Vaswani et al. 2017): PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(...).
    for n, d, base in [(300, 64, 10000.0), (50, 10, 500.0)]:
        want = [[(math.sin if c % 2 == 0 else math.cos)(p / base ** ((c - c % 2) / d)) for c in range(d)]
                for p in range(n)]
        got = ref.sinusoidal_table(n, d, base)
        err = max_diff(got, want)
        check(f"sinusoidal n={n} d={d} base={base:g}", err <= 1e-6, f"max err {err:.1e} (fp32 rounding)")

    # Binary: component k < bits is bit k of p (LSB first), +-1 or 0/1; the rest zero.
    for bits, signed in [(5, True), (16, False)]:
        n, d = 70, 20
        want = [[(((p >> k) & 1) * (2 if signed else 1) - (1 if signed else 0)) if k < bits else 0 for k in range(d)]
                for p in range(n)]
        check(f"binary bits={bits} signed={signed}", torch.equal(ref.binary_table(n, d, bits, signed),
                                                                   torch.tensor(want, dtype=torch.float32)))

    # RoPE (Su et al. 2021), interleaved pairs: (x_2i + i x_2i+1) * exp(i p theta_i), theta_i = base^(-2i/hs).
    g = torch.Generator().manual_seed(0)
    for hs, base, T in [(16, 10000.0, 40), (8, 500.0, 300)]:
        x = torch.randn(2, 3, T, hs, generator=g, dtype=torch.float64)
        theta = torch.tensor([base ** (-2 * i / hs) for i in range(hs // 2)], dtype=torch.float64)
        rot = torch.polar(torch.ones(T, hs // 2, dtype=torch.float64), torch.arange(T, dtype=torch.float64)[:, None] * theta)
        want = torch.view_as_real(torch.view_as_complex(x.reshape(2, 3, T, hs // 2, 2).contiguous()) * rot).reshape(x.shape)
        angles = ref.rope_angles(T, hs, base)
        err = max_diff(angles, torch.arange(T)[:, None] * theta)
        check(f"rope angles hs={hs} base={base:g}", err <= 1e-12 * T, f"max err {err:.1e}")
        got = ref.apply_rotary(x, angles.cos(), angles.sin())
        err = max_diff(got, want)
        check(f"rope rotation hs={hs} base={base:g} T={T}", err <= 1e-12, f"max err {err:.1e}")
        # The point of RoPE: <R(p) q, R(s) k> depends only on p - s.
        q, k = x[0, 0, :1].expand(T, hs), x[0, 1, :1].expand(T, hs)
        rq, rk = ref.apply_rotary(q, angles.cos(), angles.sin()), ref.apply_rotary(k, angles.cos(), angles.sin())
        dots = [(rq[p] * rk[p - 3]).sum().item() for p in range(3, T)]
        check(f"rope relative: <q_p, k_p-3> constant over p (hs={hs})", max(dots) - min(dots) <= 1e-9,
              f"spread {max(dots) - min(dots):.1e}")

    # ALiBi slopes (Press et al. 2022), including non-powers of two.
    for n in range(1, 33):
        err = max(abs(a - b) / b for a, b in zip(ref.alibi_slopes(n), press_get_slopes(n)))
        if len(ref.alibi_slopes(n)) != n or err > 1e-14:
            check(f"alibi slopes n_head={n}", False, f"rel err {err:.1e}")
    check("alibi slopes n_head=1..32 vs the authors' get_slopes", True)
    check("alibi slopes n_head=8 are 1/2, 1/4, ..., 1/256",
          ref.alibi_slopes(8) == [2.0 ** -(i + 1) for i in range(8)])
    # ALiBi bias: -m_h * (i - j) for key j <= query i.
    slopes = ref.alibi_slopes(6)
    b = ref.alibi_bias(slopes, torch.arange(7), torch.arange(7))
    want = [[[-float(torch.tensor(m, dtype=torch.float32)) * (i - j) for j in range(7)] for i in range(7)] for m in slopes]
    check("alibi bias (H=6, T=7)", max_diff(b, want) <= 1e-6, f"max err {max_diff(b, want):.1e}")

    # Index: x + scale * p on every component; learned: a table lookup.
    e = ref.IndexEncoding(0.5)
    out = e.embed(torch.zeros(1, 5, 3), torch.arange(5))
    check("index: x + scale*p", torch.equal(out[0], torch.arange(5.0)[:, None].expand(5, 3) * 0.5))

    # T5 causal buckets (num_buckets 32, max_distance 128), worked out by hand from HF's formula.
    d = torch.tensor([0, 1, 5, 15, 16, 20, 50, 127, 128, 500])
    check("t5 buckets", ref.t5_bucket(d, 32, 128).tolist() == [0, 1, 5, 15, 16, 17, 24, 31, 31, 31])
    # xPos zeta_k = (2k + 0.4 D) / (1.4 D); Sandwich is 0 at distance 0 and <= 0 elsewhere.
    check("xpos zeta (D=8)", max_diff(ref.xpos_zeta(8), [(2 * k + 3.2) / 11.2 for k in range(4)]) <= 1e-15)
    sw = ref.SandwichBias(4, 8, 10000.0).bias(torch.arange(50), torch.arange(50))
    check("sandwich bias(0) = 0, <= 0", bool((sw.diagonal(dim1=1, dim2=2) == 0).all() and (sw <= 1e-7).all()))

    # The model: causal (future tokens do not change past logits), for every kind.
    for kind in ref.ENCODING_KINDS:
        torch.manual_seed(0)
        m = ref.GPT({"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 16, "pos_encoding": {"kind": kind}},
                    vocab_size=11).eval()
        idx = torch.randint(0, 11, (2, 12))
        idx2 = idx.clone()
        idx2[:, 8:] = (idx2[:, 8:] + 1) % 11
        with torch.no_grad():
            a, b2 = m(idx)[:, :8], m(idx2)[:, :8]
        check(f"causal: {kind}", torch.allclose(a, b2, atol=1e-6))
    print(f"formulas: {'PASS' if not failures else 'FAIL (' + ', '.join(failures) + ')'}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
