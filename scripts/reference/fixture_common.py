"""Shared pieces of the model-level reference fixtures (docs/model/reference-fixtures.md).

Both generators (kimi_linear_fixture.py: Hugging Face transformers; k3_reference.py: the project's own fp64
reference) use the same prompts, the same checkpoint checksums, the same greedy-decode protocol and the same
fixture writer, so the C++ test reads one format.
"""
from __future__ import annotations

import json
import math
import os
import struct
import subprocess

import numpy as np

DECODE_STEPS = 8
PROMPT_LENGTHS = (13, 1, 70)  # 70 crosses a 64-token chunk boundary (FLA chunk size)


def make_prompts(vocab_size: int) -> list[list[int]]:
    """Fixed token-id prompts: a 32-bit LCG (Numerical Recipes constants), seed 2026 + p, ids = (x >> 16) % vocab."""
    prompts = []
    for p, n in enumerate(PROMPT_LENGTHS):
        x = 2026 + p
        ids = []
        for _ in range(n):
            x = (1664525 * x + 1013904223) % (1 << 32)
            ids.append((x >> 16) % vocab_size)
        prompts.append(ids)
    return prompts


def run_random_model(kimi_bin: str, config: str, out_dir: str, seed: int, experts: str) -> list[str]:
    cmd = [kimi_bin, "random-model", config, "--out", out_dir, "--seed", str(seed), "--experts", experts]
    subprocess.run(cmd, check=True)
    return cmd


def describe_random_model(cmd: list[str]) -> str:
    """The random-model command line without its (temporary) --out directory."""
    out = []
    skip = False
    for a in cmd:
        if skip:
            skip = False
            continue
        if a == "--out":
            skip = True
            continue
        out.append(a)
    return " ".join(out)


def read_safetensors_raw(path: str):
    """Yields (name, dtype string, shape, raw bytes) for every tensor of one .safetensors file (no torch needed)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            b, e = info["data_offsets"]
            f.seek(base + b)
            yield name, info["dtype"], info["shape"], f.read(e - b)


def checkpoint_files(ckpt_dir: str) -> list[str]:
    idx = os.path.join(ckpt_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(ckpt_dir, s) for s in shards]
    return [os.path.join(ckpt_dir, "model.safetensors")]


def raw_to_f64(dtype: str, shape, raw: bytes) -> np.ndarray:
    if dtype == "BF16":
        u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        return u.view(np.float32).astype(np.float64).reshape(shape)
    if dtype == "F32":
        return np.frombuffer(raw, dtype=np.float32).astype(np.float64).reshape(shape)
    if dtype == "F16":
        return np.frombuffer(raw, dtype=np.float16).astype(np.float64).reshape(shape)
    if dtype == "U8":
        return np.frombuffer(raw, dtype=np.uint8).astype(np.float64).reshape(shape)
    raise ValueError(f"unsupported checkpoint dtype {dtype}")


def checkpoint_checksums(ckpt_dir: str) -> dict[str, float]:
    """{tensor name: exactly rounded float64 sum (math.fsum) of all its values}; bf16/f32 upcast, u8 = byte values."""
    sums = {}
    for path in checkpoint_files(ckpt_dir):
        for name, dtype, shape, raw in read_safetensors_raw(path):
            sums[name] = math.fsum(raw_to_f64(dtype, shape, raw).ravel().tolist())
    return dict(sorted(sums.items()))


def greedy_margin(logits_row: np.ndarray) -> tuple[float, float]:
    """(top-1 minus top-2 logit, that gap divided by the row's logit std)."""
    s = np.sort(np.asarray(logits_row, dtype=np.float64))
    gap = float(s[-1] - s[-2])
    return gap, gap / float(np.std(s))


def write_fixture(path: str, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """Writes a safetensors file of f32 / i32 tensors (sorted names) with string metadata."""
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs = []
    off = 0
    for name in sorted(tensors):
        a = tensors[name]
        if a.dtype == np.float32:
            dt = "F32"
        elif a.dtype == np.int32:
            dt = "I32"
        else:
            raise ValueError(f"{name}: fixture tensors are f32 or i32, got {a.dtype}")
        data = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_fixture(path: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    out = {}
    meta = {}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                meta = info
                continue
            b, e = info["data_offsets"]
            f.seek(base + b)
            dt = {"F32": np.float32, "I32": np.int32}[info["dtype"]]
            out[name] = np.frombuffer(f.read(e - b), dtype=dt).reshape(info["shape"])
    return out, meta


def greedy_protocol(prefill, decode, prompt: list[int], steps: int = DECODE_STEPS):
    """Runs the fixture's greedy protocol.

    prefill(prompt) -> (logits [T, V], hidden [L+1, T, d], state); decode(token, state) -> (logits [V], state).
    t_0 = argmax(prefill_logits[T-1]); for g in 0..G-1: decode_logits[g] = decode(t_g); t_{g+1} = argmax(that).
    Returns the fixture arrays and the greedy margins of every argmax decision (G + 1 of them).
    """
    logits, hidden, state = prefill(prompt)
    logits = np.asarray(logits, dtype=np.float64)
    margins = [greedy_margin(logits[-1])]
    tok = int(np.argmax(logits[-1]))
    tokens, dec = [], []
    for _ in range(steps):
        tokens.append(tok)
        row, state = decode(tok, state)
        row = np.asarray(row, dtype=np.float64)
        dec.append(row)
        margins.append(greedy_margin(row))
        tok = int(np.argmax(row))
    return {
        "prompt": np.asarray(prompt, dtype=np.int32),
        "prefill_logits": logits.astype(np.float32),
        "hidden": np.asarray(hidden, dtype=np.float64).astype(np.float32),
        "tokens": np.asarray(tokens, dtype=np.int32),
        "decode_logits": np.stack(dec).astype(np.float32),
    }, margins
