#!/usr/bin/env bash
# Nsight Compute on mla_decode's kernels for a few decode shapes (the device tool's `run`, `.deps` carried):
#   [SHAPES="64 32 4096 bf16;32 1 512 f32"] bash scripts/gpu/ncu_mla_decode.sh
# Builds kimi_bench_mla and profiles `kimi_bench_mla decode H N len cache` per shape: the first tensor-core call's
# kernels (absorb, table, attend, combine) with the speed-of-light, occupancy, memory and warp-state sections, clocks
# left alone (METHOD.md). Writes $OUT/ncu_mla_decode.txt.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
. scripts/gpu/deps.sh
cuda_build kimi_bench_mla || exit 1
SHAPES=${SHAPES:-"64 32 4096 bf16;32 32 4096 f32;32 1 512 f32;64 1 32768 bf16"}
IFS=';' read -ra shapes <<<"$SHAPES"
for s in "${shapes[@]}"; do
  echo "## kimi_bench_mla decode $s" | tee -a "$OUT/ncu_mla_decode.txt"
  # the row's own timing first (no profiler), then one profiled call: warm-up calls skipped
  ./build/cuda/bench/kimi_bench_mla decode $s | tail -1 | tee -a "$OUT/ncu_mla_decode.txt"
  ncu --clock-control none --kernel-name regex:'mla_|decode_table' --launch-skip 12 --launch-count 4 \
    --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section LaunchStats ./build/cuda/bench/kimi_bench_mla decode $s 2>&1 | grep -v "^==PROF==" |
    grep -E "mla_|decode_table|Duration|Throughput|Occupancy|Registers|Shared Memory|Block Size|Grid Size|Stall|Warp Cycles|Issued|L1/TEX Hit|L2 Hit|Waves|Busy|Bandwidth|DRAM" \
    >>"$OUT/ncu_mla_decode.txt"
done
echo "done"
