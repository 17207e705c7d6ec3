"""Times attention forward+backward on one CPU thread: LibTorch's fused scaled_dot_product_attention
against the explicit softmax(q k^T + bias) v that poslab's model uses otherwise, in fp32 and bf16, causal
and with an additive bias, at poslab's shapes. It is why bf16 on the CPU takes the explicit path
(src/model/gpt.cpp, docs/libtorch2.md). Needs PyTorch >= 2.0: python3 scripts/libtorch2/attention_bench.py
"""
import time

import torch
import torch.nn.functional as F


def ms(fn, n):
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e3


def main():
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, B=6 H=4 head 32, forward+backward in ms")
    print(f"{'T':>4} {'dtype':9} {'fused causal':>13} {'explicit causal':>16} {'fused bias':>11} {'explicit bias':>14}")
    B, H, D = 6, 4, 32
    for T in (64, 256, 512):
        for dt in (torch.float32, torch.bfloat16):
            q, k, v = [torch.randn(B, H, T, D, dtype=dt, requires_grad=True) for _ in range(3)]
            mask = torch.full((T, T), float("-inf")).triu(1)
            bias = (torch.randn(H, T, T) + mask).to(dt)
            scale = D ** -0.5

            def fused_causal():
                F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

            def fused_bias():
                F.scaled_dot_product_attention(q, k, v, attn_mask=bias).sum().backward()

            def explicit_causal():
                att = torch.baddbmm(mask.to(dt).expand(B * H, T, T), q.reshape(B * H, T, D),
                                    k.reshape(B * H, T, D).transpose(1, 2), alpha=scale)
                att.view(B, H, T, T).softmax(-1).matmul(v).sum().backward()

            def explicit_bias():
                ((q @ k.transpose(-1, -2)) * scale + bias).softmax(-1).matmul(v).sum().backward()

            n = 10 if T < 512 else 3
            print(f"{T:4d} {str(dt)[6:]:9} {ms(fused_causal, n):13.2f} {ms(explicit_causal, n):16.2f} "
                  f"{ms(fused_bias, n):11.2f} {ms(explicit_bias, n):14.2f}")


if __name__ == "__main__":
    main()
