"""kimi's safetensors reader against the reference `safetensors` library (run by ctest as safetensors_reference).

Every case is a file, written by the library itself (save_file) or built byte by byte here. For each one the
library says whether it accepts the file (safe_open) and kimi says the same through st_dump (which prints what
kimi's SafetensorsFile read, or its error). Expectations:
  accept   both accept; kimi reads the same names, dtypes, shapes and bytes (the bytes are the ones this script
           wrote, and for numpy dtypes also the ones the library returns), every view aligned to its elements
  reject   both refuse; kimi's message contains the fragment given
  stricter the library accepts, kimi refuses on purpose (a repeated tensor key; dtypes or ranks kimi lacks),
           its message containing the fragment given
Usage: compare.py --dump PATH/TO/kimi_safetensors_dump [--keep DIR]
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file


def raw(header, data=b"", length=None):
    """A safetensors file from header text (not padded) and data bytes; `length` overrides the length field."""
    h = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(h) if length is None else length) + h + data


def entry(dtype, shape, begin, end, **extra):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end], **extra}


def cases():
    """(name, kind, bytes or writer, expectation): expectation is {name: (dtype, shape, bytes)} for accept,
    a message fragment otherwise."""
    f32 = np.array([1.5, -2.25, 3e-8], np.float32).tobytes()
    i64 = np.array([-5, 1 << 40], np.int64).tobytes()
    f16 = np.array([0.5, -7.0], np.float16).tobytes()
    bf16 = bytes([0x00, 0x3F, 0xE0, 0xC0, 0xC0, 0x42])  # 0.5, -7, 96
    u8 = bytes([9, 250])
    out = []

    # Written by the library: its layout (sorted by dtype, header padded to 8 bytes with spaces).
    arrays = {
        "w": np.arange(15, dtype=np.float32).reshape(3, 5) - 2.5,
        "h": np.linspace(-1, 1, 7).astype(np.float16),
        "b": (np.arange(32) * 7 % 256).astype(np.uint8).reshape(2, 16),
        "i": np.array([3, -4, 5, 1 << 30], np.int32),
        "l": np.array([-(1 << 40), 7, 0], np.int64),
        "e": np.zeros((0, 3), np.float32),
        "s": np.array(4.0, np.float32),
    }
    out.append(("library: mixed dtypes, empty, 0-d, metadata", "accept",
                ("save", arrays, {"format": "pt"}),
                {k: (None, list(v.shape), v.tobytes()) for k, v in arrays.items()}))
    small = {"z": np.array([1, 2, 3], np.uint8), "a": np.array([0.25], np.float32)}
    out.append(("library: u8 then f32", "accept", ("save", small, None),
                {k: (None, list(v.shape), v.tobytes()) for k, v in small.items()}))
    out.append(("library: no tensors", "accept", ("save", {}, None), {}))

    # Unpadded header: data right after it, at file offset 8 + N = 1 (mod 8), so every wider element is
    # misaligned in the file.
    hdr = {"d": entry("U8", [2], 38, 40), "a": entry("F32", [3], 0, 12), "b": entry("I64", [2], 12, 28),
           "c": entry("BF16", [3], 28, 34), "f": entry("F16", [2], 34, 38), "e": entry("F32", [0, 4], 40, 40)}
    text = json.dumps(hdr, separators=(",", ":"))
    text += " " * ((9 - len(text) % 8) % 8)
    assert (8 + len(text)) % 8 == 1
    out.append(("unpadded header, misaligned data", "accept", raw(text, f32 + i64 + bf16 + f16 + u8),
                {"a": ("F32", [3], f32), "b": ("I64", [2], i64), "c": ("BF16", [3], bf16), "f": ("F16", [2], f16),
                 "d": ("U8", [2], u8), "e": ("F32", [0, 4], b"")}))
    out.append(("whitespace around the JSON", "accept",
                raw(" \n\t" + json.dumps({"a": entry("F32", [3], 0, 12)}) + " \r\n\t  ", f32),
                {"a": ("F32", [3], f32)}))
    out.append(("__metadata__ null, extra fields, any order", "accept",
                raw(json.dumps({"l": entry("I64", [2], 12, 28, note="x"), "__metadata__": None,
                                "a": entry("F32", [3], 0, 12)}), f32 + i64),
                {"a": ("F32", [3], f32), "l": ("I64", [2], i64)}))
    out.append(("empty tensors on boundaries", "accept",
                raw(json.dumps({"z0": entry("I32", [0], 0, 0), "a": entry("F32", [3], 0, 12),
                                "z1": entry("F16", [2, 0], 12, 12), "u": entry("U8", [2], 12, 14),
                                "z2": entry("U8", [0], 14, 14)}), f32 + u8),
                {"z0": ("I32", [0], b""), "a": ("F32", [3], f32), "z1": ("F16", [2, 0], b""),
                 "u": ("U8", [2], u8), "z2": ("U8", [0], b"")}))

    a8 = {"a": entry("F32", [2], 0, 8)}
    zeros8 = bytes(8)
    rejects = [
        ("hole between tensors",
         raw(json.dumps({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}), bytes(12)),
         "bytes [4, 8) of the data section belong to no tensor"),
        ("hole at the start", raw(json.dumps({"b": entry("F32", [1], 4, 8)}), zeros8), "bytes [0, 4)"),
        ("trailing bytes", raw(json.dumps(a8), bytes(12)), "the last 4 bytes belong to no tensor"),
        ("data without tensors", raw("{}", b"\0"), "the last 1 bytes belong to no tensor"),
        ("overlap", raw(json.dumps({**a8, "b": entry("F32", [1], 4, 8)}), zeros8),
         "and 'b' (data_offsets [4, 8]) overlap"),
        ("empty tensor inside another", raw(json.dumps({**a8, "z": entry("F32", [0], 4, 4)}), zeros8), "overlap"),
        ("empty tensor past the end", raw(json.dumps({**a8, "z": entry("F32", [0], 9, 9)}), zeros8),
         "data_offsets end 9 beyond the data section of 8 bytes"),
        ("byte order mark", raw(b"\xef\xbb\xbf" + json.dumps(a8).encode(), zeros8), "byte order mark"),
        ("NUL padding", raw(json.dumps(a8) + "\0\0", zeros8), "a NUL byte"),
        ("header longer than the file", raw("{}", length=100), "exceeds the 2 bytes after the length field"),
        ("header over 100,000,000 bytes", raw("{}", length=100_000_001), "safetensors limit of 100000000 bytes"),
        ("file under 8 bytes", b"\x02\0\0", "shorter than the 8-byte header length"),
        ("empty header", raw(""), "not valid JSON at byte 8 of the file"),
        ("whitespace-only header", raw("   "), "not valid JSON at byte 11 of the file"),
        ("invalid UTF-8", raw(b'{"t\xff":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', zeros8),
         "ill-formed UTF-8"),
        ("top-level array", raw("[]"), "expected a JSON object, got []"),
        ("repeated field", raw('{"t":{"dtype":"F64","dtype":"F32","shape":[2],"data_offsets":[0,8]}}', zeros8),
         "key 'dtype' appears twice in object 't'"),
        ("repeated __metadata__", raw('{"__metadata__":{"a":"1"},"__metadata__":{"b":"2"}}'),
         "key '__metadata__' appears twice"),
        ("metadata value not a string", raw('{"__metadata__":{"a":1}}'),
         "__metadata__ entry 'a': expected a string, got 1"),
        ("metadata an array", raw('{"__metadata__":[]}'), "__metadata__: expected an object of strings, got []"),
        ("float offsets", raw('{"t":{"dtype":"F32","shape":[2],"data_offsets":[0.0,8]}}', zeros8), "got [0.0,8]"),
        ("three offsets", raw('{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}', zeros8), "got [0,8,8]"),
        ("negative shape", raw('{"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', zeros8), "got [-2]"),
        ("float shape", raw('{"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}', zeros8), "got [2.0]"),
        ("missing shape", raw('{"t":{"dtype":"F32","data_offsets":[0,8]}}', zeros8), "'shape': expected an array"),
        ("tensor null", raw('{"t":null}'), "tensor 't': expected an object"),
        ("lower-case dtype", raw('{"t":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}}', zeros8),
         "unsupported dtype 'f32'"),
        ("begin after end", raw('{"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}', zeros8),
         "begin 8 > end 0"),
        ("size not shape x dtype", raw('{"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', zeros8),
         "expected 12 bytes for shape [3] and dtype F32"),
    ]
    out += [(n, "reject", b, frag) for n, b, frag in rejects]

    stricter = [
        ("tensor key repeated (library keeps the last)",
         raw(json.dumps(a8)[:-1] + "," + json.dumps(a8)[1:], zeros8),
         "key 'a' appears twice in the top-level object"),
        ("F64 (not a kimi dtype)", raw(json.dumps({"t": entry("F64", [1], 0, 8)}), zeros8),
         "unsupported dtype 'F64'"),
        ("7 dimensions (kimi: at most 6)", raw(json.dumps({"t": entry("U8", [1] * 7, 0, 1)}), b"\0"), "at most 6"),
    ]
    out += [(n, "stricter", b, frag) for n, b, frag in stricter]
    return out


def library_reads(path):
    """{name: (dtype, shape, bytes or None)} as the library reads the file, or the library's error text."""
    try:
        with safe_open(path, framework="numpy") as f:
            got = {}
            for k in f.keys():
                sl = f.get_slice(k)
                data = None if sl.get_dtype() == "BF16" else f.get_tensor(k).tobytes()  # numpy has no bfloat16
                got[k] = (sl.get_dtype(), list(sl.get_shape()), data)
            return got
    except Exception as e:  # the library raises SafetensorError (and others for odd input)
        return f"{type(e).__name__}: {e}"


