"""kimi_cpp.ops.kda: chunk_kda / fused_recurrent_kda against the fp64 recurrence of SPEC 5 (refs.kda), chunk vs
recurrent, FLA's argument handling (defaults, gates, beta, GVA, layouts, varlen, errors), the exact call lines of
FLA 0.6's docstrings, and the torch custom op (opcheck, torch.compile, forward-only autograd). CUDA cases run
where a GPU is present (conftest.DEVICES)."""
import warnings

import numpy as np
import pytest
from conftest import DEVICES, TOL, needs_torch, to_np, torch

import kimi_cpp
import refs
from kimi_cpp.ops.kda import chunk_kda, fused_recurrent_kda, kda_beta, kda_gate

pytestmark = needs_torch

FNS = {"chunk": chunk_kda, "recurrent": fused_recurrent_kda}


def make(B, T, H, K, V, dtype="float32", device="cpu", HV=None, seed=0, raw_gate=False, raw_beta=False):
    """Inputs in realistic ranges (FlashKDA's): q ~ N(0, 1), k unit rows; g = logsigmoid(U) or raw N(0, 2); beta ~ U(0, 1)."""
    HV = HV or H
    gen = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    q = torch.randn(B, T, H, K, generator=gen)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)  # bounded state growth
    v = torch.randn(B, T, HV, V, generator=gen)
    g = (torch.randn(B, T, HV, K, generator=gen) * 2) if raw_gate else torch.nn.functional.logsigmoid(
        torch.rand(B, T, HV, K, generator=gen) * 4)
    beta = torch.randn(B, T, HV, generator=gen) if raw_beta else torch.rand(B, T, HV, generator=gen)
    q, k, v = (x.to(dt) for x in (q, k, v))
    h0 = torch.randn(B, HV, K, V, generator=gen) * 0.5
    return [x.to(device) for x in (q, k, v, g, beta, h0)]


def ref_inputs(q, k, v, g, beta, HV):
    """FLA's GVA: q, k head h serves value heads h*G .. h*G+G-1."""
    G = HV // q.shape[2]
    return (np.repeat(to_np(q), G, 2), np.repeat(to_np(k), G, 2), to_np(v), to_np(g), to_np(beta))


def shape_for(device):
    # CUDA: K = V = 64 with bf16 is the tensor-core chunk path; f32 runs the fp32 recurrent kernel.
    return (2, 70, 2, 32, 24) if device == "cpu" else (2, 130, 2, 64, 64)


