"""CUDA-only behaviour of the bindings (skipped without a GPU): the caller's current stream, CUDA graph capture and
replay, torch.compile with Inductor, device cu_seqlens, the CUDA backend against the CPU backend on one call,
and the errors for CPU-only ops and mixed devices. The numerics on CUDA are covered by the 'cuda' cases of
test_kda.py / test_ops.py and by test_fla.py."""
import pytest

torch = pytest.importorskip("torch")

from conftest import needs_cuda, to_np  # noqa: E402

import kimi_cpp  # noqa: E402
import refs  # noqa: E402
from kimi_cpp import ops  # noqa: E402
from kimi_cpp.ops.kda import chunk_kda, fused_recurrent_kda  # noqa: E402

pytestmark = needs_cuda


def inputs(B, T, H, D, dtype=torch.bfloat16, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(B, T, H, D, device="cuda", generator=gen).to(dtype)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, D, device="cuda", generator=gen), dim=-1).to(dtype)
    v = torch.randn(B, T, H, D, device="cuda", generator=gen).to(dtype)
    g = torch.randn(B, T, H, D, device="cuda", generator=gen)  # raw gate input
    beta = torch.randn(B, T, H, device="cuda", generator=gen)  # logits
    h0 = torch.randn(B, H, D, D, device="cuda", generator=gen) * 0.5
    A_log = torch.randn(H, device="cuda", generator=gen) * 0.5
    dt_bias = torch.randn(H * D, device="cuda", generator=gen)
    return q, k, v, g, beta, h0, A_log, dt_bias


def call(fn, q, k, v, g, beta, h0, A_log, dt_bias, **kw):
    return fn(q, k, v, g, beta, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True,
              use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias, lower_bound=-5.0,
              use_beta_sigmoid_in_kernel=True, **kw)


@pytest.mark.parametrize("fn", [chunk_kda, fused_recurrent_kda])
def test_runs_on_the_current_stream(fn):
    args = inputs(2, 100, 4, 128)
    ref = call(fn, *args)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    q_late = torch.zeros_like(args[0])
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)       # ~0.1 s of GPU time on `side` before q is written
        q_late.copy_(args[0])
        got = call(fn, q_late, *args[1:])    # must run after the copy: same stream
    side.synchronize()
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])


@pytest.mark.parametrize("fn,T", [(fused_recurrent_kda, 1), (chunk_kda, 200)])
def test_cuda_graph_capture_and_replay(fn, T):
    """Decode and fixed-length prefill capture into a CUDA graph (the chunk launcher builds its chunk table on
    the device while capturing) and replay bit-identically to eager calls on fresh inputs."""
    static = list(inputs(4, T, 4, 128, seed=1))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph
        for _ in range(2):
            call(fn, *static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call(fn, *static)
    for seed in (2, 3):
        fresh = inputs(4, T, 4, 128, seed=seed)
        for s, f in zip(static, fresh):
            s.copy_(f)
        graph.replay()
        torch.cuda.synchronize()
        ref = call(fn, *fresh)
        assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])


def test_varlen_chunk_kda_refuses_graph_capture_cleanly():
    """A varlen batch's chunk table is built on the host from cu_seqlens and uploaded with a pageable copy, which a
    CUDA graph cannot capture (on the H200 such a copy invalidated the capture and every later CUDA test failed).
    It must refuse with a clear error before touching the stream, leaving the process healthy."""
    q, k, v, g, beta, _, A_log, dt_bias = inputs(1, 300, 4, 128, seed=6)
    cu = torch.tensor([0, 100, 300])
    h0 = torch.zeros(2, 4, 128, 128, device="cuda")
    ref = call(chunk_kda, q, k, v, g, beta, h0, A_log, dt_bias, cu_seqlens=cu)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(kimi_cpp.Error, match="CUDA graph capture"):
        with torch.cuda.graph(graph):
            call(chunk_kda, q, k, v, g, beta, h0, A_log, dt_bias, cu_seqlens=cu)
    torch.randn(8, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
    again = call(chunk_kda, q, k, v, g, beta, h0, A_log, dt_bias, cu_seqlens=cu)
    torch.cuda.synchronize()
    assert torch.equal(again[0], ref[0]) and torch.equal(again[1], ref[1])


def test_torch_compile_inductor_cuda():
    args = inputs(2, 70, 4, 64, seed=4)

    def f(*a):
        o, ht = call(chunk_kda, *a)
        return torch.nn.functional.silu(o.float()) + 1, ht

    eager = f(*args)
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)(*args)
    assert torch.allclose(eager[0], compiled[0], rtol=1e-6, atol=1e-6) and torch.equal(eager[1], compiled[1])


def test_device_cu_seqlens_and_cpu_copy_agree():
    q, k, v, g, beta, _, A_log, dt_bias = inputs(1, 300, 4, 128, seed=5)
    cu = torch.tensor([0, 17, 17, 250, 300], device="cuda")
    h0 = torch.randn(4, 4, 128, 128, device="cuda")
    a = call(chunk_kda, q, k, v, g, beta, h0, A_log, dt_bias, cu_seqlens=cu)
    b = call(chunk_kda, q, k, v, g, beta, h0, A_log, dt_bias, cu_seqlens=cu, cu_seqlens_cpu=cu.cpu())
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_cuda_rms_norm_and_cpu_only_op_error():
    x = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(256, device="cuda")
    y = ops.rms_norm(x, w)
    ref = refs.rms_norm(to_np(x), to_np(w), 1e-5, round_to=lambda n: torch.from_numpy(n).to(torch.bfloat16)
                        .double().numpy())
    assert y.device == x.device and refs.rel_err(to_np(y), ref) <= 5e-3
    y2 = ops.l2_norm(x)
    assert kimi_cpp.op_supported("l2_norm", "cuda") and refs.rel_err(to_np(y2), refs.l2_norm(to_np(x))) <= 5e-3
    # An operator without a CUDA kernel names itself and the device (never falls back to the CPU).
    if not kimi_cpp.op_supported("moe_router", "cuda"):
        with pytest.raises(kimi_cpp.Error, match="moe_router: .*not implemented on the cuda"):
            ops.moe_router(torch.randn(4, 8, device="cuda"), 2)


