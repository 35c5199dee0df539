#!/usr/bin/env python3
"""moe_ye_bf16.py: the error of keeping the routed experts' outputs ye in bf16 (docs/model/runtime.md, the
activation dtype) on latent_moe's CUDA tensor-core path, emulated on the CPU with numpy.

The same math as the kernels at Kimi-Linear widths (d 2304, I 1024, K 8 of E 16 experts, T 256 tokens, routing
weights renormalized to 2.446): bf16 x and weights, fp32 sums (float32 matmuls), H = bf16(SiLU(g) * u), ye = H W2^T
in fp32, then ye kept f32 or rounded to bf16 (round to nearest even, as __floats2bfloat162_rn), the combine
sum_k w_k ye_k in fp32. Prints the relative RMS error ||got - ref|| / ||ref|| of the MoE output against
  - an fp64 evaluation of the same math with H rounded to bf16 (what the kernels' fp32 sums approximate), and
  - the fp64 MoE without any rounding of H (what the fp64 oracle of the tests computes),
and, for scale, the error of rounding the output itself to bf16 once.
  moe_ye_bf16.py [--tokens 256] [--seed 0]
"""
import argparse

import numpy as np


def bf16(a):
    """Round float32 values to the nearest bf16 (ties to even), returned as float32."""
    b = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32)


def rel_rms(got, ref):
    return float(np.sqrt(((got - ref) ** 2).sum() / (ref ** 2).sum()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t_count, d, inter, k, e_count = args.tokens, 2304, 1024, 8, 16
    x = bf16(rng.uniform(-1, 1, (t_count, d)))  # [T, d]
    aw, ad = np.sqrt(3 / d), np.sqrt(3 / inter)
    w1 = bf16(rng.uniform(-aw, aw, (e_count, inter, d)))  # [E, I, d]
    w3 = bf16(rng.uniform(-aw, aw, (e_count, inter, d)))  # [E, I, d]
    w2 = bf16(rng.uniform(-ad, ad, (e_count, d, inter)))  # [E, d, I]
    ids = np.array([rng.choice(e_count, k, replace=False) for _ in range(t_count)])  # [T, K]
    w = rng.uniform(0, 1, (t_count, k))
    w = (w / w.sum(1, keepdims=True) * 2.446).astype(np.float32)  # [T, K]

    def silu(g):
        return g / (1 + np.exp(-g))

    out32 = np.zeros((t_count, d), np.float32)
    out16 = np.zeros((t_count, d), np.float32)
    ref_h = np.zeros((t_count, d))
    ref64 = np.zeros((t_count, d))
    for e in range(e_count):
        rows = np.nonzero(ids == e)
        t = rows[0]
        if len(t) == 0:
            continue
        xe = x[t]  # [n, d]
        h = bf16(silu(xe @ w1[e].T) * (xe @ w3[e].T))  # [n, I]: fp32 sums, one rounding
        ye = (h @ w2[e].T).astype(np.float32)  # [n, d] fp32 sums
        we = w[rows][:, None]
        np.add.at(out32, t, we * ye)
        np.add.at(out16, t, we * bf16(ye))
        x64 = xe.astype(np.float64)
        g64, u64 = x64 @ w1[e].T.astype(np.float64), x64 @ w3[e].T.astype(np.float64)
        h64 = silu(g64) * u64
        w2e = w2[e].T.astype(np.float64)
        np.add.at(ref_h, t, we.astype(np.float64) * (bf16(h64.astype(np.float32)).astype(np.float64) @ w2e))
        np.add.at(ref64, t, we.astype(np.float64) * (h64 @ w2e))
    print(f"against fp64 with H rounded:  ye f32 {rel_rms(out32, ref_h):.3e}  ye bf16 {rel_rms(out16, ref_h):.3e}")
    print(f"against the fp64 MoE:         ye f32 {rel_rms(out32, ref64):.3e}  ye bf16 {rel_rms(out16, ref64):.3e}")
    print(f"one bf16 rounding of the output, against the fp64 MoE: {rel_rms(bf16(out32), ref64):.3e}")


if __name__ == "__main__":
    main()
