"""KDA's short causal depthwise convolution + SiLU with its decode cache (SPEC 4, include/kimi/ops/conv.h).

    y[t, c] = act( sum_{j=0..W-1} w[c, j] * x[t - (W-1) + j, c] )     w[c, W-1] multiplies the current token

Cache [N, C, W-1]: the last W-1 inputs of each sequence per channel, oldest first. x, y [B, T, C] (or packed
[1, total_T, C] with cu_seqlens [N+1]); w [C, W] or the checkpoint's [C, 1, W]; W in [1, 8].
"""
from __future__ import annotations

from .. import _C, _tensors

__all__ = ["short_conv_fwd", "short_conv_update"]


def _silu(activation):
    if activation not in ("silu", None):
        raise ValueError(f"activation: expected 'silu' or None, got {activation!r}")
    return activation == "silu"


def short_conv_fwd(x, weight, initial_cache=None, output_final_cache: bool = False, cu_seqlens=None,
                   activation: str | None = "silu", cache_slots=None, final_cache=None):
    """Prefill. initial_cache [N, C, W-1] (optional; zeros before each sequence without it). Returns (y, cache):
    y like x; cache [N, C, W-1] (initial_cache's dtype, else x's) when ``output_final_cache``, else None.
    cu_seqlens is read on the host. N = B, or len(cu_seqlens) - 1.
    Serving pools: ``cache_slots`` int32/int64 [N] (host) makes the caches pools [N_c, C, W-1] (sequence n uses row
    cache_slots[n]); pass ``final_cache`` (e.g. the initial_cache pool itself, updated in place)."""
    cache = final_cache
    if cache is None and output_final_cache:
        W = weight.shape[-1]
        N = x.shape[0] if cu_seqlens is None else cu_seqlens.shape[0] - 1
        like = initial_cache if initial_cache is not None else x
        cache = _tensors.empty(x, (N, x.shape[-1], W - 1), _tensors.dtype_name(like))
    y = _tensors.empty(x, x.shape)
    _C.short_conv_fwd(x, weight, initial_cache, cache, _tensors.on_host(cu_seqlens), _tensors.on_host(cache_slots),
                      _silu(activation), y, _tensors.stream(x))
    return y, cache


def short_conv_update(x, weight, cache, cache_slots=None, activation: str | None = "silu", out=None):
    """One decode step for N sequences: x [N, C] -> y [N, C]; cache [N, C, W-1] updated in place (a pool
    [N_c, C, W-1] indexed by cache_slots int32/int64 [N], read on the host)."""
    y = _tensors.empty(x, x.shape) if out is None else out
    _C.short_conv_update(x, weight, cache, _tensors.on_host(cache_slots), _silu(activation), y, _tensors.stream(x))
    return y
