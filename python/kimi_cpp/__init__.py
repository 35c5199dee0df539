"""kimi_cpp: Python bindings of kimi.cpp, the Kimi K3 / Kimi-Linear operator library.

Tensors from PyTorch, NumPy or any DLPack producer, on the CPU or a CUDA device (the CUDA backend is present
when the package was built with nvcc); every operator runs on the device of its tensors, on the caller's
current CUDA stream (PyTorch), with the GIL released. Bad input raises :class:`kimi_cpp.Error` (a ValueError)
whose message names the operator, the argument, the expected and the actual value.

- ``kimi_cpp.ops.kda``: ``chunk_kda`` and ``fused_recurrent_kda``, drop-ins for FLA 0.6's (forward).
- ``kimi_cpp.ops``: norms, short conv, linear / MXFP4, router, GLU (SiLU / SiTU), MLP, latent MoE, AttnRes, MLA.

See docs/python.md.
"""
from . import _C
from ._C import Error, all_ops, cuda_built, cuda_device_count, get_num_threads, op_supported, set_num_threads

__version__ = "0.1.0"

__all__ = [
    "Error",
    "all_ops",
    "cuda_built",
    "cuda_device_count",
    "get_num_threads",
    "op_supported",
    "set_num_threads",
    "ops",
]

from . import ops  # noqa: E402  (after _C: ops imports it)
