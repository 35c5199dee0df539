#!/usr/bin/env python3
"""Folds an Nsight Compute raw CSV (scripts/gpu/kernel_times.sh) by kernel name: launches per step, us per step,
DRAM bytes per step and GB/s, sorted by time. Kernels that make the random weights (name has 'random') are left
out: they run once, before the steps."""
import argparse
import csv
import io
import sys


def num(s):
    """ncu prints numbers with thousands separators."""
    return float((s or "0").replace(",", ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, required=True, help="decode steps the profile covers")
    a = ap.parse_args()
    text = open(a.csv, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        sys.exit(f"{a.csv}: no ncu CSV header (see the .err file)")
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    rows = [r for r in rows if r.get("Kernel Name") and r["ID"].isdigit()]
    agg = {}
    for r in rows:
        name = r["Kernel Name"]
        if "random" in name.lower():
            continue
        short = name.split("(")[0][:90]
        t = num(r["gpu__time_duration.sum"]) / 1e3  # ns -> us
        by = num(r["dram__bytes_read.sum"]) + num(r["dram__bytes_write.sum"])
        e = agg.setdefault(short, [0, 0.0, 0.0, r.get("launch__grid_size", ""), r.get("launch__block_size", "")])
        e[0] += 1
        e[1] += t
        e[2] += by
    tot_t = sum(e[1] for e in agg.values()) / a.steps
    tot_b = sum(e[2] for e in agg.values()) / a.steps
    n = sum(e[0] for e in agg.values()) / a.steps
    print(f"kernels per step {n:.0f}, kernel time per step {tot_t:.1f} us, DRAM {tot_b / 1e6:.1f} MB "
          f"({tot_b / max(tot_t, 1e-9) / 1e3:.0f} GB/s over kernel time)")
    print(f"{'kernel':90s} {'n/step':>7s} {'us/step':>9s} {'share':>6s} {'MB/step':>8s} {'GB/s':>6s} grid x block")
    for name, (c, t, by, g, bl) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:90s} {c / a.steps:7.1f} {t / a.steps:9.1f} {100 * t / a.steps / max(tot_t, 1e-9):5.1f}% "
              f"{by / a.steps / 1e6:8.2f} {by / max(t, 1e-9) / 1e3:6.0f} {g} x {bl}")


if __name__ == "__main__":
    main()
