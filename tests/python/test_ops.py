"""The other operators of kimi_cpp.ops against fp64 references from SPEC.md (refs.py): norms, short conv, linear and
MXFP4, router, Quantile Balancing, GLU (SiLU / SiTU), MLP, latent MoE, AttnRes, MLA. NumPy inputs throughout (the
binding is framework-neutral; test_binding.py shows torch inputs give the same bits), bf16 through torch, and the
bad-input errors. CPU backend (rms_norm also on CUDA). Tests marked needs_torch run only where PyTorch imports
(conftest.py)."""
import numpy as np
import pytest
from conftest import DEVICES, needs_torch, to_np, torch

import kimi_cpp
import refs
from kimi_cpp import ops

F32 = 1e-5


def randn(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# --- norms ---------------------------------------------------------------------------------------------

def test_rms_norm_numpy(rng):
    x, w = randn(rng, 5, 7, 96, scale=3), randn(rng, 96)
    y = ops.rms_norm(x, w, eps=1e-6)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == x.shape
    assert refs.rel_err(y, refs.rms_norm(x, w, 1e-6)) <= F32


@needs_torch
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rms_norm(device, dtype, rng):
    dt = getattr(torch, dtype)
    x = torch.from_numpy(randn(rng, 5, 7, 96, scale=3)).to(dt).to(device)
    w = torch.from_numpy(randn(rng, 96)).to(device)
    y = ops.rms_norm(x, w, eps=1e-6)
    assert y.dtype == dt and y.device == x.device
    ref = refs.rms_norm(to_np(x), to_np(w), 1e-6, round_to=lambda n: torch.from_numpy(n).to(dt).double().numpy())
    assert refs.rel_err(to_np(y), ref) <= (F32 if dtype == "float32" else 5e-3)


def test_add_rms_norm_gated_l2(rng):
    x, r = randn(rng, 6, 64), randn(rng, 6, 64)
    w = randn(rng, 64)
    s, y = ops.add_rms_norm(x, r, w, eps=1e-5)
    assert refs.rel_err(s, x.astype(np.float64) + r) <= F32
    assert refs.rel_err(y, refs.rms_norm(x.astype(np.float64) + r, w, 1e-5)) <= F32
    o, z, wh = randn(rng, 3, 4, 32), randn(rng, 3, 4, 32), randn(rng, 32)
    assert refs.rel_err(ops.gated_rms_norm(o, z, wh, 1e-5), refs.gated_rms_norm(o, z, wh, 1e-5)) <= F32
    assert refs.rel_err(ops.gated_rms_norm(o, None, wh, 1e-5), refs.gated_rms_norm(o, None, wh, 1e-5)) <= F32
    assert refs.rel_err(ops.l2_norm(o), refs.l2_norm(o)) <= F32
    out = np.empty_like(o)
    assert ops.l2_norm(o, out=out) is out


# --- short conv -------------------------------------------------------------------------------------------

def test_short_conv_prefill_varlen_and_decode(rng):
    C, W = 24, 4
    lens = [5, 1, 9]
    x = randn(rng, 1, sum(lens), C)
    w = randn(rng, C, W)
    cache0 = randn(rng, len(lens), C, W - 1)
    cu = np.array([0, 5, 6, 15], np.int32)
    y, cache = ops.short_conv_fwd(x, w, initial_cache=cache0, output_final_cache=True, cu_seqlens=cu)
    for n in range(len(lens)):
        ys, cs = refs.short_conv(x[0, cu[n]:cu[n + 1]], w, cache0[n])
        assert refs.rel_err(y[0, cu[n]:cu[n + 1]], ys) <= F32
        assert refs.rel_err(cache[n], cs) <= F32
    # then one decode step per sequence, cache updated in place; checkpoint weight layout [C, 1, W]
    xt = randn(rng, len(lens), C)
    before = cache.copy()
    yt = ops.short_conv_update(xt, w.reshape(C, 1, W), cache)
    for n in range(len(lens)):
        ys, cs = refs.short_conv(xt[n:n + 1], w, before[n])
        assert refs.rel_err(yt[n], ys[0]) <= F32 and refs.rel_err(cache[n], cs) <= F32
    y0, none = ops.short_conv_fwd(x[:, :5], w, activation=None)
    assert none is None
    assert refs.rel_err(y0[0], refs.short_conv(x[0, :5], w, None, silu_act=False)[0]) <= F32


def test_short_conv_prefill_into_pool_slots(rng):
    C, W = 16, 4
    lens = [6, 3]
    x = randn(rng, 1, sum(lens), C)
    w = randn(rng, C, W)
    pool = randn(rng, 5, C, W - 1)
    before = pool.copy()
    slots = np.array([4, 1], np.int64)
    cu = np.array([0, 6, 9], np.int32)
    y, out = ops.short_conv_fwd(x, w, initial_cache=pool, cu_seqlens=cu, cache_slots=slots, final_cache=pool)
    assert out is pool
    for n in range(len(lens)):
        ys, cs = refs.short_conv(x[0, cu[n]:cu[n + 1]], w, before[slots[n]])
        assert refs.rel_err(y[0, cu[n]:cu[n + 1]], ys) <= F32
        assert refs.rel_err(pool[slots[n]], cs) <= F32
    assert np.array_equal(pool[[0, 2, 3]], before[[0, 2, 3]])


def test_short_conv_update_slots(rng):
    C, W = 8, 4
    pool = randn(rng, 5, C, W - 1)
    xt = randn(rng, 2, C)
    w = randn(rng, C, W)
    before = pool.copy()
    yt = ops.short_conv_update(xt, w, pool, cache_slots=np.array([3, 0], np.int64))
    for n, s in enumerate([3, 0]):
        ys, cs = refs.short_conv(xt[n:n + 1], w, before[s])
        assert refs.rel_err(yt[n], ys[0]) <= F32 and refs.rel_err(pool[s], cs) <= F32
    assert np.array_equal(pool[[1, 2, 4]], before[[1, 2, 4]])


# --- linear, MXFP4 ------------------------------------------------------------------------------------------

def test_gather_rows(rng):
    table = randn(rng, 11, 24)
    rows = np.array([3, 0, 10, 3], dtype=np.int64)
    assert np.array_equal(ops.gather_rows(table, rows), table[rows])
    y16 = ops.gather_rows(table, rows.astype(np.int32), dtype="float16")
    assert y16.dtype == np.float16 and np.array_equal(y16, table[rows].astype(np.float16))
    with pytest.raises(kimi_cpp.Error, match="'rows'"):
        ops.gather_rows(table, np.array([0, 11]))


def test_linear_dense_and_mxfp4(rng):
    x, w = randn(rng, 5, 64), randn(rng, 48, 64)
    assert refs.rel_err(ops.linear_fwd(x, w), x.astype(np.float64) @ w.T) <= F32
    y = ops.linear_fwd(x, w)
    ops.linear_fwd(x, w, out=y, accumulate=True)
    assert refs.rel_err(y, 2 * (x.astype(np.float64) @ w.T)) <= F32
    packed, scale = ops.mxfp4_quant(w)
    assert packed.dtype == np.uint8 and packed.shape == (48, 32) and scale.shape == (48, 2)
    wq = refs.mxfp4_dequant(packed, scale)
    assert np.array_equal(ops.mxfp4_dequant(packed, scale, dtype="float32"), wq.astype(np.float32))
    assert refs.rel_err(wq, w) < 0.2  # 4-bit quantization
    assert refs.rel_err(ops.linear_fwd(x, (packed, scale)), x.astype(np.float64) @ wq.T) <= F32


@needs_torch
def test_mxfp4_dequant_bf16_torch(rng):
    packed = torch.from_numpy(rng.integers(0, 256, (16, 32), dtype=np.uint8))
    scale = torch.from_numpy(rng.integers(120, 134, (16, 2), dtype=np.uint8))
    w = ops.mxfp4_dequant(packed, scale)  # default bf16: exact for these scales
    assert w.dtype == torch.bfloat16 and w.shape == (16, 64)
    assert np.array_equal(to_np(w), refs.mxfp4_dequant(packed.numpy(), scale.numpy()))


# --- MoE ----------------------------------------------------------------------------------------------------

def test_router_and_quantile_balance(rng):
    logits, bias = randn(rng, 9, 16, scale=2), randn(rng, 16, scale=0.1)
    ids, w = ops.moe_router(logits, 4, bias=bias, scaling=2.5)
    rid, rw = refs.router(logits, 4, bias, True, 2.5)
    assert ids.dtype == np.int32 and np.array_equal(ids, rid)
    assert refs.rel_err(w, rw) <= F32
    ids, w = ops.moe_router(logits, 3, renormalize=False)
    rid, rw = refs.router(logits, 3, None, False, 1.0)
    assert np.array_equal(ids, rid) and refs.rel_err(w, rw) <= F32
    scores = refs.sigmoid(randn(rng, 40, 16).astype(np.float64)).astype(np.float32)
    b = randn(rng, 16, scale=0.1)
    ref = refs.quantile_balance(scores, b, 4)
    assert ops.moe_quantile_balance(scores, b, 4) is b
    assert refs.rel_err(b, ref) <= F32 and abs(b.astype(np.float64).sum()) < 1e-5


@pytest.mark.parametrize("act", ["silu", "situ"])
def test_glu_and_mlp(act, rng):
    gate, up = randn(rng, 4, 40, scale=6), randn(rng, 4, 40, scale=30)
    h = ops.glu(gate, up, act)
    assert refs.rel_err(h, refs.glu(gate, up, act)) <= F32
    f = ops.silu_glu if act == "silu" else ops.situ_glu
    assert np.array_equal(f(gate, up), h)
    assert refs.rel_err(ops.situ_glu(gate, up, 2.0, 0.0), refs.glu(gate, up, "situ", 2.0, 0.0)) <= F32
    x, wg, wu, wd = randn(rng, 6, 32), randn(rng, 48, 32), randn(rng, 48, 32), randn(rng, 32, 48)
    assert refs.rel_err(ops.mlp(x, wg, wu, wd, act), refs.mlp(x, wg, wu, wd, act)) <= F32


@pytest.mark.parametrize("latent", [True, False])
def test_latent_moe(latent, rng):
    T, d, Dl, I, E, K = 7, 32, 16, 24, 6, 2
    x = randn(rng, T, d)
    wr = randn(rng, E, d)
    bias = randn(rng, E, scale=0.1)
    dim = Dl if latent else d
    experts = [(randn(rng, I, dim), randn(rng, I, dim), randn(rng, dim, I)) for _ in range(E)]
    shared = (randn(rng, I, d), randn(rng, I, d), randn(rng, d, I))
    kw = dict(latent_down=randn(rng, Dl, d), latent_norm=randn(rng, Dl), latent_up=randn(rng, d, Dl)) if latent else {}
    out, ids, w = ops.latent_moe(x, wr, experts, K, router_bias=bias, shared=shared, act="situ", scaling=1.5,
                                 return_routing=True, **kw)
    ref, rid, rw = refs.latent_moe(x, wr, experts, K, bias, kw.get("latent_down"), kw.get("latent_norm"),
                                   kw.get("latent_up"), shared, True, 1.5, "situ", 1e-5)
    assert np.array_equal(ids, rid) and refs.rel_err(w, rw) <= F32
    assert refs.rel_err(out, ref) <= F32
    assert np.array_equal(ops.latent_moe(x, wr, experts, K, router_bias=bias, shared=shared, act="situ",
                                         scaling=1.5, **kw), out)


# --- AttnRes, MLA ---------------------------------------------------------------------------------------------

def test_attn_res(rng):
    partial = randn(rng, 5, 64)
    blocks = [randn(rng, 5, 64, scale=s) for s in (1, 3, 0.5)]
    pw, nw = randn(rng, 64), randn(rng, 64)
    assert refs.rel_err(ops.attn_res(partial, blocks, pw, nw, 1e-6), refs.attn_res(partial, blocks, pw, nw, 1e-6)) <= F32
    assert np.array_equal(ops.attn_res(partial, [], pw, nw), partial)


def test_mla_prefill_cache_decode(rng):
    H, Dn, P, Dv, R = 3, 16, 8, 12, 20
    lens = [6, 3]
    cu = np.array([0, 6, 9], np.int64)
    q = randn(rng, 1, 9, H, Dn + P)
    latent, kpe = randn(rng, 1, 9, R), randn(rng, 1, 9, P)
    w = randn(rng, H * (Dn + Dv), R, scale=0.3)
    gate = randn(rng, 1, 9, H * Dv)
    o = ops.mla_prefill(q, latent, kpe, w, gate=gate, cu_seqlens=cu)
    assert o.shape == (1, 9, H, Dv)
    for n in range(2):
        s = slice(cu[n], cu[n + 1])
        ref = refs.mla_attend(q[0, s], latent[0, s], kpe[0, s], w, gate=gate[0, s])
        assert refs.rel_err(o[0, s], ref) <= F32
    # write both sequences into a 3-row cache pool (rows 2 and 0), then decode one more token each
    L = 8
    cache = np.zeros((3, L, R + P), np.float32)
    slots = np.array([2, 0], np.int32)
    for n in range(2):
        lat_n = np.zeros((1, lens[n], R), np.float32)
        lat_n[0] = latent[0, cu[n]:cu[n + 1]]
        pe_n = np.zeros((1, lens[n], P), np.float32)
        pe_n[0] = kpe[0, cu[n]:cu[n + 1]]
        ops.mla_cache_write(lat_n, pe_n, cache, np.array([0], np.int32), slots=slots[n:n + 1])
    new_lat, new_pe = randn(rng, 2, 1, R), randn(rng, 2, 1, P)
    ops.mla_cache_write(new_lat, new_pe, cache, np.array(lens, np.int32), slots=slots)
    qd = randn(rng, 2, H, Dn + P)
    od = ops.mla_decode(qd, cache, np.array([l + 1 for l in lens], np.int32), w, slots=slots, softmax_scale=0.2)
    for n in range(2):
        rows = cache[slots[n], :lens[n] + 1]
        ref = refs.mla_attend(qd[n:n + 1], rows[:, :R], rows[:, R:], w, scale=0.2)
        assert refs.rel_err(od[n], ref[0]) <= F32


# --- errors ----------------------------------------------------------------------------------------------------

def test_errors_name_op_argument_expected_actual(rng):
    x = randn(rng, 4, 8)
    with pytest.raises(kimi_cpp.Error, match=r"^l2_norm: argument 'y': expected shape \[4, 8\], got \[4, 9\]$"):
        kimi_cpp._C.l2_norm(x, np.empty((4, 9), np.float32))
    with pytest.raises(kimi_cpp.Error, match=r"^glu: argument 'act': expected 'silu' or 'situ', got 'gelu'$"):
        ops.glu(x, x, "gelu")
    with pytest.raises(kimi_cpp.Error, match=r"moe_router: argument"):
        ops.moe_router(x, 9)
    with pytest.raises(kimi_cpp.Error, match=r"short_conv_fwd: argument 'w'"):
        ops.short_conv_fwd(randn(rng, 1, 5, 8), randn(rng, 9, 4))
    with pytest.raises(kimi_cpp.Error, match=r"latent_moe: argument 'experts\[0\]': expected 6 arrays"):
        kimi_cpp._C.latent_moe(x, x, None, None, None, None, None, None, None, [[x]], None, 1, True, 1.0, "silu", 4.0,
                               25.0, 1e-5, x, None, None)
    with pytest.raises(ValueError, match="MXFP4 weight is a \\(packed, scale\\) pair"):
        ops.linear_fwd(x, (x, x, x))
    with pytest.raises(ValueError, match="activation"):
        ops.short_conv_fwd(randn(rng, 1, 5, 8), randn(rng, 8, 4), activation="relu")


# --- the whole-layer KDA decode step -------------------------------------------------------------------

@pytest.mark.parametrize("bounded", [False, True])
@pytest.mark.parametrize("v_first", [False, True])
def test_kda_decode_step_against_fp64(bounded, v_first, rng):
    """kda_decode_step on NumPy pools (CPU) against the fp64 references of its parts: convs on the slot rows of
    the cache pools, the recurrence on the slot rows of the state pool, the gated norm; rows outside the
    slots unchanged."""
    from kimi_cpp.ops.kda import kda_decode_step

    N, H, K, V, S, W = 3, 2, 16, 8, 6, 4
    P, Pv = H * K, H * V
    x_q, x_k, f = randn(rng, N, P), randn(rng, N, P), randn(rng, N, P, scale=4)
    x_v, z, b = randn(rng, N, Pv), randn(rng, N, Pv), randn(rng, N, H, scale=2)
    w = [randn(rng, C, 1, W, scale=0.5) for C in (P, P, Pv)]
    caches = [randn(rng, S, C, W - 1) for C in (P, P, Pv)]
    A_log, dt_bias, o_norm = randn(rng, H, scale=0.5), randn(rng, P), 1 + randn(rng, V, scale=0.1)
    state = randn(rng, S, H, V, K) if v_first else randn(rng, S, H, K, V)
    slots = np.array([4, 0, 2], dtype=np.int64)
    caches0, state0 = [c.copy() for c in caches], state.copy()

    y = kda_decode_step(x_q, x_k, x_v, w, caches, f, b, z, A_log=A_log, dt_bias=dt_bias, o_norm=o_norm, state=state,
                        lower_bound=-5.0 if bounded else None, state_v_first=v_first, slots=slots)

    qkv, new_caches = [], []
    for x, wc, c0 in zip((x_q, x_k, x_v), w, caches0):
        ys, cs = zip(*(refs.short_conv(x[n:n + 1], wc[:, 0, :], c0[slots[n]]) for n in range(N)))
        qkv.append(np.concatenate(ys)), new_caches.append(cs)
    g = refs.kda_gate(f.reshape(N, H, K), A_log, dt_bias, -5.0 if bounded else None)
    o, h = refs.kda(*(t.reshape(1, N, H, -1).transpose(1, 0, 2, 3) for t in (qkv[0], qkv[1], qkv[2])),
                    g.reshape(N, 1, H, K), refs.sigmoid(b.astype(np.float64)).reshape(N, 1, H),
                    initial_state=state0[slots], l2norm=True, state_v_first=v_first)
    y_ref = refs.gated_rms_norm(o.reshape(N, H, V), z.reshape(N, H, V), o_norm, 1e-5).reshape(N, Pv)
    assert refs.rel_err(y, y_ref) <= F32
    assert refs.rel_err(state[slots], h) <= F32
    for c, c0, cs in zip(caches, caches0, new_caches):
        assert refs.rel_err(c[slots], np.stack(cs)) <= F32
        assert np.array_equal(np.delete(c, slots, 0), np.delete(c0, slots, 0))
    assert np.array_equal(np.delete(state, slots, 0), np.delete(state0, slots, 0))
    with pytest.raises(kimi_cpp.Error, match="'slots'.*distinct"):
        kda_decode_step(x_q, x_k, x_v, w, caches, f, b, z, A_log=A_log, dt_bias=dt_bias, o_norm=o_norm, state=state,
                        state_v_first=v_first, slots=np.array([1, 1, 2]))