CASES = [
    # name, mode, dtype, options
    ("plain", "chunk", "float32", {}),
    ("plain", "recurrent", "float32", {}),
    ("l2norm_h0_state", "chunk", "float32", dict(l2norm=True, h0=True, final=True)),
    ("l2norm_h0_state", "recurrent", "float32", dict(l2norm=True, h0=True, final=True)),
    ("vk_layout", "chunk", "float32", dict(h0=True, final=True, v_first=True)),
    ("softplus_gate", "chunk", "float32", dict(gate="softplus", final=True)),
    ("softplus_gate", "recurrent", "float32", dict(gate="softplus", final=True)),
    ("bounded_gate", "chunk", "float32", dict(gate="bounded", l2norm=True, final=True)),
    ("bounded_gate_no_A", "recurrent", "float32", dict(gate="bounded_noA", final=True)),
    ("beta_logit", "chunk", "float32", dict(beta="sigmoid")),
    ("neg_eigval", "recurrent", "float32", dict(beta="neg", h0=True, final=True)),
    ("scale", "chunk", "float32", dict(scale=0.3)),
    ("gva", "chunk", "float32", dict(HV=2, h0=True, final=True)),
    ("gva", "recurrent", "float32", dict(HV=2, gate="softplus")),
    ("varlen", "chunk", "float32", dict(varlen=[5, 0, 64, 1], h0=True, final=True, l2norm=True)),
    ("varlen", "recurrent", "float32", dict(varlen=[5, 0, 64, 1], h0=True, final=True)),
    ("bf16", "chunk", "bfloat16", dict(l2norm=True, h0=True, final=True, gate="bounded")),
    ("bf16", "recurrent", "bfloat16", dict(l2norm=True, h0=True, final=True)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,mode,dtype,opt", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_against_fp64(device, name, mode, dtype, opt):
    B, T, H, K, V = shape_for(device)
    HV = H * opt.get("HV", 1)
    gate = opt.get("gate")
    q, k, v, g, beta, h0 = make(B, T, H, K, V, dtype, device, HV=HV, raw_gate=gate is not None,
                                raw_beta=opt.get("beta") is not None)
    cu = None
    if "varlen" in opt:
        lens = opt["varlen"]
        cu_list = np.concatenate([[0], np.cumsum(lens)]).tolist()
        total = cu_list[-1]
        q, k, v, g, beta = (x.reshape(1, B * T, *x.shape[2:])[:, :total] for x in (q, k, v, g, beta))
        cu = torch.tensor(cu_list, dtype=torch.int64, device=device)
        h0 = torch.randn(len(lens), HV, K, V, device=device) * 0.5
    v_first = opt.get("v_first", False)
    init = (h0.transpose(-1, -2).contiguous() if v_first else h0) if opt.get("h0") else None
    kw = dict(initial_state=init, output_final_state=opt.get("final", False), state_v_first=v_first, cu_seqlens=cu,
              use_qk_l2norm_in_kernel=opt.get("l2norm", False), scale=opt.get("scale"))
    A_log = torch.randn(HV, device=device) * 0.5
    dt_bias = torch.randn(HV * K, device=device)
    g_ref = to_np(g)
    if gate is not None:
        kw["use_gate_in_kernel"] = True
        if gate == "softplus":
            kw.update(A_log=A_log, dt_bias=dt_bias)
            g_ref = refs.kda_gate(to_np(g), to_np(A_log), to_np(dt_bias))
        elif gate == "bounded":
            kw.update(A_log=A_log, dt_bias=dt_bias, lower_bound=-5.0, safe_gate=True)
            g_ref = refs.kda_gate(to_np(g), to_np(A_log), to_np(dt_bias), -5.0)
        else:  # FLA: lower_bound without A_log is lower_bound * sigmoid(g + dt_bias)
            kw.update(dt_bias=dt_bias, lower_bound=-3.0)
            g_ref = refs.kda_gate(to_np(g), np.zeros(HV), to_np(dt_bias), -3.0)
    beta_ref = to_np(beta)
    if opt.get("beta") == "sigmoid":
        kw["use_beta_sigmoid_in_kernel"] = True
        beta_ref = refs.sigmoid(beta_ref)
    elif opt.get("beta") == "neg":
        kw.update(use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True)
        beta_ref = 2 * refs.sigmoid(beta_ref)

    o, ht = FNS[mode](q, k, v, g, beta, **kw)

    rq, rk, rv, _, _ = ref_inputs(q, k, v, g, beta, HV)
    o_ref, ht_ref = refs.kda(rq, rk, rv, g_ref, beta_ref, scale=opt.get("scale"),
                             initial_state=to_np(init) if init is not None else None, l2norm=opt.get("l2norm", False),
                             cu_seqlens=cu.tolist() if cu is not None else None, state_v_first=v_first)
    assert o.shape == v.shape and o.dtype == v.dtype and o.device == q.device
    tol = TOL[dtype]
    assert refs.rel_err(to_np(o), o_ref) <= tol
    if opt.get("final"):
        assert ht.dtype == torch.float32 and ht.shape == ht_ref.shape
        assert refs.rel_err(to_np(ht), ht_ref) <= tol
    else:
        assert ht is None


@pytest.mark.parametrize("device", DEVICES)
def test_chunk_equals_recurrent_fp32(device):
    q, k, v, g, beta, h0 = make(3, 150, 2, 64, 64, "float32", device, seed=5)
    for cs in (32, 64):
        oc, hc = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                           use_qk_l2norm_in_kernel=True, chunk_size=cs)
        orr, hr = fused_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                      use_qk_l2norm_in_kernel=True)
        assert refs.rel_err(to_np(oc), to_np(orr)) <= 1e-5
        assert refs.rel_err(to_np(hc), to_np(hr)) <= 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_prefill_then_decode_hands_off_state(device):
    q, k, v, g, beta, h0 = make(2, 40, 2, 32, 32, "float32", device, seed=7)
    o_all, h_all = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
    o_pre, h = chunk_kda(q[:, :35], k[:, :35], v[:, :35], g[:, :35], beta[:, :35], initial_state=h0,
                         output_final_state=True)
    outs = [o_pre]
    for t in range(35, 40):
        o_t, h = fused_recurrent_kda(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], g[:, t:t + 1], beta[:, t:t + 1],
                                     initial_state=h, output_final_state=True)
        outs.append(o_t)
    assert refs.rel_err(to_np(torch.cat(outs, 1)), to_np(o_all)) <= 1e-5
    assert refs.rel_err(to_np(h), to_np(h_all)) <= 1e-5


