"""Kimi Delta Attention with FLA 0.6's forward API: ``chunk_kda`` and ``fused_recurrent_kda``.

Swap ``from fla.ops.kda import chunk_kda, fused_recurrent_kda`` for
``from kimi_cpp.ops.kda import chunk_kda, fused_recurrent_kda``: same argument names, order, defaults, layouts
and return values ``(o, final_state)``. The math (SPEC 5, include/kimi/ops/kda.h), per head, state S [K, V] fp32:

    S <- Diag(exp(g_t)) S;   S <- S + beta_t k_t (v_t - S^T k_t)^T;   o_t = S^T (scale q_t)

with q, k L2-normalized first when ``use_qk_l2norm_in_kernel`` (eps 1e-6), scale default K^-0.5.

- ``g``: the log decay [B, T, HV, K] when ``use_gate_in_kernel`` is False; with it, the RAW gate input f and
  g = -exp(A_log[h]) * softplus(f + dt_bias)  (``lower_bound`` None, Kimi-Linear), or
  g = lower_bound * sigmoid(exp(A_log[h]) * (f + dt_bias))  (``lower_bound`` set, K3; A_log None: no exp(A_log)).
- ``beta`` [B, T, HV]: beta itself, or its logit with ``use_beta_sigmoid_in_kernel`` (2*sigmoid with
  ``allow_neg_eigval``).
- States fp32 [N, HV, K, V], or [N, HV, V, K] with ``state_v_first``; N = B, or len(cu_seqlens) - 1 for a
  packed batch (B = 1). ``o`` [B, T, HV, V] in v's dtype. GVA (HV = G * H value heads): q, k head h serves
  value heads h*G .. h*G+G-1 (done by repeating q and k: a copy).

Forward only: a backward through these ops raises NotImplementedError. Arguments that would change what FLA
computes and that kimi.cpp does not do raise (NotImplementedError, or TypeError for unknown keywords); the
table in docs/python.md lists every FLA argument and what happens to it. With PyTorch importable, both run as
the torch custom op ``kimi_cpp::kda_fwd`` (torch.compile, CUDA graphs); with other frameworks (NumPy...) as
plain calls.
"""
from __future__ import annotations

import warnings

from .. import _C, _tensors
from ._kda_forward import kda_forward

__all__ = ["chunk_kda", "fused_recurrent_kda", "kda_gate", "kda_beta", "kda_forward", "kda_decode_step"]


def _run(mode, q, k, v, g, beta, **kw):
    """Dispatches to the torch custom op for torch tensors, else calls kda_forward directly."""
    if _tensors.is_torch(q):
        return _kda_torch.kda_fwd(mode, q, k, v, g, beta, **kw)
    return kda_forward(mode, q, k, v, g, beta, **kw)


def _not_supported(fn, what):
    raise NotImplementedError(f"kimi_cpp.ops.kda.{fn}: {what} is not supported by kimi.cpp (docs/python.md)")


def _unknown_kwargs(fn, kwargs):
    if kwargs:
        raise TypeError(f"kimi_cpp.ops.kda.{fn}() got unexpected keyword argument(s) {sorted(kwargs)}: kimi.cpp never "
                        "ignores an argument (docs/python.md lists FLA's and what happens to each)")


def _state_layout(fn, state_v_first, kwargs):
    # FLA 0.6: `transpose_state_layout` is the deprecated name of `state_v_first`.
    if "transpose_state_layout" in kwargs:
        if state_v_first:
            raise ValueError("Cannot pass both `state_v_first` and the deprecated `transpose_state_layout`.")
        warnings.warn("`transpose_state_layout` is deprecated and renamed to `state_v_first`.", DeprecationWarning,
                      stacklevel=3)
        state_v_first = kwargs.pop("transpose_state_layout")
    return bool(state_v_first)


