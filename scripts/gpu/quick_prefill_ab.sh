#!/usr/bin/env bash
# The shortest useful GPU call for a prefill-kernel change (a few minutes of device time; the device tool's `run`,
# `.deps` carried): builds kimi_tests and the prefill benchmark, runs the KDA chunk cases that cover every kernel
# path (the conformance shapes excluded: verify_kda.sh / run_all.sh run those), compute-sanitizer racecheck on the
# small chunk cases (last, after the comparison), the benchmark on SHAPES (indices of bench/cuda/bench_kda_prefill.cpp, default "0 3 5 6"),
# then, for each directory of AB="dir ..." (files at their repository paths laid over a copy of the tree, e.g.
# main's versions of the changed files from `git archive`), the same shapes of that build, prefixed [<dir's name>]:
# a change and what it replaced timed in the same call.
#   [AB="ab/base ab/step1"] [SHAPES="0 3"] bash scripts/gpu/quick_prefill_ab.sh
# Output: $OUT/quick.log.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/quick.log") 2>&1
. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
. scripts/gpu/overlay.sh  # overlay_tree
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
build() {  # source dir, targets...
  local src=$1; shift
  (cd "$src" && cmake --preset cuda -DCMAKE_PREFIX_PATH="$prefix/usr" -DKIMI_TESTS=ON -DKIMI_BENCH=ON \
    -DKIMI_PYTHON=OFF >/tmp/quick-configure.log 2>&1 && cmake --build build/cuda -j 16 --target "$@" \
    >/tmp/quick-build.log 2>&1) || { grep -E "error" -A5 /tmp/quick-build.log | head -40; return 1; }
}
bench() {  # binary, prefix
  for sh in ${SHAPES:-0 3 5 6}; do timeout 30 "$1" "$sh" | sed "s/^/$2/"; done
}
build . kimi_tests kimi_bench_kda_prefill || exit 1
echo "$(el) build ok"
T=./build/cuda/tests/kimi_tests
cases='*kda_chunk*cuda*:KdaCudaShapes.RowLoadPathsAgree:KdaCudaShapes.WalkKernelsAgree:KdaCudaShapes.ShortAndRaggedT'
cases="$cases:KdaCudaShapes.GateSweepExtremes:CudaKdaSeqPar*"
KIMI_SEQPAR_SMALL=1 timeout 90 $T --gtest_brief=1 --gtest_filter="$cases" >/tmp/quick-tests.log 2>&1
rc=$?; echo "$(el) KDA chunk tests: exit $rc; $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/quick-tests.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" -A3 /tmp/quick-tests.log | head -20
bench ./build/cuda/bench/kimi_bench_kda_prefill ""
for dir in ${AB:-}; do  # each overlay built and timed in turn, its lines prefixed [<dir's name>]
  name=$(basename "$dir") src=build/ab-$(basename "$dir")
  overlay_tree "$src" "$dir" && build "$src" kimi_bench_kda_prefill && echo "$(el) [$name] built" &&
    bench "$src/build/cuda/bench/kimi_bench_kda_prefill" "[$name] "
done
KIMI_SEQPAR_SMALL=1 timeout 80 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_brief=1 \
  --gtest_filter='*kda_chunk_fwd_bf16_cuda*:KdaCudaShapes.WalkKernelsAgree' >/tmp/quick-racecheck.log 2>&1
rc=$?; echo "$(el) racecheck: exit $rc; $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' /tmp/quick-racecheck.log | tail -1)"
echo "$(el) done"