def test_mixed_devices_rejected():
    q, k, v, g, beta, h0, A_log, dt_bias = inputs(1, 8, 2, 64, seed=6)
    with pytest.raises(kimi_cpp.Error, match="initial_state"):
        chunk_kda(q, k, v, g, beta, initial_state=h0.cpu())


@pytest.mark.parametrize("dtype,D", [(torch.float32, 128), (torch.bfloat16, 128), (torch.bfloat16, 64)])
@pytest.mark.parametrize("fn", [chunk_kda, fused_recurrent_kda])
def test_cuda_backend_matches_cpu_backend(fn, dtype, D):
    """The same call on CUDA tensors and on their CPU copies: the two backends agree within SPEC 14."""
    args = inputs(2, 150, 4, D, dtype=dtype, seed=7)
    o_gpu, h_gpu = call(fn, *args)
    o_cpu, h_cpu = call(fn, *(a.cpu() for a in args))
    tol = 1e-5 if dtype == torch.float32 else 5e-3
    assert refs.rel_err(to_np(o_gpu), to_np(o_cpu)) <= tol and refs.rel_err(to_np(h_gpu), to_np(h_cpu)) <= tol


@pytest.mark.parametrize("v_first", [False, True])
def test_kda_decode_step_cuda_host_and_device_slots_and_graph(v_first):
    """kda_decode_step on CUDA (one fused launch) against the CPU backend on the same pools: slots on the host,
    slots on the device, and the device-slot form captured into a CUDA graph and replayed on new inputs."""
    from kimi_cpp.ops.kda import kda_decode_step

    gen = torch.Generator().manual_seed(7)
    N, H, K, V, S, W = 3, 4, 128, 64, 6, 4
    P, Pv = H * K, H * V

    def rnd(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen) * scale

    def step_inputs():
        return [rnd(N, P), rnd(N, P), rnd(N, Pv), rnd(N, P, scale=4), rnd(N, H, scale=2), rnd(N, Pv)]

    w = [rnd(C, 1, W, scale=0.5) for C in (P, P, Pv)]
    A_log, dt_bias, o_norm = rnd(H, scale=0.5), rnd(P), 1 + rnd(V, scale=0.1)
    caches = [rnd(S, C, W - 1) for C in (P, P, Pv)]
    state = rnd(S, H, V, K) if v_first else rnd(S, H, K, V)
    slots = torch.tensor([4, 0, 2], dtype=torch.int64)

    params = {dev: ([t.to(dev) for t in w], A_log.to(dev), dt_bias.to(dev), o_norm.to(dev)) for dev in ("cpu", "cuda")}

    def run(dev, xs, caches, state, slots, out=None):
        x_q, x_k, x_v, f, b, z = (t.to(dev) for t in xs)
        ws, a, dtb, on = params[dev]
        return kda_decode_step(x_q, x_k, x_v, ws, caches, f, b, z, A_log=a, dt_bias=dtb, o_norm=on, state=state,
                               lower_bound=-5.0, state_v_first=v_first, slots=slots, out=out)

    steps = [step_inputs() for _ in range(3)]
    # CPU reference: three steps on CPU pools
    c_cpu, s_cpu = [c.clone() for c in caches], state.clone()
    y_cpu = [run("cpu", xs, c_cpu, s_cpu, slots) for xs in steps]

    # CUDA, slots on the host (step 0) then on the device (steps 1, 2)
    c_gpu, s_gpu = [c.cuda() for c in caches], state.cuda()
    y0 = run("cuda", steps[0], c_gpu, s_gpu, slots)
    y1 = run("cuda", steps[1], c_gpu, s_gpu, slots.cuda())
    y2 = run("cuda", steps[2], c_gpu, s_gpu, slots.cuda())
    errs = [refs.rel_err(to_np(got), to_np(ref)) for got, ref in zip((y0, y1, y2), y_cpu)]
    print(f"kda_decode_step cuda vs cpu v_first={v_first}: y errors {errs}, state "
          f"{refs.rel_err(to_np(s_gpu), to_np(s_cpu)):.2e}")
    assert max(errs) <= 1e-5
    assert refs.rel_err(to_np(s_gpu), to_np(s_cpu)) <= 1e-5
    for g, c in zip(c_gpu, c_cpu):
        assert refs.rel_err(to_np(g), to_np(c)) <= 1e-6

    # CUDA graph: capture one step with device slots on static buffers, replay the three steps
    c_g, s_g = [c.cuda() for c in caches], state.cuda()
    static = [t.cuda() for t in steps[0]]
    d_slots = slots.cuda()
    y_static = torch.empty(N, Pv, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        # one eager call first (warm-up) on copies of the pools, so that capture does not advance them
        run("cuda", static, [c.clone() for c in c_g], s_g.clone(), d_slots, out=torch.empty_like(y_static))
        with torch.cuda.graph(graph, stream=side):
            run("cuda", static, c_g, s_g, d_slots, out=y_static)
    torch.cuda.current_stream().wait_stream(side)
    for xs, ref in zip(steps, y_cpu):
        for dst, src in zip(static, xs):
            dst.copy_(src)
        graph.replay()
        assert refs.rel_err(to_np(y_static), to_np(ref)) <= 1e-5
    assert refs.rel_err(to_np(s_g), to_np(s_cpu)) <= 1e-5
