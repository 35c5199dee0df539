"""y = x W^T with dense or MXFP4 weights, and MXFP4 dequant / quant (SPEC 10, include/kimi/ops/linear.h, mxfp4.h).

A weight is a dense [out, in] array (f32/bf16/f16), or a (packed, scale) pair for MXFP4: packed uint8 [out, in/2]
(two E2M1 codes per byte, low nibble = even column), scale uint8 [out, in/32] (E8M0)."""
from __future__ import annotations

from .. import _C, _tensors

__all__ = ["linear", "mxfp4_dequant", "mxfp4_quant", "split_weight"]


def split_weight(w):
    """(w, None) for a dense weight, (packed, scale) for an MXFP4 pair."""
    if isinstance(w, (tuple, list)):
        if len(w) != 2:
            raise ValueError(f"an MXFP4 weight is a (packed, scale) pair, got {len(w)} items")
        return w[0], w[1]
    return w, None


def _out_features(w):
    return split_weight(w)[0].shape[0]


def linear(x, weight, out=None, accumulate: bool = False):
    """y = x W^T (fp32 accumulate). x [M, in]; weight dense [out, in] or MXFP4 (packed, scale); returns y [M, out]
    in x's dtype (or ``out``; with ``accumulate`` y += x W^T into the given ``out``)."""
    w, scale = split_weight(weight)
    if out is None:
        if accumulate:
            raise ValueError("linear: accumulate=True needs out=")
        out = _tensors.empty(x, (x.shape[0], w.shape[0]))
    _C.linear(x, w, scale, out, 1.0 if accumulate else 0.0, _tensors.stream(x))
    return out


def mxfp4_dequant(packed, scale, dtype: str = "bfloat16", out=None):
    """w [O, I] (float32 / bfloat16 / float16) from MXFP4 packed uint8 [O, I/2] and scale uint8 [O, I/32]:
    w[o, i] = E2M1(code) * 2^(scale[o, i/32] - 127). Exact whenever the value fits the dtype."""
    if out is None:
        out = _tensors.empty(packed, (packed.shape[0], packed.shape[1] * 2), dtype)
    _C.mxfp4_dequant(packed, scale, out, _tensors.stream(packed))
    return out


def mxfp4_quant(w):
    """(packed uint8 [O, I/2], scale uint8 [O, I/32]) from w [O, I] (I a multiple of 32), per block of 32:
    e = clamp(floor(log2(amax)) - 2 + 127, 0, 254), values rounded to the nearest E2M1 magnitude (ties even)."""
    O, I = w.shape
    packed = _tensors.empty(w, (O, I // 2), "uint8")
    scale = _tensors.empty(w, (O, I // 32), "uint8")
    _C.mxfp4_quant(w, packed, scale, _tensors.stream(w))
    return packed, scale


def gather_rows(src, rows, out=None, dtype: str | None = None):
    """out[n] = src[rows[n]] converted to out's dtype (the embedding lookup): src [R, D] float; rows int32/int64
    [N] (read on the host; a device array is copied there), each in [0, R), repeats allowed. Returns out [N, D]
    (``dtype`` or src's), on src's device. CPU and CUDA."""
    rows = _tensors.on_host(rows)
    y = _tensors.empty(src, (len(rows), src.shape[1]), dtype) if out is None else out
    _C.gather_rows(src, rows, y, _tensors.stream(src))
    return y