def kimi_reads(dump, path):
    r = subprocess.run([dump, path], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"{dump} {path} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def check(name, kind, spec, expect, path, dump):
    """Problems with one case (empty when it behaves as expected)."""
    if isinstance(spec, tuple):  # ("save", arrays, metadata): written by the library
        save_file(spec[1], path, metadata=spec[2])
    else:
        with open(path, "wb") as f:
            f.write(spec)
    lib = library_reads(path)
    kimi = kimi_reads(dump, path)
    problems = []
    lib_ok = isinstance(lib, dict)
    if kind in ("accept", "stricter") and not lib_ok:
        problems.append(f"the library refuses it: {lib}")
    if kind == "reject" and lib_ok:
        problems.append("the library accepts it")
    if kind == "accept":
        if "error" in kimi:
            return problems + [f"kimi refuses it: {kimi['error']}"]
        tensors = kimi["tensors"]
        if sorted(tensors) != sorted(expect):
            problems.append(f"kimi reads tensors {sorted(tensors)}, expected {sorted(expect)}")
        for k, (dtype, shape, data) in expect.items():
            t = tensors.get(k)
            if t is None:
                continue
            ldtype, lshape, ldata = lib[k] if lib_ok and k in lib else (None, None, None)
            if dtype is not None and t["dtype"] != dtype:
                problems.append(f"{k}: kimi dtype {t['dtype']}, expected {dtype}")
            if lib_ok and t["dtype"] != ldtype:
                problems.append(f"{k}: kimi dtype {t['dtype']}, library {ldtype}")
            if t["shape"] != shape or (lib_ok and lshape != shape):
                problems.append(f"{k}: kimi shape {t['shape']}, library {lshape}, expected {shape}")
            if bytes.fromhex(t["hex"]) != data:
                problems.append(f"{k}: kimi reads other bytes than were written")
            if ldata is not None and ldata != data:
                problems.append(f"{k}: the library reads other bytes than were written")
            if not t["aligned"]:
                problems.append(f"{k}: kimi's view is not aligned to its elements")
    else:
        if "error" not in kimi:
            problems.append("kimi accepts it")
        elif expect not in kimi["error"]:
            problems.append(f"kimi's message lacks {expect!r}: {kimi['error']}")
        elif any(not (32 <= ord(c) < 127) for c in kimi["error"]):
            problems.append(f"kimi's message has non-printable characters: {kimi['error']!r}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", required=True, help="the kimi_safetensors_dump executable")
    ap.add_argument("--keep", help="write the case files here (default: a temporary directory, removed)")
    args = ap.parse_args()
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="kimi-st-ref-")
    root = args.keep or tmp.name
    os.makedirs(root, exist_ok=True)
    failed = 0
    all_cases = cases()
    for i, (name, kind, spec, expect) in enumerate(all_cases):
        problems = check(name, kind, spec, expect, os.path.join(root, f"case{i:02d}.safetensors"), args.dump)
        print(f"{'ok  ' if not problems else 'FAIL'} {kind:8s} {name}")
        for p in problems:
            print(f"       {p}")
        failed += bool(problems)
    print(f"{len(all_cases) - failed} of {len(all_cases)} cases as expected")
    if tmp:
        tmp.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