def _prepare(fn, q, k, v, g, beta, scale, initial_state, cu_seqlens, use_gate_in_kernel, A_log, dt_bias,
             lower_bound, use_beta_sigmoid_in_kernel, allow_neg_eigval):
    """FLA's argument checks and conversions shared by both functions; returns the kda_forward arguments."""
    if cu_seqlens is not None:
        if q.shape[0] != 1:
            raise ValueError(f"The batch size is expected to be 1 rather than {q.shape[0]} when using `cu_seqlens`. "
                             "Please flatten variable-length inputs before processing.")
        if initial_state is not None and initial_state.shape[0] != cu_seqlens.shape[0] - 1:
            raise ValueError("The number of initial states is expected to be equal to the number of input "
                             f"sequences, i.e., {cu_seqlens.shape[0] - 1} rather than {initial_state.shape[0]}.")
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise ValueError("`allow_neg_eigval=True` requires `use_beta_sigmoid_in_kernel=True`.")
    if use_gate_in_kernel and A_log is None and lower_bound is None:
        raise ValueError("`A_log` must be provided when `use_gate_in_kernel=True` and `lower_bound` is not set.")
    if q.ndim != 4 or tuple(k.shape) != tuple(q.shape):
        raise ValueError(f"q and k must have the same shape [B, T, H, K], got q={list(q.shape)} vs k={list(k.shape)}")
    if v.ndim != 4:
        raise ValueError(f"v must have shape [B, T, HV, V], got {list(v.shape)}")
    B, T, H, K = q.shape
    HV = v.shape[2]
    if HV % H != 0:
        raise ValueError(f"For GVA, num_v_heads (HV={HV}) must be evenly divisible by num_qk_heads (H={H}), "
                         f"but got HV % H = {HV % H}")
    if tuple(g.shape) != (B, T, HV, K):
        raise ValueError(f"g must have shape [B, T, HV, K]={[B, T, HV, K]}, got {list(g.shape)}")
    if beta.ndim == v.ndim:
        _not_supported(fn, "a head-wise beta [B, T, HV, V]")
    if tuple(beta.shape) != (B, T, HV):
        raise ValueError(f"beta must have shape [B, T, HV]={[B, T, HV]}, got {list(beta.shape)}")

    if HV != H:  # GVA
        q, k = _tensors.repeat_heads(q, HV // H), _tensors.repeat_heads(k, HV // H)
    q, k, v, g = (_tensors.inner_contiguous(x) for x in (q, k, v, g))

    kw = dict(scale=K ** -0.5 if scale is None else float(scale), initial_state=initial_state, cu_seqlens=cu_seqlens)
    if use_gate_in_kernel:
        kw["gate"] = "softplus" if lower_bound is None else "bounded"
        kw["lower_bound"] = lower_bound
        # FLA without A_log (bounded form only): lower_bound * sigmoid(f + dt_bias), i.e. exp(A_log) = 1.
        kw["A_log"] = _tensors.zeros(q, (HV,), "float32") if A_log is None else _tensors.f32_flat(A_log)[:HV]
        kw["dt_bias"] = _tensors.zeros(q, (HV * K,), "float32") if dt_bias is None else _tensors.f32_flat(dt_bias)
    if use_beta_sigmoid_in_kernel and allow_neg_eigval:
        beta = _tensors.two_sigmoid(beta)  # 2 * sigmoid(beta), then used as beta
    else:
        kw["beta_sigmoid"] = bool(use_beta_sigmoid_in_kernel)
    return q, k, v, g, beta, kw


def chunk_kda(q, k, v, g, beta, scale: float | None = None, initial_state=None, output_final_state: bool = False,
              use_qk_l2norm_in_kernel: bool = False, use_gate_in_kernel: bool = False,
              use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False, safe_gate: bool = False,
              lower_bound: float | None = None, disable_recompute: bool = False,
              return_intermediate_states: bool = False, state_v_first: bool = False, cu_seqlens=None,
              cu_seqlens_cpu=None, cp_context=None, use_graph: bool = False, max_num_seqs: int | None = None,
              **kwargs):
    r"""Chunkwise KDA forward (prefill), FLA 0.6's ``chunk_kda`` signature and semantics.

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, HV, V]`` (HV = G * H: GVA); g: ``[B, T, HV, K]`` log decay, or the raw
            gate input with ``use_gate_in_kernel``; beta: ``[B, T, HV]``. f32 / bf16 / f16, on one device.
        scale: default ``K ** -0.5``.
        initial_state: fp32 ``[N, HV, K, V]`` (``[N, HV, V, K]`` with ``state_v_first``).
        output_final_state: return the final state (fp32, same layout), else None.
        use_qk_l2norm_in_kernel: L2-normalize q and k over K (eps 1e-6).
        use_gate_in_kernel: g is the raw gate input f; pass ``A_log`` ``[HV]`` and ``dt_bias`` ``[HV*K]`` as
            keywords. ``lower_bound`` None: ``-exp(A_log) * softplus(f + dt_bias)``; set:
            ``lower_bound * sigmoid(exp(A_log) * (f + dt_bias))`` (A_log may then be None).
        use_beta_sigmoid_in_kernel: beta is a logit (``sigmoid(beta)``; ``2 * sigmoid(beta)`` with
            ``allow_neg_eigval``).
        safe_gate: validated as FLA does (with use_gate_in_kernel: lower_bound in [-5, 0)); no other effect here
            (kimi.cpp picks its tensor-core path itself).
        disable_recompute: accepted, no effect (it only changes what FLA saves for a backward pass).
        state_v_first: states ``[N, HV, V, K]``.
        cu_seqlens: int32/int64 ``[N+1]`` offsets of a packed batch (B = 1); read on the host (a device tensor is
            copied: pass ``cu_seqlens_cpu`` too to avoid that synchronization).
        chunk_size (keyword): 32 or 64 as in FLA (the CUDA backend always uses 64; the result is the same up to
            rounding).
        return_intermediate_states, cp_context, use_graph, max_num_seqs: not supported (NotImplementedError).

    Returns:
        ``(o, final_state)``: o ``[B, T, HV, V]`` in v's dtype; final_state fp32 or None.
    """
    fn = "chunk_kda"
    state_v_first = _state_layout(fn, state_v_first, kwargs)
    A_log, dt_bias = kwargs.pop("A_log", None), kwargs.pop("dt_bias", None)
    chunk_size = kwargs.pop("chunk_size", 64)
    _unknown_kwargs(fn, kwargs)
    if return_intermediate_states:
        _not_supported(fn, "return_intermediate_states=True (per-chunk states)")
    if cp_context is not None:
        _not_supported(fn, "cp_context (context parallelism)")
    if use_graph or max_num_seqs is not None:
        _not_supported(fn, "use_graph / max_num_seqs (cu_seqlens is read on the host at call time: a CUDA graph "
                       "replays the captured lengths; capture with fixed cu_seqlens works without use_graph)")
    if chunk_size not in (32, 64):
        raise ValueError(f"`chunk_size` must be either 32 or 64 for KDA, got {chunk_size}.")
    if safe_gate and use_gate_in_kernel:
        if lower_bound is None:
            raise ValueError("`lower_bound` must be specified when `safe_gate=True` and `use_gate_in_kernel=True`.")
        if not (-5 <= lower_bound < 0):
            raise ValueError(f"`lower_bound` must be in the safe range [-5, 0), got {lower_bound}.")
    del disable_recompute  # training memory only
    q, k, v, g, beta, kw = _prepare(fn, q, k, v, g, beta, scale, initial_state, cu_seqlens, use_gate_in_kernel,
                                    A_log, dt_bias, lower_bound, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    if cu_seqlens is not None and cu_seqlens_cpu is not None:
        kw["cu_seqlens"] = cu_seqlens_cpu  # FLA's host copy of the same offsets: no device-to-host copy
    return _run("chunk", q, k, v, g, beta, qk_l2norm=use_qk_l2norm_in_kernel, output_final_state=output_final_state,
                state_v_first=state_v_first, chunk_size=chunk_size, **kw)


def fused_recurrent_kda(q, k, v, g, beta, A_log=None, dt_bias=None, scale: float | None = None, initial_state=None,
                        output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
                        use_gate_in_kernel: bool = False, use_beta_sigmoid_in_kernel: bool = False,
                        allow_neg_eigval: bool = False, lower_bound: float | None = None,
                        state_v_first: bool = False, cu_seqlens=None, **kwargs):
    r"""Token-by-token KDA forward (decode), FLA 0.6's ``fused_recurrent_kda`` signature and semantics.

    Arguments as :func:`chunk_kda` (note FLA's order: ``A_log`` and ``dt_bias`` come right after ``beta``).
    ``initial_state`` may be any float dtype (read as fp32, as in FLA); the final state is fp32. A head-wise
    beta ``[B, T, HV, V]`` is not supported (NotImplementedError).

    Returns:
        ``(o, final_state)``: o ``[B, T, HV, V]`` in v's dtype; final_state fp32 or None.
    """
    fn = "fused_recurrent_kda"
    state_v_first = _state_layout(fn, state_v_first, kwargs)
    _unknown_kwargs(fn, kwargs)
    if initial_state is not None and _tensors.dtype_name(initial_state) != "float32":
        initial_state = _tensors.to_f32(initial_state)
    q, k, v, g, beta, kw = _prepare(fn, q, k, v, g, beta, scale, initial_state, cu_seqlens, use_gate_in_kernel,
                                    A_log, dt_bias, lower_bound, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    return _run("recurrent", q, k, v, g, beta, qk_l2norm=use_qk_l2norm_in_kernel,
                output_final_state=output_final_state, state_v_first=state_v_first, **kw)


def kda_decode_step(x_q, x_k, x_v, conv_weights, conv_caches, f, b, z, *, A_log, dt_bias, o_norm, state,
                    lower_bound: float | None = None, norm_eps: float = 1e-5, scale: float | None = None,
                    state_v_first: bool = False, slots=None, out=None):
    """One decode token of a whole KDA layer for N sequences (include/kimi/ops/kda_decode.h), between the
    layer's input projections and its output projection:

        q, k, v = SiLU(conv(x_q, x_k, x_v; conv_caches[slot]))    caches shift in place
        q = l2norm(q) * scale, k = l2norm(k); g = gate(f; A_log, dt_bias); beta = sigmoid(b)
        state[slot] <- recurrence (in place);  o = S^T q
        y = RMSNorm_head(o; o_norm, norm_eps) * sigmoid(z)       (no gate when z is None)

    x_q, x_k, f [N, H*K]; x_v, z [N, H*V]; b [N, H]; conv_weights (w_q, w_k, w_v) [C, W] or [C, 1, W];
    conv_caches (c_q, c_k, c_v) pools [S, C, W-1]; A_log f32 [H]; dt_bias f32 [H*K]; o_norm [V]; state f32 pool
    [S, H, K, V] (or [S, H, V, K] with state_v_first); slots int32/int64 [N] (default row n): on the host
    (validated), or on the tensors' CUDA device, the form to capture in a CUDA graph (values must be distinct and
    in [0, S); a sequence whose slot is out of range gets NaN rows in y and leaves the pools untouched).
    lower_bound None: softplus gate (Kimi-Linear), else the bounded gate (K3). Returns y [N, H*V] (x_v's dtype).
    """
    if out is None:
        out = _tensors.empty(x_v, x_v.shape)
    (w_q, w_k, w_v), (c_q, c_k, c_v) = conv_weights, conv_caches
    form = "softplus" if lower_bound is None else "bounded"
    _C.kda_decode_step(x_q, x_k, x_v, w_q, w_k, w_v, c_q, c_k, c_v, f, form, A_log, dt_bias,
                       -5.0 if lower_bound is None else float(lower_bound), b, z, o_norm, float(norm_eps),
                       None if scale is None else float(scale), state, bool(state_v_first),
                       slots, out, _tensors.stream(x_v))
    return out


def kda_gate(f, A_log, dt_bias, lower_bound: float | None = None, out=None):
    """KDA's log-decay gate (CPU backend): g = -exp(A_log[h]) * softplus(f + dt_bias) (lower_bound None,
    Kimi-Linear), or g = lower_bound * sigmoid(exp(A_log[h]) * (f + dt_bias)) (K3).

    f [..., H, K] raw (f32/bf16/f16); A_log f32 [H]; dt_bias f32 [H*K] or [H, K]; out (optional) [..., H, K]
    any float dtype, default fp32. Returns g.
    """
    if out is None:
        out = _tensors.empty(f, f.shape, "float32")
    form = "softplus" if lower_bound is None else "bounded"
    _C.kda_gate(f, form, A_log, dt_bias, -5.0 if lower_bound is None else float(lower_bound), out,
                _tensors.stream(f))
    return out


def kda_beta(b, out=None):
    """beta = sigmoid(b) (CPU backend): b [..., H] any float dtype; out (optional) like b. Returns beta."""
    if out is None:
        out = _tensors.empty(b, b.shape)
    _C.kda_beta(b, out, _tensors.stream(b))
    return out


# The torch custom op is registered when PyTorch is importable (at import, not inside a torch.compile trace).
try:
    import torch  # noqa: F401
except ImportError:
    _kda_torch = None
else:
    from . import _kda_torch