def test_numpy_inputs_match_torch_inputs():
    q, k, v, g, beta, h0 = make(2, 20, 2, 16, 8, seed=3)
    for fn in (chunk_kda, fused_recurrent_kda):
        ot, ht = fn(q, k, v, g, beta, initial_state=h0, output_final_state=True)
        on, hn = fn(*(x.numpy() for x in (q, k, v, g, beta)), initial_state=h0.numpy(), output_final_state=True)
        assert isinstance(on, np.ndarray) and isinstance(hn, np.ndarray)
        assert np.array_equal(ot.numpy(), on) and np.array_equal(ht.numpy(), hn)


def test_numpy_gate_gva_and_neg_eigval():
    q, k, v, g, beta, _ = make(1, 12, 1, 8, 8, HV=2, raw_gate=True, raw_beta=True, seed=4)
    A_log, dt_bias = np.zeros(2, np.float32), np.zeros(16, np.float32)
    args = [x.numpy() for x in (q, k, v, g, beta)]
    on, _ = fused_recurrent_kda(*args, A_log, dt_bias, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                                allow_neg_eigval=True)
    ot, _ = fused_recurrent_kda(q, k, v, g, beta, torch.from_numpy(A_log), torch.from_numpy(dt_bias),
                                use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True)
    np.testing.assert_allclose(on, ot.numpy(), rtol=1e-6, atol=1e-6)


def test_strided_inputs_without_copies_and_non_unit_last_stride():
    q, k, v, g, beta, _ = make(2, 33, 3, 16, 16, seed=9)
    ref, _ = chunk_kda(q, k, v, g, beta)
    # [B, H, T, D] storage seen as [B, T, H, D] (the layout of attention code): last dim stride 1
    qs, ks, vs, gs = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v, g))
    assert not qs.is_contiguous()
    o, _ = chunk_kda(qs, ks, vs, gs, beta)
    assert torch.equal(o, ref)
    # last dim with stride 2: made contiguous first (as FLA's input_guard does)
    qw = torch.stack([q, q], -1)[..., 0]
    assert qw.stride(-1) == 2
    o2, _ = chunk_kda(qw, k, v, g, beta)
    assert torch.equal(o2, ref)


def test_cu_seqlens_cpu_and_int32():
    q, k, v, g, beta, _ = make(1, 50, 2, 16, 16, seed=11)
    cu64 = torch.tensor([0, 20, 50])
    o1, h1 = chunk_kda(q, k, v, g, beta, cu_seqlens=cu64, output_final_state=True)
    o2, h2 = chunk_kda(q, k, v, g, beta, cu_seqlens=cu64, cu_seqlens_cpu=cu64.clone(), output_final_state=True)
    o3, h3 = chunk_kda(q, k, v, g, beta, cu_seqlens=cu64.to(torch.int32), output_final_state=True)
    assert h1.shape == (2, 2, 16, 16)
    assert torch.equal(o1, o2) and torch.equal(o1, o3) and torch.equal(h1, h3)


def test_fused_recurrent_accepts_non_fp32_initial_state():
    q, k, v, g, beta, h0 = make(1, 5, 2, 8, 8, seed=12)
    o1, h1 = fused_recurrent_kda(q, k, v, g, beta, initial_state=h0.to(torch.bfloat16), output_final_state=True)
    o2, h2 = fused_recurrent_kda(q, k, v, g, beta, initial_state=h0.to(torch.bfloat16).float(),
                                 output_final_state=True)
    assert h1.dtype == torch.float32 and torch.equal(o1, o2) and torch.equal(h1, h2)


