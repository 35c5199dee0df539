"""Shared fixtures of the kimi_cpp tests (tests/python, run by ctest as `python_tests` and by pytest directly).

Devices: 'cpu' always; 'cuda' when PyTorch sees a GPU and kimi_cpp was built with the CUDA backend (the CUDA
cases are skipped, not failed, elsewhere). Tolerances are SPEC 14's: fp32 relative error 1e-5, bf16 5e-3."""
import numpy as np
import pytest

import kimi_cpp

try:
    import torch
except ImportError:  # the NumPy-only tests still run
    torch = None

TOL = {"float32": 1e-5, "bfloat16": 5e-3, "float16": 1e-3}


def cuda_ok():
    return torch is not None and torch.cuda.is_available() and kimi_cpp.cuda_device_count() > 0


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not cuda_ok(), reason="no CUDA device for kimi_cpp"))]

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
needs_cuda = pytest.mark.skipif(not cuda_ok(), reason="no CUDA device for kimi_cpp")


def to_np(x):
    """A torch tensor or NumPy array as float64 NumPy (on the host)."""
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
