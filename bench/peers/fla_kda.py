"""FLA 0.6 peer for bench/cuda/bench_kda_decode.cpp: the same shapes and options (bf16 q/k/v, raw gate with
the fused bounded gate (lower_bound -5), raw beta with sigmoid in kernel, L2 norm in kernel, fp32 state,
initial and final state), timed with CUDA events, median of 100 after 20 warm-ups."""
import torch
from fla.ops.kda import fused_recurrent_kda


def run(B, T, H, K, V, v_first):
    torch.manual_seed(42)
    dev = "cuda"
    q = torch.empty(B, T, H, K, device=dev, dtype=torch.bfloat16).uniform_(-1, 1)
    k = torch.empty(B, T, H, K, device=dev, dtype=torch.bfloat16).uniform_(-1, 1)
    v = torch.empty(B, T, H, V, device=dev, dtype=torch.bfloat16).uniform_(-1, 1)
    g = torch.empty(B, T, H, K, device=dev, dtype=torch.bfloat16).uniform_(-8, 8)
    beta = torch.empty(B, T, H, device=dev, dtype=torch.bfloat16).uniform_(-4, 4)
    A_log = torch.empty(H, device=dev, dtype=torch.float32).uniform_(-2, 1)
    dt_bias = torch.empty(H * K, device=dev, dtype=torch.float32).uniform_(-2, 2)
    shape = (B, H, V, K) if v_first else (B, H, K, V)
    s = torch.empty(shape, device=dev, dtype=torch.float32).uniform_(-0.1, 0.1)

    def call():
        return fused_recurrent_kda(q, k, v, g, beta, A_log=A_log, dt_bias=dt_bias, initial_state=s,
                                   output_final_state=True, use_qk_l2norm_in_kernel=True,
                                   use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                                   lower_bound=-5.0, state_v_first=v_first)

    for _ in range(20):
        call()
    ts = []
    for _ in range(100):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        call()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    ts.sort()
    med = ts[len(ts) // 2]
    tbs = B * H * K * V * 4 * 2 / (med * 1e-3) / 1e12
    print(f"fla  fused_recurrent_kda B={B} T={T} H={H} K={K} V={V} layout={'vk' if v_first else 'kv'}  "
          f"{med:.4f} ms  state {tbs:.2f} TB/s")


if __name__ == "__main__":
    for v_first in (False, True):
        for shp in [(1, 1, 32, 128, 128), (32, 1, 32, 128, 128), (256, 1, 32, 128, 128), (1, 1, 96, 128, 128)]:
            run(*shp, v_first)
