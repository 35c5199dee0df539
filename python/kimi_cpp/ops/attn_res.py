"""Block Attention Residuals (SPEC 8, include/kimi/ops/attn_res.h), token-local:

    V = [blocks_0, ..., blocks_{n-1}, partial]          n+1 candidates [T, d]
    s = sum_d V * rsqrt(mean_d(V^2) + eps) * (norm_w * proj_w)      one score per candidate
    out = sum_c softmax(s)_c V_c                        mixes the raw candidates, fp32
"""
from __future__ import annotations

from .. import _C, _tensors

__all__ = ["attn_res"]


def attn_res(partial, blocks, proj_w, norm_w, eps: float = 1e-5, out=None):
    """partial [T, d]; blocks: a list of [T, d] (may be empty: out = partial); proj_w, norm_w [d]. Returns out
    like partial (or ``out``, which may be partial or a block). CPU backend."""
    o = _tensors.empty(partial, partial.shape) if out is None else out
    _C.attn_res(partial, list(blocks), proj_w, norm_w, float(eps), o, _tensors.stream(partial))
    return o
