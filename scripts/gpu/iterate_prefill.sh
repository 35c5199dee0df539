#!/usr/bin/env bash
# Light iteration on the GPU machine for the KDA prefill kernel (the device tool's `run`, `.deps` carried):
#   KIMI_COMMIT=<sha> bash scripts/gpu/iterate_prefill.sh
# Builds kimi_tests and kimi_bench_kda_prefill only, runs the KDA tests (CPU and CUDA cases vs fp64), the
# prefill benchmark, and per-kernel times (ncu gpu__time_duration) of two calls on shapes KIMI_NCU_SHAPES
# (indices of bench_kda_prefill.cpp, default "0 4"), and the benchmark again under each VAR=value of KIMI_AB
# (environment A/B knobs, when the code under test reads any). run_all.sh is the full run.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/iterate.log") 2>&1
prefix=/tmp/kimi-deps
mkdir -p "$prefix"
for f in .deps/debs/*.deb; do dpkg -x "$f" "$prefix"; done
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$prefix/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
echo "# iterate_prefill commit ${KIMI_COMMIT:-unknown} $(nvidia-smi --query-gpu=name --format=csv,noheader)"
t0=$(date +%s)
cmake --preset cuda -DCMAKE_PREFIX_PATH="$prefix/usr" -DKIMI_TESTS=ON -DKIMI_BENCH=ON >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build --preset cuda -j 16 --target kimi_tests kimi_bench_kda_prefill >"$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
grep -E "kda_chunk|registers|spill" "$OUT/build.log" | grep -B1 -E "spill" | grep -v "0 bytes spill" | head -20
timeout 120 ./build/cuda/tests/kimi_tests --gtest_brief=1 --gtest_filter='*kda*:*Kda*:*KDA*' >"$OUT/tests.log" 2>&1
echo "kda tests: exit $?; $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$OUT/tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|Failure" "$OUT/tests.log" | head -20
grep -iE "chunk.*cuda.*rel|rel.*err" "$OUT/tests.log" | head -20
timeout 60 ./build/cuda/bench/kimi_bench_kda_prefill
for ab in ${KIMI_AB-}; do
  echo "== A/B $ab"
  env "$ab" timeout 60 ./build/cuda/bench/kimi_bench_kda_prefill
done
for s in ${KIMI_NCU_SHAPES-0 4}; do
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:kda_chunk --launch-skip 30 \
    --launch-count ${KIMI_NCU_COUNT:-4} ./build/cuda/bench/kimi_bench_kda_prefill "$s" 2>&1 |
    grep -E "kda_chunk|gpu__time_duration|kimi kda" | sed -E 's/\(int, int, int\)//; s/ +/ /g'
done
echo "total: $(( $(date +%s) - t0 )) s"