def test_deprecated_transpose_state_layout():
    q, k, v, g, beta, h0 = make(1, 5, 2, 8, 4, seed=13)
    with pytest.warns(DeprecationWarning):
        _, h = chunk_kda(q, k, v, g, beta, output_final_state=True, transpose_state_layout=True)
    assert h.shape == (1, 2, 4, 8)
    with pytest.raises(ValueError, match="Cannot pass both"):
        chunk_kda(q, k, v, g, beta, state_v_first=True, transpose_state_layout=True)


# --- the exact call lines of FLA 0.6's docstrings (shapes scaled down: K = V = 512 exceeds FLA's own K <= 256) ---

def test_fla_docstring_chunk_kda():
    B, T, H, K, V = 2, 96, 2, 64, 64
    dev = "cpu"
    q = torch.randn(B, T, H, K, dtype=torch.bfloat16, device=dev)
    k = torch.randn(B, T, H, K, dtype=torch.bfloat16, device=dev)
    v = torch.randn(B, T, H, V, dtype=torch.bfloat16, device=dev)
    beta = torch.rand(B, T, H, dtype=torch.bfloat16, device=dev)
    g = torch.rand(B, T, H, K, dtype=torch.bfloat16, device=dev)
    h0 = torch.randn(B, H, K, V, dtype=torch.float32, device=dev)  # FLA's docstring says bf16, its code asserts fp32
    A_log = torch.randn(H, dtype=torch.float32, device=dev)
    dt_bias = torch.randn(H * K, dtype=torch.float32, device=dev)
    o, ht = chunk_kda(
        q=q,
        k=k,
        v=v,
        g=g,
        beta=beta,
        initial_state=h0,
        output_final_state=True,
        use_qk_l2norm_in_kernel=True,
        use_gate_in_kernel=True,
        A_log=A_log,
        dt_bias=dt_bias,
    )
    assert o.shape == (B, T, H, V) and o.dtype == torch.bfloat16 and ht.shape == (B, H, K, V)
    g_ref = refs.kda_gate(to_np(g), to_np(A_log), to_np(dt_bias))
    o_ref, h_ref = refs.kda(to_np(q), to_np(k), to_np(v), g_ref, to_np(beta), initial_state=to_np(h0), l2norm=True)
    assert refs.rel_err(to_np(o), o_ref) <= 5e-3 and refs.rel_err(to_np(ht), h_ref) <= 5e-3
    # GVA mode (HV > H)
    HV = 4
    v = torch.randn(B, T, HV, V, dtype=torch.bfloat16, device=dev)
    g = torch.rand(B, T, HV, K, dtype=torch.bfloat16, device=dev)
    beta = torch.rand(B, T, HV, dtype=torch.bfloat16, device=dev)
    h0 = torch.randn(B, HV, K, V, dtype=torch.float32, device=dev)
    A_log = torch.randn(HV, dtype=torch.float32, device=dev)
    dt_bias = torch.randn(HV * K, dtype=torch.float32, device=dev)
    o, ht = chunk_kda(q=q, k=k, v=v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                      use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias)
    assert o.shape == (B, T, HV, V) and ht.shape == (B, HV, K, V)
    # variable-length inputs: B = 1 and cu_seqlens
    q, k, v, beta, g = (x.reshape(1, B * T, *x.shape[2:]) for x in (q, k, v, beta, g))
    cu_seqlens = q.new_tensor([0, T, 2 * T], dtype=torch.long)
    o_var, ht_var = chunk_kda(q=q, k=k, v=v, g=g, beta=beta, initial_state=h0, output_final_state=True,
                              use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, cu_seqlens=cu_seqlens,
                              A_log=A_log, dt_bias=dt_bias)
    assert torch.equal(o_var.reshape(B, T, HV, V), o) and torch.equal(ht_var, ht)


