"""The torch custom op ``kimi_cpp::kda_fwd`` behind chunk_kda / fused_recurrent_kda for PyTorch tensors.

Registered with torch.library so that torch.compile traces through it (a fake implementation gives the
output shapes without running it) and CUDA graphs capture it (it runs on the current stream). Forward
only: its autograd formula raises NotImplementedError, so a forward with inputs that require grad works and
the backward says why it cannot run. The op returns (o, final_state); final_state is an empty fp32 tensor
when not requested and becomes None again here.
"""
from __future__ import annotations

from typing import Optional

import torch

from ._kda_forward import kda_forward

_EMPTY_STATE = (0,)


@torch.library.custom_op("kimi_cpp::kda_fwd", mutates_args=())
def _kda_fwd(mode: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
             A_log: Optional[torch.Tensor], dt_bias: Optional[torch.Tensor], initial_state: Optional[torch.Tensor],
             cu_seqlens: Optional[torch.Tensor], gate: str, lower_bound: float, beta_sigmoid: bool, qk_l2norm: bool,
             scale: float, output_final_state: bool, state_v_first: bool,
             chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    o, fs = kda_forward(mode, q, k, v, g, beta, gate=gate, A_log=A_log, dt_bias=dt_bias, lower_bound=lower_bound,
                        beta_sigmoid=beta_sigmoid, qk_l2norm=qk_l2norm, scale=scale, initial_state=initial_state,
                        output_final_state=output_final_state, state_v_first=state_v_first, cu_seqlens=cu_seqlens,
                        chunk_size=chunk_size)
    if fs is None:
        fs = q.new_empty(_EMPTY_STATE, dtype=torch.float32)
    return o, fs


@_kda_fwd.register_fake
def _kda_fwd_fake(mode, q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens, gate, lower_bound, beta_sigmoid,
                  qk_l2norm, scale, output_final_state, state_v_first, chunk_size):
    o = v.new_empty(v.shape)
    if not output_final_state:
        return o, q.new_empty(_EMPTY_STATE, dtype=torch.float32)
    N = q.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1
    H, K, V = q.shape[2], q.shape[3], v.shape[3]
    return o, q.new_empty((N, H, V, K) if state_v_first else (N, H, K, V), dtype=torch.float32)


def _setup_context(ctx, inputs, output):
    pass


def _backward(ctx, grad_o, grad_state):
    raise NotImplementedError("kimi_cpp chunk_kda / fused_recurrent_kda are forward-only: kimi.cpp has no KDA "
                              "backward (use FLA for training, or run the forward under torch.no_grad())")


_kda_fwd.register_autograd(_backward, setup_context=_setup_context)


def kda_fwd(mode, q, k, v, g, beta, *, gate="none", A_log=None, dt_bias=None, lower_bound=-5.0, beta_sigmoid=False,
            qk_l2norm=False, scale=None, initial_state=None, output_final_state=False, state_v_first=False,
            cu_seqlens=None, chunk_size=64):
    """kda_forward's arguments through the custom op; returns (o, final_state or None)."""
    K = q.shape[-1]
    o, fs = _kda_fwd(mode, q, k, v, g, beta, A_log, dt_bias, initial_state, cu_seqlens, gate,
                     -5.0 if lower_bound is None else float(lower_bound), bool(beta_sigmoid), bool(qk_l2norm),
                     K ** -0.5 if scale is None else float(scale), bool(output_final_state), bool(state_v_first),
                     int(chunk_size))
    return o, (fs if output_final_state else None)
