#!/usr/bin/env bash
# One device run for the sequence-parallel KDA walk (branch seqpar): build, the segment tests (errors printed),
# the KDA chunk harness cases on CUDA, the prefill benchmark with segments off and automatic, ncu per-kernel
# times of 1 x 65536 H8, compute-sanitizer on the small segment cases. From the checkout root on the GPU
# machine: bash .wt-seqpar/scripts/gpu/seqpar_run.sh (carry .deps and .wt-seqpar).
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/run.log") 2>&1
. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
cmake --preset cuda -DCMAKE_PREFIX_PATH="$prefix/usr" -DKIMI_TESTS=ON -DKIMI_BENCH=ON -DKIMI_PYTHON=OFF >"$OUT/configure.log" 2>&1 ||
  { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build --preset cuda -j 16 --target kimi_tests kimi_bench_kda_prefill >"$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
echo "$(el) build ok"
T=./build/cuda/tests/kimi_tests B=./build/cuda/bench/kimi_bench_kda_prefill
timeout 60 $T --gtest_brief=1 --gtest_filter='CudaKdaSeqPar*' >"$OUT/seqpar.log" 2>&1
echo "$(el) seqpar tests: exit $?"; grep -E "^\[seqpar\]|Failure|FAILED|PASSED|Expected|Which is|actual" "$OUT/seqpar.log" | cut -c1-260 | head -40
timeout 60 $T --gtest_brief=1 --gtest_filter='*kda_chunk_fwd*cuda*' >"$OUT/harness.log" 2>&1
echo "$(el) harness kda_chunk cuda: exit $?; $(grep -E '^\[  PASSED|^\[  FAILED' "$OUT/harness.log" | tr '\n' ' ')"
grep -E "Failure|worst" "$OUT/harness.log" | head -10
echo "$(el) full bench, segments off:"; timeout 70 $B seg=off
echo "$(el) full bench, automatic:"; timeout 70 $B
echo "$(el) 1 x 65536 H8 at forced segment lengths (chunks):"
for L in 103 147 256 342; do timeout 20 $B 4 seg=$L | sed -E "s/.*H= 8/H8/"; done
KIMI_SEQPAR_SMALL=1 timeout 50 compute-sanitizer --tool racecheck $T --gtest_brief=1 --gtest_filter='CudaKdaSeqPar*' >"$OUT/san-racecheck.log" 2>&1
echo "$(el) compute-sanitizer racecheck: exit $?; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|^\[  FAILED' "$OUT/san-racecheck.log" | tr '\n' ' ')"
echo "$(el) ncu 1 x 65536 H8 (automatic):"
timeout 40 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:kda --launch-skip 40 --launch-count 4 $B 4 2>&1 |
  grep -E "kda_|gpu__time_duration" | sed -E 's/\(kimi::cuda::kda_chunk::Params\)//; s/ +/ /g' | head -12
KIMI_SEQPAR_SMALL=1 timeout 40 compute-sanitizer --tool memcheck $T --gtest_brief=1 --gtest_filter='CudaKdaSeqPar*' >"$OUT/san-memcheck.log" 2>&1
echo "$(el) compute-sanitizer memcheck: exit $?; $(grep -E 'ERROR SUMMARY|^\[  PASSED|^\[  FAILED' "$OUT/san-memcheck.log" | tr '\n' ' ')"
