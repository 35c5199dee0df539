#!/usr/bin/env bash
# Builds, checks and benchmarks everything on the GPU machine in one call (the device tool's `run`):
#   KIMI_COMMIT=<sha> bash scripts/gpu/run_all.sh        with `.deps` carried (see below)
# The GPU machine has no package registry: `.deps/debs/*.deb` (the Debian -dev packages kimi.cpp builds
# with, from `apt-get download`, see scripts/gpu/fetch_deps.sh) are unpacked into a prefix, and
# `.deps/*.whl` (FLA 0.6 and einops, the peer) into a Python target folder.
# Output: $OUT/summary.txt (the short table, committed under docs/gpu/), and the full logs.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/full.log") 2>&1

prefix=/tmp/kimi-deps
mkdir -p "$prefix"
for f in .deps/debs/*.deb; do dpkg -x "$f" "$prefix"; done
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$prefix/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/kimi-site .deps/*.whl
export PYTHONPATH=/tmp/kimi-site

summary() { echo "$@" | tee -a "$OUT/summary.txt"; }
summary "# kimi.cpp GPU run: $(date -u +%Y-%m-%d) commit ${KIMI_COMMIT:-unknown}"
summary "# $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
summary "# nvcc $(nvcc --version | tail -1)"

t0=$(date +%s)
cmake --preset cuda -DCMAKE_PREFIX_PATH="$prefix/usr" -DKIMI_BENCH=ON >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build --preset cuda -j 16 --target kimi_tests kimi_cli kimi_bench_kda_decode >"$OUT/build.log" 2>&1 \
  || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
summary "build: $(( $(date +%s) - t0 )) s"

echo "== tests (CPU and CUDA cases)"
./build/cuda/tests/kimi_tests --gtest_brief=1 >"$OUT/tests.log" 2>&1
rc=$?
summary "tests: exit $rc; $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$OUT/tests.log" | head -3 | tr '\n' ' ')"
grep -E "FAILED|Failure|error" "$OUT/tests.log" | head -40

echo "== compute-sanitizer (CUDA cases)"
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 ./build/cuda/tests/kimi_tests --gtest_brief=1 \
    --gtest_filter='*cuda*' >"$OUT/sanitizer-$tool.log" 2>&1
  summary "compute-sanitizer $tool: exit $? ($(grep -cE '^\[       OK \]|PASSED' "$OUT/sanitizer-$tool.log") ok lines; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1))"
done

echo "== kimi check (model shapes)"
./build/cuda/kimi check >"$OUT/check.txt" 2>&1
summary "kimi check: exit $? $(tail -1 "$OUT/check.txt")"
grep -E "cuda" "$OUT/check.txt" | tee -a "$OUT/summary.txt"

echo "== KDA decode: kimi.cpp vs FLA 0.6 (same shapes and options)"
./build/cuda/bench/kimi_bench_kda_decode 2>&1 | tee -a "$OUT/summary.txt"
python3 bench/peers/fla_kda.py 2>&1 | grep -v Warning | tee -a "$OUT/summary.txt"
