"""The binding layer itself: DLPack in from NumPy and PyTorch without copies, dtypes and devices, errors (kimi_cpp.Error
is a ValueError with the C++ message intact), the GIL released while an operator runs, module-level helpers."""
import threading
import time

import numpy as np
import pytest
from conftest import needs_torch, torch

import kimi_cpp
from kimi_cpp import _C


def test_module_helpers():
    assert "kda_chunk_fwd" in kimi_cpp.all_ops()
    assert kimi_cpp.op_supported("rms_norm", "cpu")
    assert isinstance(kimi_cpp.cuda_built(), bool)
    assert kimi_cpp.cuda_device_count() >= 0
    with pytest.raises(kimi_cpp.Error, match="'device'"):
        kimi_cpp.op_supported("rms_norm", "tpu")


def test_threads_setting():
    old = kimi_cpp.get_num_threads()
    try:
        kimi_cpp.set_num_threads(1)
        assert kimi_cpp.get_num_threads() == 1
        x = np.ones((3, 8), np.float32)
        np.testing.assert_allclose(kimi_cpp.ops.rms_norm(x, np.ones(8, np.float32)), 1.0, rtol=1e-5)
        with pytest.raises(kimi_cpp.Error, match="'n'"):
            kimi_cpp.set_num_threads(-1)
    finally:
        kimi_cpp.set_num_threads(old)


def test_error_is_value_error_with_message():
    x = np.ones((4, 8), np.float32)
    with pytest.raises(ValueError) as e:
        kimi_cpp.ops.rms_norm(x, np.ones(7, np.float32))
    assert isinstance(e.value, kimi_cpp.Error)
    assert str(e.value) == "rms_norm: argument 'w': expected shape [8], got [7]"


def test_unsupported_dtype_names_op_and_argument():
    with pytest.raises(kimi_cpp.Error, match=r"rms_norm: argument 'x': expected dtype float32.*got float64"):
        kimi_cpp.ops.rms_norm(np.ones((2, 4)), np.ones(4, np.float32))
    with pytest.raises(kimi_cpp.Error, match=r"argument 'x'.*got bool8"):
        _C.rms_norm(np.ones((2, 4), bool), np.ones(4, np.float32), 1e-5, np.ones((2, 4), np.float32))


def test_outputs_written_in_place_no_copies():
    x = np.random.default_rng(0).standard_normal((5, 16)).astype(np.float32)
    y = np.zeros_like(x)
    _C.rms_norm(x, np.ones(16, np.float32), 1e-5, y)
    assert np.abs(y).sum() > 0  # the caller's array itself was written


def test_strided_numpy_views():
    base = np.random.default_rng(1).standard_normal((6, 32)).astype(np.float32)
    x = base[::2, :16]  # row stride 64 elements, last-dim stride 1
    got = kimi_cpp.ops.rms_norm(x, np.ones(16, np.float32))
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, ref, rtol=1e-5)


@needs_torch
def test_torch_and_numpy_same_bits():
    x = torch.randn(7, 24)
    w = torch.randn(24)
    a = kimi_cpp.ops.rms_norm(x, w)
    b = kimi_cpp.ops.rms_norm(x.numpy(), w.numpy())
    assert isinstance(a, torch.Tensor) and isinstance(b, np.ndarray)
    assert np.array_equal(a.numpy(), b)


@needs_torch
def test_torch_bfloat16_roundtrip():
    x = torch.randn(4, 64).to(torch.bfloat16)
    y = kimi_cpp.ops.rms_norm(x, torch.ones(64))
    assert y.dtype == torch.bfloat16 and y.shape == x.shape


def test_gil_released_during_an_operator():
    """Another Python thread keeps running while a long CPU operator runs."""
    rng = np.random.default_rng(2)
    B, T, H, K, V = 1, 3000, 4, 64, 64
    q, k = rng.standard_normal((2, B, T, H, K)).astype(np.float32)
    v = rng.standard_normal((B, T, H, V)).astype(np.float32)
    g = -rng.random((B, T, H, K)).astype(np.float32)
    beta = rng.random((B, T, H)).astype(np.float32)
    o = np.empty_like(v)
    done = threading.Event()
    ticks = 0

    def work():
        _C.kda_fwd("recurrent", q, k, v, g, beta, o)
        done.set()

    t = threading.Thread(target=work)
    t0 = time.perf_counter()
    t.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0)
    t.join()
    elapsed = time.perf_counter() - t0
    # NOTE: with the GIL held the loop could not run at all until the op returned (ticks ~ 1).
    assert elapsed < 0.005 or ticks > 10, (elapsed, ticks)
