"""kimi.cpp's KDA forward in its own terms, for any framework: the one function both the FLA-compatible API
(kda.py) and the torch custom op (_kda_torch.py) call. Its own module so that neither imports the other for it.
"""
from __future__ import annotations

from .. import _C, _tensors

__all__ = ["kda_forward"]


def kda_forward(mode, q, k, v, g, beta, *, gate="none", A_log=None, dt_bias=None, lower_bound=-5.0,
                beta_sigmoid=False, qk_l2norm=False, scale=None, initial_state=None, output_final_state=False,
                state_v_first=False, cu_seqlens=None, state_slots=None, final_state=None, chunk_size=64):
    """kimi.cpp's KDA forward in its own terms (no FLA argument handling), any framework.

    mode 'chunk' (kda_chunk_fwd) or 'recurrent' (kda_recurrent_fwd); gate 'none' | 'softplus' | 'bounded'
    (then g is the raw gate input and A_log f32 [H], dt_bias f32 [H*K] are required). q, k [B, T, H, K];
    v [B, T, H, V]; g [B, T, H, K]; beta [B, T, H]. cu_seqlens / state_slots are read on the host (a device
    tensor is copied there). ``final_state`` may be given (e.g. the initial_state pool itself, updated in
    place); otherwise it is allocated when ``output_final_state``. Returns (o, final_state or None).
    """
    o = _tensors.empty(v, v.shape)
    if final_state is None and output_final_state:
        N = q.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1
        if state_slots is not None and initial_state is not None:
            N = initial_state.shape[0]
        H, K, V = q.shape[2], q.shape[3], v.shape[3]
        final_state = _tensors.empty(q, (N, H, V, K) if state_v_first else (N, H, K, V), "float32")
    _C.kda_fwd(mode, q, k, v, g, beta, o, gate=gate, A_log=A_log, dt_bias=dt_bias,
               lower_bound=-5.0 if lower_bound is None else float(lower_bound), beta_sigmoid=bool(beta_sigmoid),
               qk_l2norm=bool(qk_l2norm), scale=None if scale is None else float(scale),
               initial_state=initial_state, final_state=final_state, state_v_first=bool(state_v_first),
               cu_seqlens=_tensors.on_host(cu_seqlens), state_slots=_tensors.on_host(state_slots),
               chunk_size=int(chunk_size), stream=_tensors.stream(q))
    return o, final_state
