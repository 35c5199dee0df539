#!/usr/bin/env bash
# Per-kernel times of decode steps on the GPU machine (the device tool's `run`, `.deps` carried): Nsight Compute
# profiles every kernel node of the replayed decode graphs (`--graph-profiling node`; ncu serialises kernels, so
# the sum is the kernels' own time without launch gaps), and scripts/gpu/kernel_times_summary.py folds them by
# kernel name per step beside the step's wall time from `kimi bench` (the difference is launch gaps and host work).
#   KT_ROWS="slice:1 full:1" bash scripts/gpu/kernel_times.sh   ->  $OUT/kernel_times.txt (+ one CSV per row)
# A row is CONFIG:BATCH, CONFIG one of slice (configs/kimi-linear-48b-slice.json), full (kimi-linear-48b-a3b),
# k3 (scripts/gpu/k3-gpu-slice.json). Context 0: every profiled step is a decode step.
# KT_CSV_DIR (default $OUT): where the raw CSVs go (the full model's is too large to bring back: give a local dir).
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
CSV=${KT_CSV_DIR:-$OUT}
mkdir -p "$OUT" "$CSV"
cd "$(dirname "$0")/../.."
. scripts/gpu/deps.sh
[ -x build/cuda/kimi ] && [ -z "${KT_BUILD:-}" ] || cuda_build kimi_cli || exit 1
declare -A cfg=([slice]=configs/kimi-linear-48b-slice.json [full]=configs/kimi-linear-48b-a3b.json
                [k3]=scripts/gpu/k3-gpu-slice.json)
for row in ${KT_ROWS:-slice:1 full:1}; do
  name=${row%%:*} b=${row##*:} c=${cfg[${row%%:*}]}
  echo "== $name batch $b ($c)" | tee -a "$OUT/kernel_times.txt"
  ./build/cuda/kimi bench --random "$c" --device cuda -p 0 -n 16 -b "$b" -r 3 --warmup 1 2>&1 | grep -E "tg16|weights" |
    tee -a "$OUT/kernel_times.txt"
  # 2 steps profiled: -n 2, no warm-up, one run; the random weights' fill_kernel launches (~20 k for the full
  # model's per-expert tensors) are left out by name (every kernel whose name does not start with "fi")
  timeout 400 ncu --clock-control none --graph-profiling node --csv --page raw --print-units base \
    --kernel-name-base function --kernel-name 'regex:^([^f]|f[^i])' \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size \
    ./build/cuda/kimi bench --random "$c" --device cuda -p 0 -n 2 -b "$b" -r 1 --warmup 0 \
    >"$CSV/ncu_${name}_b$b.csv" 2>"$CSV/ncu_${name}_b$b.err"
  python3 scripts/gpu/kernel_times_summary.py "$CSV/ncu_${name}_b$b.csv" --steps 2 | tee -a "$OUT/kernel_times.txt"
done
