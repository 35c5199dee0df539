#!/usr/bin/env bash
# The fused KDA decode step on the GPU machine in one call (the device tool's `run`), from a worktree:
#   run(command="cd .wt-NAME && bash scripts/gpu/iterate_decode.sh", carry=[".deps", ".wt-NAME"])
# Builds kimi_tests and kimi_bench_kda_decode (cuda preset), runs the kda_decode_step harness cases (CPU and
# CUDA) and KdaDecodeStep.*, compute-sanitizer memcheck and racecheck of the CUDA ones, then the benchmark
# (~75 s of device time). Output: $OUT/summary.txt.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
summary() { echo "$@" | tee -a "$OUT/summary.txt"; }
t0=$(date +%s)
cuda_build kimi_tests kimi_bench_kda_decode || exit 1
summary "build: $(( $(date +%s) - t0 )) s"
T=./build/cuda/tests/kimi_tests
cuda_filter='*kda_decode*cuda*:KdaDecodeStep.Cuda*'
timeout 120 $T --gtest_brief=1 --gtest_filter='*kda_decode*:KdaDecodeStep.*' >"$OUT/tests.log" 2>&1
summary "tests (default): exit $?; $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$OUT/tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|Failure|Expected|Which is|err" "$OUT/tests.log" | head -20
timeout ${MEMCHECK_SECONDS:-60} compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_brief=1 --gtest_filter="$cuda_filter" >"$OUT/memcheck.log" 2>&1
summary "memcheck: exit $? ($(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1); $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$OUT/memcheck.log" | tr '\n' ' '))"
timeout ${RACECHECK_SECONDS:-60} compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_brief=1 --gtest_filter="$cuda_filter" >"$OUT/racecheck.log" 2>&1
summary "racecheck: exit $? ($(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1); $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$OUT/racecheck.log" | tr '\n' ' '))"
timeout ${BENCH_SECONDS:-60} ./build/cuda/bench/kimi_bench_kda_decode 2>&1 | grep -v kda_recurrent_fwd | sed 's/kimi kda_decode_step //; s/K=V=128 //' | tee -a "$OUT/summary.txt"
summary "total: $(( $(date +%s) - t0 )) s"
