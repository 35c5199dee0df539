#!/usr/bin/env python3
"""Where the KDA prep kernel spends its time: ncu's per-SASS-instruction samples summed by source region.

profile_prefill.sh returns prep_sass.csv (ncu --page source --print-source sass --csv: per SASS instruction its
address, stall samples, executed warp instructions, excessive shared wavefronts) but no line information. This
script takes the line of each instruction from a local build of the same code with -lineinfo (the SASS is the same
instruction for instruction: the script checks the opcodes), keeps the outermost frame inside the kernel (an inlined
helper counts where it is called), and sums by the phases of src/cuda/kda/prep.cuh, found by their marker lines.

  nvcc -DKIMI_WITH_CUDA -Iinclude -Isrc -O3 -DNDEBUG -lineinfo -gencode=arch=compute_90a,code=sm_90a \\
    --expt-relaxed-constexpr -std=c++20 -x cu -c src/cuda/kda/chunk.cu -o /tmp/li.o
  cuobjdump -xelf all /tmp/li.o && nvdisasm -gi -c chunk.sm_90a.cubin > /tmp/chunk.sass
  python3 scripts/gpu/prep_regions.py /tmp/chunk.sass prep_sass.csv [--d 128] [--diag 1] [--chunk-heads 16384]

(cuobjdump and nvdisasm: the nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels where the toolkit lacks them.)
"""
import argparse
import csv
import os
import re
import sys

# (marker text in prep.cuh, region name): a region runs from its marker's line to the next marker's
MARKERS = [
    ("kda_chunk_prep(const __grid_constant__", "entry / setup"),
    ("// ---- L:", "L rows, factors, norms"),
    ("float pre[EPL], ra[EPL];", "L cumsum prefix"),
    ("if (staged) {  // phase A's row operands", "L staging q~, k~"),
    ("__syncthreads();  // G2, raw rows", "barrier after L, dmma test"),
    ("// ---- A:", "A blocks"),
    ("if (staged) {  // every read of k~", "A barriers before A_kk"),
    ("if (warp < units) {\n    const int i0", "A stores, per-pair diagonal"),
    ("// ---- X:", "X Qg, Kg (v)"),
    ("// KdT: warp unit", "X KdT"),
    ("static_assert(kC * 8 == kThreads", "X A_qk zeros, barrier"),
    ("// ---- S:", "S Kg, A_qk stage"),
    ("// diagonal blocks: forward substitution", "S forward substitution"),
    ("for (int d = 1; d < 4; ++d)", "S block substitution"),
    ("static_assert(kC * kC / 8 == kThreads", "S Tb"),
    ("// ---- P4:", "P4"),
]


def region_starts(prep_path):
    text = open(prep_path).read()
    starts = []
    for marker, name in MARKERS:
        i = text.find(marker)
        if i < 0:
            sys.exit(f"prep_regions.py: marker not found in {prep_path}: {marker!r}")
        starts.append((text.count("\n", 0, i) + 1, name))
    return sorted(starts)


def line_of_offsets(sass_path, kernel, first_line):
    """SASS offset -> the outermost prep.cuh line at or after the kernel's first line, for one kernel's section."""
    out, cur, inside = {}, None, False
    for l in open(sass_path):
        if l.startswith(".text."):
            inside = l.strip().rstrip(":") == ".text." + kernel
            continue
        if not inside:
            continue
        m = re.search(r'//## File "[^"]*", line (\d+)(.*)', l)
        if m:
            frames = [int(m.group(1))] if "prep.cuh" in l.split("inlined")[0] else []
            frames += [int(x) for x in re.findall(r'inlined at "[^"]*prep\.cuh", line (\d+)', m.group(2))]
            inner = [x for x in frames if x >= first_line]
            if inner:
                cur = inner[-1]
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", l)
        if m and cur is not None:
            out[int(m.group(1), 16)] = (cur, m.group(2))
    return out


def opcode(src):
    toks = src.strip().rstrip(";").split()
    if toks and toks[0].startswith("@"):
        toks = toks[1:]
    return toks[0] if toks else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass", help="nvdisasm -gi output of the local -lineinfo build")
    ap.add_argument("csv", help="prep_sass.csv from profile_prefill.sh")
    ap.add_argument("--d", type=int, default=128, help="head size of the profiled kernel")
    ap.add_argument("--diag", type=int, default=1, help="kDiagMma of the profiled kernel (0 or 1)")
    ap.add_argument("--chunk-heads", type=int, default=16384, help="grid of the profiled launch")
    ap.add_argument("--prep", default=os.path.join(os.path.dirname(__file__), "../../src/cuda/kda/prep.cuh"))
    a = ap.parse_args()
    starts = region_starts(a.prep)
    kernel = f"_ZN4kimi4cuda9kda_chunk14kda_chunk_prepILi{a.d}ELb{a.diag}EEEvNS1_6ParamsE"
    lines = line_of_offsets(a.sass, kernel, starts[0][0])
    if not lines:
        sys.exit(f"prep_regions.py: no SASS of {kernel} in {a.sass}")
    rows = list(csv.reader(open(a.csv)))
    hdr, data = rows[1], rows[2:]
    col = {k: hdr.index(k) for k in ("Address", "Source", "Warp Stall Sampling (All Samples)",
                                      "Instructions Executed", "L1 Wavefronts Shared Excessive")}
    base = int(data[0][col["Address"]], 16)
    agg, total, mismatched = {}, [0, 0, 0], 0
    for r in data:
        off = int(r[col["Address"]], 16) - base
        line, src = lines.get(off, (0, ""))
        if opcode(src) != opcode(r[col["Source"]]):
            mismatched += 1
        name = starts[0][1]
        for start, n in starts:
            if line >= start:
                name = n
        v = [int(r[col["Warp Stall Sampling (All Samples)"]] or 0), int(r[col["Instructions Executed"]] or 0),
             int(r[col["L1 Wavefronts Shared Excessive"]] or 0)]
        acc = agg.setdefault(name, [0, 0, 0])
        for i in range(3):
            acc[i] += v[i]
            total[i] += v[i]
    if mismatched:
        print(f"WARNING: {mismatched} of {len(data)} instructions differ from the local build: not the same code")
    print(f"{'region':30s} {'stall samples':>13s} {'warp instr / chunk-head':>24s} {'excessive shared wavefronts':>28s}")
    for _, n in starts:
        if n in agg:
            s, e, x = agg[n]
            print(f"{n:30s} {100 * s / max(total[0], 1):12.1f}% {e / a.chunk_heads:24.0f} {x:28d}")
    print(f"{'total':30s} {100.0:12.1f}% {total[1] / a.chunk_heads:24.0f} {total[2]:28d}")


if __name__ == "__main__":
    main()
