#!/usr/bin/env bash
# Profile of the KDA prefill kernels on the GPU machine (the device tool's `run`, `.deps` carried): builds the
# prefill bench, then ncu (stall reasons, source counters, per-SASS-line samples) of one prep and one walk
# launch on shape KIMI_NCU_SHAPE (index of bench_kda_prefill.cpp, default 4). Writes $OUT/ncu.txt and
# $OUT/prep_sass.csv, $OUT/walk_sass.csv. KIMI_NCU_KERNELS="prep" profiles one of the two; from a worktree
# (carried with .deps): bash .wt-prefill/scripts/gpu/profile_prefill.sh.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
cuda_build kimi_bench_kda_prefill || exit 1
b=./build/cuda/bench/kimi_bench_kda_prefill
for k in ${KIMI_NCU_KERNELS:-prep walk}; do
  timeout 150 ncu --clock-control none --import-source no -k regex:kda_chunk_$k --launch-skip 10 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --section InstructionStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    -o /tmp/$k "$b" ${KIMI_NCU_SHAPE:-4} >/dev/null 2>&1
  ncu --import /tmp/$k.ncu-rep --print-details all >>"$OUT/ncu.txt" 2>&1
  ncu --import /tmp/$k.ncu-rep --page source --print-source sass --csv >"$OUT/${k}_sass.csv" 2>&1
done
grep -E "Duration|Warp Cycles Per Issued|Issued Ipc|Stall|No Eligible|Active Warps|Theoretical Occ|Achieved Occ|Excessive|Memory Throughput|L1/TEX Hit|Executed Instructions  |Block Limit|Registers Per|Shared Memory Config|Dynamic Shared|Bank Conflicts|Wavefronts" "$OUT/ncu.txt" | head -80
