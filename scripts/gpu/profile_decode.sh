#!/usr/bin/env bash
# Profile of the fused KDA decode step's streaming (bulk) kernels on the GPU machine (the device tool's `run`, `.deps`
# carried): builds the decode bench, then ncu (throughputs, stall reasons, occupancy, memory) of one kv and one vk
# launch at B x H = KIMI_NCU_STEP (default "256 32": the state-traffic target's shape). Writes $OUT/ncu_decode.txt
# (full details) and prints the lines that compare the two.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
cuda_build kimi_bench_kda_decode || exit 1
b=./build/cuda/bench/kimi_bench_kda_decode
for layout in kv vk; do
  "$b" step ${KIMI_NCU_STEP:-256 32} "$layout"
  timeout 150 ncu --clock-control none --import-source no -k "regex:kda_decode_step_${layout}_bulk" --launch-skip 10 \
    --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --section InstructionStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section Occupancy --section LaunchStats -o "/tmp/decode_$layout" "$b" step ${KIMI_NCU_STEP:-256 32} "$layout" \
    >/dev/null 2>&1
  ncu --import "/tmp/decode_$layout.ncu-rep" --print-details all >>"$OUT/ncu_decode.txt" 2>&1
done
grep -E "kda_decode_step_|Duration|DRAM Throughput|Memory Throughput|Warp Cycles Per Issued|Issued Ipc|Stall|No Eligible|Active Warps|Achieved Occ|Theoretical Occ|Block Limit|Registers Per|Executed Instructions  |Bank Conflicts|Shared Load|Shared Store|L2 Hit|Waves Per SM" "$OUT/ncu_decode.txt" | head -90
