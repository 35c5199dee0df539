"""FLA 0.6 peer for bench/cuda/bench_kda_prefill.cpp: fla.ops.kda.chunk_kda on the same shapes and options
(bf16 q/k/v, raw gate with the fused bounded gate (safe_gate, lower_bound -5), raw beta with sigmoid in kernel,
L2 norm in kernel, V-first fp32 state, initial and final state, cu_seqlens int32 on the GPU for varlen;
A_log [H] and dt_bias [H*K] fp32), timed with CUDA events, median of 50 after 10 warm-ups. Prints the same
memory floor as the C++ benchmark (bytes of q, k, v, raw g, beta, o in bf16 and the state read + written, over
4.25 TB/s). Arguments: shape indices (default: all six).

FLA autotunes its Triton kernels on the first calls of each shape family (minutes on a fresh machine); with
TRITON_CACHE_DIR kept between calls (scripts/gpu/quick_ab.sh FLA=1 puts it in build/) a second call finds
the tuned configs."""
import sys

import torch
from fla.ops.kda import chunk_kda

COPY_BYTES_PER_S = 4.25e12  # BENCH.md
SHAPES = [(1, 16384, 64, False), (1, 8192, 64, False), (1, 65536, 32, False), (8, 4096, 32, True),
          (1, 65536, 8, False), (10, 819, 64, True)]


def run(nseq, T, H, varlen, K=128, V=128):
    torch.manual_seed(42)
    dev = "cuda"
    B, TT = (1, nseq * T) if varlen else (nseq, T)
    q = torch.empty(B, TT, H, K, device=dev, dtype=torch.bfloat16).uniform_(-1, 1)
    k = torch.empty(B, TT, H, K, device=dev, dtype=torch.bfloat16).uniform_(-1, 1)
    v = torch.empty(B, TT, H, V, device=dev, dtype=torch.bfloat16).uniform_(-1, 1)
    g = torch.empty(B, TT, H, K, device=dev, dtype=torch.bfloat16).uniform_(-8, 8)
    beta = torch.empty(B, TT, H, device=dev, dtype=torch.bfloat16).uniform_(-4, 4)
    A_log = torch.empty(H, device=dev, dtype=torch.float32).uniform_(-2, 1)
    dt_bias = torch.empty(H * K, device=dev, dtype=torch.float32).uniform_(-2, 2)
    s0 = torch.empty(nseq, H, V, K, device=dev, dtype=torch.float32).uniform_(-0.1, 0.1)
    cu = torch.arange(0, nseq + 1, device=dev, dtype=torch.int32) * T if varlen else None

    def call():
        return chunk_kda(q, k, v, g, beta, A_log=A_log, dt_bias=dt_bias, initial_state=s0,
                         output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                         use_beta_sigmoid_in_kernel=True, safe_gate=True, lower_bound=-5.0,
                         state_v_first=True, cu_seqlens=cu)

    for _ in range(10):
        call()
    torch.cuda.synchronize()
    ts = []
    for _ in range(50):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        call()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    ts.sort()
    med = ts[len(ts) // 2]
    tokens = nseq * T
    # q, k, raw g (3 K), v and o (2 V), beta: bf16; state fp32 read + written
    nbytes = tokens * H * (3 * K + 2 * V + 1) * 2 + nseq * H * K * V * 4 * 2
    floor_ms = nbytes / COPY_BYTES_PER_S * 1e3
    print(f"fla  chunk_kda {nseq:2d} x {T:5d}{' varlen' if varlen else '       '} H={H:2d} K=V={K} bounded bf16 vk  "
          f"{med:8.3f} ms  floor {floor_ms:.3f} ms ({100 * floor_ms / med:.1f}% of floor)")


if __name__ == "__main__":
    # optional shape indices (those of bench_kda_prefill.cpp: 0 .. 5 are these six, in the same order)
    picks = [int(a) for a in sys.argv[1:]] or range(len(SHAPES))
    for i in picks:
        run(*SHAPES[i])
