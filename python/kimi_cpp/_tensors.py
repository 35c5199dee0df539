"""Framework glue: allocate outputs in the caller's framework and find the caller's CUDA stream.

The C++ side never allocates a framework tensor: every output is made here, like one of the inputs (same
framework and device), and passed to kimi_cpp._C. PyTorch tensors get torch.empty on the input's device;
objects with the array API namespace (NumPy >= 2, CuPy, JAX...) get ``xp.empty(..., device=x.device)``;
anything else gets a NumPy array (CPU). The stream is PyTorch's current stream for a CUDA tensor, CuPy's
current stream for a CuPy array, else 0 (the legacy default stream).
"""
from __future__ import annotations

import sys

import numpy as np

_TORCH_DTYPES = {}


def _torch():
    return sys.modules.get("torch")


def is_torch(x) -> bool:
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def _torch_dtype(name: str):
    t = _torch()
    if not _TORCH_DTYPES:
        _TORCH_DTYPES.update(float32=t.float32, bfloat16=t.bfloat16, float16=t.float16, uint8=t.uint8,
                             int32=t.int32, int64=t.int64)
    return _TORCH_DTYPES[name]


def dtype_name(x) -> str:
    """'float32', 'bfloat16', 'float16', 'uint8', 'int32' or 'int64' (other dtypes: their own name)."""
    return str(x.dtype).replace("torch.", "")


def empty(like, shape, dtype: str | None = None):
    """An uninitialized array of `shape` in `like`'s framework and device; dtype name or like's dtype."""
    shape = tuple(int(s) for s in shape)
    dtype = dtype or dtype_name(like)
    if is_torch(like):
        return _torch().empty(shape, dtype=_torch_dtype(dtype), device=like.device)
    if isinstance(like, np.ndarray):
        return np.empty(shape, dtype=_np_dtype(dtype))
    ns = getattr(like, "__array_namespace__", None)
    if ns is not None:
        xp = ns()
        return xp.empty(shape, dtype=getattr(xp, dtype), device=like.device)
    return np.empty(shape, dtype=_np_dtype(dtype))


def zeros(like, shape, dtype: str | None = None):
    out = empty(like, shape, dtype)
    out[...] = 0
    return out


def _np_dtype(name: str):
    if name == "bfloat16":
        try:
            import ml_dtypes  # noqa: PLC0415

            return ml_dtypes.bfloat16
        except ImportError as e:
            raise TypeError("bfloat16 outputs for NumPy inputs need the ml_dtypes package") from e
    return np.dtype(name)


def stream(x) -> int:
    """The caller's current CUDA stream for x's device as an integer (0 on the CPU or when unknown)."""
    if is_torch(x):
        if x.device.type != "cuda":
            return 0
        return int(_torch().cuda.current_stream(x.device).cuda_stream)
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        import cupy  # noqa: PLC0415

        return int(cupy.cuda.get_current_stream().ptr)
    return 0


def on_host(x):
    """x readable on the host (cu_seqlens, slots): x itself when already there, else a host copy."""
    if x is None:
        return None
    if is_torch(x):
        return x if x.device.type == "cpu" else x.cpu()
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None and dev()[0] not in (1, 3):  # kDLCPU, kDLCUDAHost
        return np.from_dlpack(x, device="cpu") if hasattr(np, "from_dlpack") else np.asarray(x)
    return x


def inner_contiguous(x):
    """x with stride 1 in its last dimension (a contiguous copy only when it is not)."""
    if x is None or x.ndim == 0:
        return x
    if is_torch(x):
        return x if x.stride(-1) == 1 or x.shape[-1] <= 1 else x.contiguous()
    if isinstance(x, np.ndarray):
        return x if x.strides[-1] == x.itemsize or x.shape[-1] <= 1 else np.ascontiguousarray(x)
    return x


def f32_flat(x):
    """x as a flat float32 array (A_log, dt_bias: FLA casts them to fp32 in its kernels too)."""
    if is_torch(x):
        return x.to(_torch().float32).reshape(-1)
    if isinstance(x, np.ndarray):
        return x.astype(np.float32, copy=False).reshape(-1)
    xp = x.__array_namespace__()
    return xp.reshape(xp.astype(x, xp.float32), (-1,))


def to_f32(x):
    if is_torch(x):
        return x.to(_torch().float32)
    if isinstance(x, np.ndarray):
        return x.astype(np.float32, copy=False)
    xp = x.__array_namespace__()
    return xp.astype(x, xp.float32)


def repeat_heads(x, n: int):
    """Each head of x [B, T, H, D] repeated n times in place: head h becomes heads h*n .. h*n+n-1 (GVA)."""
    if is_torch(x):
        return x.repeat_interleave(n, dim=2)
    if isinstance(x, np.ndarray):
        return np.repeat(x, n, axis=2)
    xp = x.__array_namespace__()
    return xp.repeat(x, n, axis=2)


def two_sigmoid(x):
    """2 * sigmoid(x) in float32 (FLA's allow_neg_eigval beta)."""
    if is_torch(x):
        return 2.0 * _torch().sigmoid(x.to(_torch().float32))
    x = to_f32(x)
    if isinstance(x, np.ndarray):
        return (2.0 / (1.0 + np.exp(-x))).astype(np.float32)
    xp = x.__array_namespace__()
    return 2.0 / (1.0 + xp.exp(-x))
