#!/usr/bin/env python3
"""The matmuls of one training step, alone: what the step would cost if nothing else ran.

    /usr/bin/python3 scripts/bench/step_matmuls.py [--layers 2] [--embd 128] [--tokens 768] [--vocab 86]

Every Linear of poslab's GPT (c_attn, attn c_proj, c_fc, mlp c_proj per layer, the tied head) at the
step's shapes, forward and both backward products (dX = dY W, dW = dY^T X), in bf16 on one thread,
each timed alone with its operands warm in cache (--cold N: cycling through N operand sets, as cold as
the step's activations, which come from memory); then a 1024^2 bf16 product for the peak. The ratio
is the MFU ceiling of the matmuls at these shapes (attention's batched products not included).
Runs on the torch it is started with (Debian's python3-torch is LibTorch 1.13, as poslab's build).
"""
import argparse
import time

import torch


def timed(f, n):
    for _ in range(5):
        f()
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t0) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=768, help="batch x block (the main job: 12 x 64)")
    ap.add_argument("--vocab", type=int, default=86)
    ap.add_argument("--repeats", type=int, default=300)
    ap.add_argument("--cold", type=int, default=1, help="operand sets cycled through (64: out of cache)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    B, C = a.tokens, a.embd
    shapes = [(3 * C, C), (C, C), (4 * C, C), (C, 4 * C)] * a.layers + [(a.vocab, C)]
    total_s = total_flop = 0.0
    for n_out, n_in in shapes:
        xs = [torch.randn(B, n_in).bfloat16() for _ in range(a.cold)]
        ws = [torch.randn(n_out, n_in).bfloat16() for _ in range(a.cold)]
        dys = [torch.randn(B, n_out).bfloat16() for _ in range(a.cold)]
        flop = 2.0 * B * n_in * n_out
        i = [0]

        def nxt():
            i[0] = (i[0] + 1) % a.cold
            return i[0]
        for name, f in [("forward", lambda: torch.nn.functional.linear(xs[nxt()], ws[i[0]])),
                        ("dX", lambda: torch.mm(dys[nxt()], ws[i[0]])), ("dW", lambda: torch.mm(dys[nxt()].t(), xs[i[0]]))]:
            s = timed(f, a.repeats)
            total_s += s
            total_flop += flop
            print(f"{B:5d}x{n_in:<4d} by {n_in}x{n_out:<4d} {name:7s} {s * 1e6:8.1f} us {flop / s / 1e9:7.0f} GFLOP/s")
    m = torch.randn(1024, 1024).bfloat16()
    peak = 2.0 * 1024 ** 3 / timed(lambda: torch.mm(m, m), 50) / 1e9
    rate = total_flop / total_s / 1e9
    print(f"torch {torch.__version__}, 1 thread, {a.cold} operand set(s): the step's {len(shapes) * 3} Linear products alone take "
          f"{total_s * 1e3:.2f} ms at {rate:.0f} GFLOP/s; 1024^2 bf16 peak {peak:.0f} GFLOP/s -> {100 * rate / peak:.0f}%")


if __name__ == "__main__":
    main()
