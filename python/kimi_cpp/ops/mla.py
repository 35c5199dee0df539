"""Gated Multi-head Latent Attention, NoPE (SPEC 6, include/kimi/ops/mla.h): the attention core after the q and
kv_a projections. Per token: latent c [R] (already kv_a-normed), k_pe [P] shared by all heads (not rotated),
q_h = [q_nope_h (Dn) | q_pe_h (P)]; [k_nope_h | v_h] = W_kvb[h] c with w_kvb [H*(Dn+Dv), R];
o_h = causal softmax(q_h . [k_nope_h | k_pe] * scale) v (scale default (Dn+P)^-0.5), times sigmoid(gate_h) when a
gate is given. Latent cache [Nc, L, R+P]: token j of row n is [c_j | k_pe_j]. Index tensors are read on the host.
CPU backend."""
from __future__ import annotations

from .. import _C, _tensors

__all__ = ["mla_prefill", "mla_cache_write", "mla_decode"]


def _value_dim(w_kvb, H, Dn, where):
    rows = w_kvb.shape[0]
    if rows % H != 0 or rows // H <= Dn:
        raise ValueError(f"{where}: argument 'w_kvb': expected H*(Dn+Dv) rows with H = {H}, Dn = {Dn}, Dv >= 1, "
                         f"got {rows}")
    return rows // H - Dn


def mla_prefill(q, latent, k_pe, w_kvb, gate=None, cu_seqlens=None, softmax_scale: float | None = None):
    """Causal prefill. q [B, T, H, Dn+P]; latent [B, T, R]; k_pe [B, T, P]; w_kvb dense [H*(Dn+Dv), R];
    gate [B, T, H*Dv] raw (optional); packed varlen: B = 1 with cu_seqlens [N+1]. Returns o [B, T, H, Dv]."""
    B, T, H, Dq = q.shape
    Dv = _value_dim(w_kvb, H, Dq - k_pe.shape[-1], "mla_prefill")
    o = _tensors.empty(q, (B, T, H, Dv))
    _C.mla_prefill(q, latent, k_pe, w_kvb, gate, _tensors.on_host(cu_seqlens), softmax_scale, o, _tensors.stream(q))
    return o


def mla_cache_write(latent, k_pe, cache, start, slots=None):
    """cache[slots[n], start[n] + t, :] = [latent[n, t] | k_pe[n, t]] for T tokens of N rows. latent [N, T, R];
    k_pe [N, T, P]; cache [Nc, L, R+P] (written in place, returned); start int32 [N]; slots int32 [N] or None."""
    _C.mla_cache_write(latent, k_pe, cache, _tensors.on_host(start), _tensors.on_host(slots), _tensors.stream(latent))
    return cache


def mla_decode(q, cache, lens, w_kvb, slots=None, gate=None, softmax_scale: float | None = None):
    """Decode (absorbed form): one query per sequence attends to cache rows [0, lens[n]) of cache row slots[n].
    q [N, H, Dn+P]; cache [Nc, L, R+P]; lens int32 [N]; w_kvb [H*(Dn+Dv), R]; gate [N, H*Dv] (optional).
    Returns o [N, H, Dv]."""
    N, H, Dq = q.shape
    P = cache.shape[-1] - w_kvb.shape[1]
    Dv = _value_dim(w_kvb, H, Dq - P, "mla_decode")
    o = _tensors.empty(q, (N, H, Dv))
    _C.mla_decode(q, cache, _tensors.on_host(lens), _tensors.on_host(slots), w_kvb, gate, softmax_scale, o,
                  _tensors.stream(q))
    return o
