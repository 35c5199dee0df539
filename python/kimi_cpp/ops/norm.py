"""Norms (SPEC 3, include/kimi/ops/norm.h). All reduce over the last dimension D (stride 1); leading dimensions
are rows with any strides; x f32/bf16/f16, weights f32/bf16/f16 [D]; compute fp32."""
from __future__ import annotations

from .. import _C, _tensors

__all__ = ["rms_norm", "add_rms_norm", "gated_rms_norm", "l2_norm"]


def rms_norm(x, weight, eps: float = 1e-5, out=None):
    """y = weight * cast_x(x * rsqrt(mean(x^2) + eps)): the normalized value is rounded to x's dtype before the
    weight multiplies it (Hugging Face semantics). x [..., D]; weight [D]; returns y like x (or ``out``, any
    float dtype). CPU and CUDA."""
    y = _tensors.empty(x, x.shape) if out is None else out
    _C.rms_norm(x, weight, float(eps), y, _tensors.stream(x))
    return y


def add_rms_norm(x, residual, weight, eps: float = 1e-5):
    """Fused residual add + RMSNorm: s = x + residual (rounded to x's dtype), y = rms_norm(s). Returns (s, y)."""
    s, y = _tensors.empty(x, x.shape), _tensors.empty(x, x.shape)
    _C.add_rms_norm(x, residual, weight, float(eps), s, y, _tensors.stream(x))
    return s, y


def gated_rms_norm(o, z, weight, eps: float = 1e-5, out=None):
    """KDA's output norm, per head: y[.., h, :] = rms_norm(o[.., h, :], weight) * sigmoid(z[.., h, :]) (fp32 through,
    no rounding before the weight, like FLA's fused kernel). o, z [..., H, D] (z None: no gate); weight [D]."""
    y = _tensors.empty(o, o.shape) if out is None else out
    _C.gated_rms_norm(o, z, weight, float(eps), y, _tensors.stream(o))
    return y


def l2_norm(x, eps: float = 1e-6, out=None):
    """y = x / sqrt(sum(x^2) + eps) over the last dimension (KDA's q / k norm)."""
    y = _tensors.empty(x, x.shape) if out is None else out
    _C.l2_norm(x, y, float(eps), _tensors.stream(x))
    return y