def test_fla_docstring_fused_recurrent_kda():
    import torch.nn.functional as F

    B, T, H, HV, K, V = 2, 48, 2, 4, 32, 32
    q = torch.randn(B, T, H, K, device="cpu")
    k = F.normalize(torch.randn(B, T, H, K, device="cpu"), p=2, dim=-1)
    v = torch.randn(B, T, HV, V, device="cpu")
    g = F.logsigmoid(torch.rand(B, T, HV, K, device="cpu"))
    beta = torch.rand(B, T, HV, device="cpu").sigmoid()
    h0 = torch.randn(B, HV, K, V, device="cpu")
    o, ht = fused_recurrent_kda(
        q, k, v, g, beta,
        initial_state=h0,
        output_final_state=True
    )
    G = HV // H
    o_ref, h_ref = refs.kda(np.repeat(to_np(q), G, 2), np.repeat(to_np(k), G, 2), to_np(v), to_np(g), to_np(beta),
                            initial_state=to_np(h0))
    assert refs.rel_err(to_np(o), o_ref) <= 1e-5 and refs.rel_err(to_np(ht), h_ref) <= 1e-5
    q, k, v, g, beta = (x.reshape(1, B * T, *x.shape[2:]) for x in (q, k, v, g, beta))
    cu_seqlens = q.new_tensor([0, T, 2 * T], dtype=torch.long)
    o_var, ht_var = fused_recurrent_kda(
        q, k, v, g, beta,
        initial_state=h0,
        output_final_state=True,
        cu_seqlens=cu_seqlens
    )
    assert torch.equal(o_var.reshape(B, T, HV, V), o) and torch.equal(ht_var, ht)


# --- argument errors: FLA's own, and what kimi.cpp does not support ---------------------------------------

def test_rejected_arguments():
    q, k, v, g, beta, h0 = make(1, 8, 2, 16, 16, seed=14)
    with pytest.raises(NotImplementedError, match="return_intermediate_states"):
        chunk_kda(q, k, v, g, beta, return_intermediate_states=True)
    with pytest.raises(NotImplementedError, match="cp_context"):
        chunk_kda(q, k, v, g, beta, cp_context=object())
    with pytest.raises(NotImplementedError, match="use_graph"):
        chunk_kda(q, k, v, g, beta, use_graph=True)
    with pytest.raises(NotImplementedError, match="head-wise beta"):
        fused_recurrent_kda(q, k, v, g, beta[..., None].expand(1, 8, 2, 16))
    with pytest.raises(TypeError, match="head_first"):
        chunk_kda(q, k, v, g, beta, head_first=False)
    with pytest.raises(TypeError, match="ssm_state_indices"):
        fused_recurrent_kda(q, k, v, g, beta, ssm_state_indices=torch.zeros(1, dtype=torch.int32))
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_kda(q, k, v, g, beta, chunk_size=16)
    with pytest.raises(ValueError, match="lower_bound` must be specified"):
        chunk_kda(q, k, v, g, beta, safe_gate=True, use_gate_in_kernel=True, A_log=torch.zeros(2))
    with pytest.raises(ValueError, match="safe range"):
        chunk_kda(q, k, v, g, beta, safe_gate=True, use_gate_in_kernel=True, lower_bound=-6.0)
    with pytest.raises(ValueError, match="allow_neg_eigval"):
        fused_recurrent_kda(q, k, v, g, beta, allow_neg_eigval=True)
    with pytest.raises(ValueError, match="A_log"):
        chunk_kda(q, k, v, g, beta, use_gate_in_kernel=True)
    with pytest.raises(ValueError, match="batch size is expected to be 1"):
        chunk_kda(torch.cat([q, q]), torch.cat([k, k]), torch.cat([v, v]), torch.cat([g, g]), torch.cat([beta, beta]),
                  cu_seqlens=torch.tensor([0, 8]))
    with pytest.raises(ValueError, match="number of initial states"):
        chunk_kda(q, k, v, g, beta, initial_state=h0, cu_seqlens=torch.tensor([0, 4, 8]))
    with pytest.raises(ValueError, match="GVA"):
        chunk_kda(q, k, torch.randn(1, 8, 3, 16), g, beta)


def test_kimi_errors_name_the_argument():
    q, k, v, g, beta, h0 = make(1, 8, 2, 16, 16, seed=15)
    with pytest.raises(kimi_cpp.Error, match=r"kda_chunk_fwd: argument 'initial_state': expected dtype f32"):
        chunk_kda(q, k, v, g, beta, initial_state=h0.half())
    big = torch.randn(1, 4, 1, 300)
    with pytest.raises(kimi_cpp.Error, match=r"argument 'q': expected head dim K .* \[1, 256\]"):
        fused_recurrent_kda(big, big, torch.randn(1, 4, 1, 8), big, torch.rand(1, 4, 1))
    with pytest.raises(kimi_cpp.Error, match=r"argument 'cu_seqlens': expected last offset"):
        chunk_kda(q, k, v, g, beta, cu_seqlens=torch.tensor([0, 5]))
    with pytest.raises(kimi_cpp.Error, match=r"argument 'gate.dt_bias': expected shape \[32\], got \[5\]"):
        chunk_kda(q, k, v, g, beta, use_gate_in_kernel=True, A_log=torch.zeros(2), dt_bias=torch.zeros(5))


