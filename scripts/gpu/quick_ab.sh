#!/usr/bin/env bash
# The shortest useful GPU call for a kernel change (a few minutes of device time; the device tool's `run`, `.deps`
# carried), for OP=prefill (default: the KDA chunk kernels) or OP=decode (the fused KDA decode step):
#   prefill: builds kimi_tests and the prefill benchmark, runs the KDA chunk cases that cover every kernel path (the
#     conformance shapes excluded: verify_kda.sh / run_all.sh run those), the benchmark on SHAPES (indices of
#     bench/cuda/bench_kda_prefill.cpp, default "0 3 5 6"), once per walk of WALKS if set (e.g. "wg rs": the
#     benchmark's walk= argument, where the tree's benchmark has it; default: the launcher's choice);
#   decode: builds kimi_tests and the decode benchmark, runs the kda_decode_step harness cases (CPU and CUDA) and
#     KdaDecodeStep.*, compute-sanitizer memcheck of the CUDA ones, the benchmark's decode-step lines;
# then, for each directory of AB="dir ..." (files at their repository paths laid over a copy of the tree, e.g. main's
# versions of the changed files from `git archive`), the same benchmark of that build, prefixed [<dir's name>]: a
# change and what it replaced timed in the same call; last, compute-sanitizer racecheck on the op's small CUDA cases.
#   [OP=decode] [AB="ab/base ab/step1"] [SHAPES="0 3"] [WALKS="wg rs"] bash scripts/gpu/quick_ab.sh
# Output: $OUT/quick.log (and $OUT/racecheck.log, the report, when racecheck finds hazards).
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/quick.log") 2>&1
. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
. scripts/gpu/overlay.sh  # overlay_tree
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
OP=${OP:-prefill}
case $OP in
  prefill)
    target=kimi_bench_kda_prefill
    cases='*kda_chunk*cuda*:KdaCudaShapes.RowLoadPathsAgree:KdaCudaShapes.WalkKernelsAgree:KdaCudaShapes.ShortAndRaggedT'
    cases="$cases:KdaCudaShapes.GateSweepExtremes:CudaKdaSeqPar*"
    sanitized='*kda_chunk_fwd_bf16_cuda*:KdaCudaShapes.WalkKernelsAgree:KdaCudaShapes.RowLoadPathsAgree'
    bench() {  # binary, prefix
      for sh in ${SHAPES:-0 3 5 6}; do
        if [ -n "${WALKS:-}" ]; then
          for w in $WALKS; do timeout 30 "$1" "$sh" "walk=$w" | sed "s/^/$2/"; done
        else
          timeout 30 "$1" "$sh" | sed "s/^/$2/"
        fi
      done
    } ;;
  decode)
    target=kimi_bench_kda_decode
    cases='*kda_decode*:KdaDecodeStep.*'
    sanitized='*kda_decode*cuda*:KdaDecodeStep.Cuda*'
    bench() { timeout 90 "$1" | grep kda_decode_step | sed "s/kimi kda_decode_step //; s/K=V=128 //; s/^/$2/"; } ;;
  *) echo "OP=$OP: expected prefill or decode"; exit 2 ;;
esac
build() {  # source dir, targets...
  local src=$1; shift
  (cd "$src" && cmake --preset cuda -DCMAKE_PREFIX_PATH="$prefix/usr" -DKIMI_TESTS=ON -DKIMI_BENCH=ON \
    -DKIMI_PYTHON=OFF >/tmp/quick-configure.log 2>&1 && cmake --build build/cuda -j 16 --target "$@" \
    >/tmp/quick-build.log 2>&1) || { grep -E "error" -A5 /tmp/quick-build.log | head -40; return 1; }
}
build . kimi_tests $target || exit 1
echo "$(el) build ok"
T=./build/cuda/tests/kimi_tests
KIMI_SEQPAR_SMALL=1 timeout 120 $T --gtest_brief=1 --gtest_filter="$cases" >/tmp/quick-tests.log 2>&1
rc=$?; echo "$(el) $OP tests: exit $rc; $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/quick-tests.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" -A3 /tmp/quick-tests.log | head -20
if [ "$OP" = decode ]; then
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_brief=1 --gtest_filter="$sanitized" \
    >/tmp/quick-memcheck.log 2>&1
  rc=$?; echo "$(el) memcheck: exit $rc; $(grep -E 'ERROR SUMMARY' /tmp/quick-memcheck.log | tail -1)"
fi
bench ./build/cuda/bench/$target ""
for dir in ${AB:-}; do  # each overlay built and timed in turn, its lines prefixed [<dir's name>]
  name=$(basename "$dir") src=build/ab-$(basename "$dir")
  overlay_tree "$src" "$dir" && build "$src" $target && echo "$(el) [$name] built" &&
    bench "$src/build/cuda/bench/$target" "[$name] "
done
KIMI_SEQPAR_SMALL=1 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter="$sanitized" >/tmp/quick-racecheck.log 2>&1  # (not brief: each test's name before its hazards)
rc=$?; echo "$(el) racecheck: exit $rc; $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' /tmp/quick-racecheck.log | tail -1)"
if [ $rc -ne 0 ]; then  # the report for the next step, and which kernels and tests the hazards are in
  head -c 2000000 /tmp/quick-racecheck.log >"$OUT/racecheck.log"
  grep -oE "kda_[a-z_]+<[^>]*>|^\[ RUN +\] [A-Za-z_./0-9]+" /tmp/quick-racecheck.log | uniq -c | head -40
fi
echo "$(el) done"
