"""Shared fixtures of the kimi_cpp tests (tests/python, run by ctest as `python_tests` and by pytest directly).

What runs where: every test that needs only NumPy runs everywhere. Tests that need PyTorch (marked needs_torch)
and the 'cuda' cases (marked needs_cuda: PyTorch sees a GPU and kimi_cpp was built with the CUDA backend) are
deselected where that is missing, not skipped: pytest's summary counts them as 'deselected' and a line before it
says why, so a run without a GPU (CI: .ci/run, PyPI's torch on the CPU) shows no skip that could hide a defect.
test_gpu.py imports torch at module level and is not collected without it. Tolerances are SPEC 14's: fp32 relative error 1e-5,
bf16 5e-3."""
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


needs_torch = pytest.mark.needs_torch
needs_cuda = pytest.mark.needs_cuda

DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]

# test_gpu.py imports torch at module level (pytest.importorskip)
collect_ignore = ["test_gpu.py"] if torch is None else []

_MISSING = {"needs_torch": "PyTorch is not installed" if torch is None else None,
            "needs_cuda": None if cuda_ok() else "no CUDA device for kimi_cpp (PyTorch with a GPU, the CUDA build)"}

_DESELECTED = pytest.StashKey[int]()


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_torch: runs only where PyTorch imports (else deselected)")
    config.addinivalue_line("markers", "needs_cuda: runs only with a CUDA device for kimi_cpp (else deselected)")


def pytest_collection_modifyitems(config, items):
    keep, dropped = [], []
    for item in items:
        (dropped if any(_MISSING[m] and item.get_closest_marker(m) for m in _MISSING) else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    config.stash[_DESELECTED] = len(dropped)


def pytest_terminal_summary(terminalreporter, config):
    """One line (also under -q) before pytest's counts: what was deselected and why."""
    why = "; ".join(reason for reason in _MISSING.values() if reason)
    if why:
        ignored = f"; {', '.join(collect_ignore)} not collected" if collect_ignore else ""
        terminalreporter.write_line(f"kimi_cpp: {config.stash.get(_DESELECTED, 0)} tests deselected ({why}){ignored}")


def to_np(x):
    """A torch tensor or NumPy array as float64 NumPy (on the host)."""
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