# --- the torch custom op ----------------------------------------------------------------------------------

def op_args(mode, final):
    q, k, v, g, beta, h0 = make(1, 20, 2, 16, 16, seed=16)
    return (mode, q, k, v, g, beta, torch.zeros(2), torch.zeros(32), h0, None, "softplus", -5.0, False, True, 0.25,
            final, False, 64)


@pytest.mark.parametrize("mode", ["chunk", "recurrent"])
@pytest.mark.parametrize("final", [True, False])
def test_opcheck(mode, final):
    from kimi_cpp.ops import _kda_torch

    torch.library.opcheck(_kda_torch._kda_fwd, op_args(mode, final),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


def test_torch_compile_fullgraph():
    q, k, v, g, beta, h0 = make(2, 30, 2, 16, 16, seed=17)

    def f(q, k, v, g, beta, h0):
        o, ht = chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True)
        o2, _ = fused_recurrent_kda(q, k, v, g, beta, initial_state=ht)
        return o * 2 + o2, ht

    eager = f(q, k, v, g, beta, h0)
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v, g, beta, h0)
    for a, b in zip(eager, compiled):
        assert torch.equal(a, b)


def test_forward_with_grad_inputs_then_backward_raises():
    q, k, v, g, beta, _ = make(1, 6, 1, 8, 8, seed=18)
    q.requires_grad_(True)
    o, _ = chunk_kda(q, k, v, g, beta)
    assert o.requires_grad
    with pytest.raises(NotImplementedError, match="forward-only"):
        o.sum().backward()
    with torch.no_grad():
        o, _ = chunk_kda(q, k, v, g, beta)
    assert not o.requires_grad


# --- kda_gate / kda_beta ------------------------------------------------------------------------------------

@pytest.mark.parametrize("lower_bound", [None, -5.0])
def test_kda_gate_and_beta(lower_bound, rng):
    f = (rng.standard_normal((3, 5, 4, 16)) * 8).astype(np.float32)   # FlashKDA's +-8 sweep
    A_log = rng.standard_normal(4).astype(np.float32)
    dt_bias = (rng.standard_normal(64) * 8).astype(np.float32)
    g = kda_gate(f, A_log, dt_bias, lower_bound)
    ref = refs.kda_gate(f, A_log, dt_bias, lower_bound)
    assert g.dtype == np.float32 and np.all(g <= 0)
    assert refs.rel_err(g, ref) <= 1e-5
    b = rng.standard_normal((3, 5, 4)).astype(np.float32)
    assert refs.rel_err(kda_beta(b), refs.sigmoid(b.astype(np.float64))) <= 1e-5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gt = kda_gate(torch.from_numpy(f), torch.from_numpy(A_log), torch.from_numpy(dt_bias), lower_bound)
    assert np.array_equal(gt.numpy(), g)


def test_kda_forward_state_slots_pool_in_place():
    """kimi's own API beyond FLA's: sequences read and write rows of a state pool (serving slots), in place."""
    from kimi_cpp.ops.kda import kda_forward

    q, k, v, g, beta, _ = make(1, 30, 2, 16, 8, seed=19)
    cu = torch.tensor([0, 12, 30])
    pool = torch.randn(5, 2, 16, 8)
    before = pool.clone()
    slots = torch.tensor([3, 1])
    o, fs = kda_forward("recurrent", q, k, v, g, beta, initial_state=pool, final_state=pool, state_slots=slots,
                        cu_seqlens=cu)
    assert fs is pool
    o_ref, h_ref = refs.kda(to_np(q), to_np(k), to_np(v), to_np(g), to_np(beta), cu_seqlens=[0, 12, 30],
                            initial_state=to_np(before[slots]))
    assert refs.rel_err(to_np(o), o_ref) <= 1e-5
    assert refs.rel_err(to_np(pool[slots]), h_ref) <= 1e-5
    assert torch.equal(pool[[0, 2, 4]], before[[0, 2, 4]])
