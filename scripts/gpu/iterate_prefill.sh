#!/usr/bin/env bash
# Light iteration on the GPU machine for the KDA prefill kernel (the device tool's `run`, `.deps` carried):
#   KIMI_COMMIT=<sha> bash scripts/gpu/iterate_prefill.sh
# Builds kimi_tests, kimi_bench_kda_prefill and kimi only, runs the KDA tests (CPU and CUDA cases vs fp64), the
# relative errors of the chunk cases (`kimi check --small --filter kda_chunk`), the prefill benchmark, and
# per-kernel times (ncu gpu__time_duration) of two calls on shapes KIMI_NCU_SHAPES (indices of
# bench_kda_prefill.cpp, default "0 4"), the benchmark and the ncu times of the first shape again under each
# VAR=value of KIMI_AB (environment A/B knobs, when the code under test reads any), compute-sanitizer
# racecheck (and memcheck with KIMI_MEMCHECK=1) on the CUDA chunk cases (KIMI_SANITIZE=0 skips them), and last
# the chunk cases at model shapes (`kimi check --filter kda_chunk`, KIMI_CHECK_BIG=0 skips it). run_all.sh is
# the full run.
# From a git worktree inside the checkout (carried to the GPU machine, e.g. .wt-prefill):
#   KIMI_COMMIT=<sha> bash .wt-prefill/scripts/gpu/iterate_prefill.sh   (carry .deps and .wt-prefill)
# DEPS (default .deps, else ../.deps: the carried one sits at the checkout root) holds the build dependencies.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/iterate.log") 2>&1
. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
echo "# iterate_prefill commit ${KIMI_COMMIT:-unknown} $(nvidia-smi --query-gpu=name --format=csv,noheader)"
t0=$(date +%s)
cuda_build kimi_tests kimi_bench_kda_prefill kimi_cli || exit 1
echo "build: $(( $(date +%s) - t0 )) s"
grep -E "kda_chunk|registers|spill" "$OUT/build.log" | grep -B1 -E "spill" | grep -v "0 bytes spill" | head -20
timeout 120 ./build/cuda/tests/kimi_tests --gtest_brief=1 --gtest_filter='*kda*:*Kda*:*KDA*' >"$OUT/tests.log" 2>&1
echo "kda tests: exit $?; $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$OUT/tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|Failure" "$OUT/tests.log" | head -20
timeout 60 stdbuf -oL ./build/cuda/kimi check --small --filter kda_chunk >"$OUT/check.log" 2>&1
echo "kimi check --small --filter kda_chunk: exit $?"
grep -E "cuda.*bf16|FAIL|passed" "$OUT/check.log"
timeout 60 ./build/cuda/bench/kimi_bench_kda_prefill
ncu_times() {  # shape index, then an optional VAR=value
  timeout 60 env ${2:-KIMI_NCU_NONE=1} ncu --clock-control none --metrics gpu__time_duration.sum -k regex:kda_chunk \
    --launch-skip 30 --launch-count ${KIMI_NCU_COUNT:-4} ./build/cuda/bench/kimi_bench_kda_prefill "$1" 2>&1 |
    grep -E "kda_chunk|gpu__time_duration|kimi kda" | sed -E 's/\(int, int, int\)//; s/ +/ /g'
}
for ab in ${KIMI_AB-}; do
  echo "== A/B $ab"
  env "$ab" timeout 60 ./build/cuda/bench/kimi_bench_kda_prefill
done
for s in ${KIMI_NCU_SHAPES-0 4}; do ncu_times "$s"; done
for ab in ${KIMI_AB-}; do
  echo "== ncu A/B $ab"
  ncu_times "$(echo ${KIMI_NCU_SHAPES-0 4} | cut -d' ' -f1)" "$ab"
done
if [ "${KIMI_SANITIZE:-1}" = 1 ]; then
  for tool in racecheck $([ "${KIMI_MEMCHECK:-0}" = 1 ] && echo memcheck); do
    timeout 60 compute-sanitizer --tool $tool ./build/cuda/tests/kimi_tests --gtest_brief=1 \
      --gtest_filter='*kda_chunk_fwd_bf16_cuda*' >"$OUT/sanitizer-$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $?; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|^\[  FAILED' "$OUT/sanitizer-$tool.log" | tr '\n' ' ')"
  done
fi
if [ "${KIMI_CHECK_BIG:-1}" = 1 ]; then
  timeout ${KIMI_CHECK_BIG_SECONDS:-40} stdbuf -oL ./build/cuda/kimi check --filter kda_chunk >"$OUT/check-big.log" 2>&1
  echo "kimi check --filter kda_chunk: exit $?"
  grep -E "bf16|FAIL|passed" "$OUT/check-big.log"
fi
echo "total: $(( $(date +%s) - t0 )) s"
