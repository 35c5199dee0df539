#!/usr/bin/env bash
# A focused GPU call for the KDA kernels when device time is short (the device tool's `run`, `.deps` carried):
#   KIMI_COMMIT=<sha> [AB_DEFINES="MACRO1 MACRO2"] [FALLBACK_DEFINES="MACRO"] [DEADLINE=<s>] [NCU_SHAPES="0 4"]
#     [AB_OVERLAY="name:dir ..."] [SMOKE="<gtest filter>"] bash scripts/gpu/verify_kda.sh
# Builds kimi_tests and the two KDA benchmarks, runs every KDA test (harness CPU + CUDA cases vs fp64, the
# conformance shapes of tests/test_kda_cuda_shapes.cpp, the segment cases) and the model-on-GPU tests, the
# prefill and decode benchmarks, compute-sanitizer memcheck and racecheck on the small KDA CUDA cases, then, while
# the DEADLINE (seconds since start, default 420) allows, each AB_DEFINES macro: a second build with
# -D<macro> (a compile-time switch back to a former kernel) and the two benchmarks again, prefixed [<macro>], so
# that a change and what it replaced are timed in the same call. NCU_SHAPES (indices of bench_kda_prefill.cpp):
# the per-kernel times (ncu gpu__time_duration) of the prefill kernels on those shapes, for each build.
# AB_OVERLAY (name:dir, dir inside the checkout holding files at their repository paths, e.g. a branch's changed
# files from `git archive`): a copy of the tree with those files laid over it, built and checked the same way
# (KDA chunk tests, benchmarks, ncu, racecheck / synccheck on the small cases), prefixed [name]: a branch measured
# beside main in one call (OV_CHECK=0: benchmarks and ncu only, for a tree already checked). run_all.sh is the full run.
# Output: $OUT/verify.log (everything) and $OUT/logs.tgz (the log of each step; the device returns at most 8 files).
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
LOG=${LOG:-/tmp/kimi-gpu-logs}
mkdir -p "$OUT" "$LOG"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/verify.log") 2>&1
trap 'tar czf "$OUT/logs.tgz" -C "$LOG" . 2>/dev/null' EXIT
. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
. scripts/gpu/overlay.sh  # overlay_tree
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
left() { echo $(( ${DEADLINE:-420} - ($(date +%s) - t0) )); }
summary() { grep -E '^\[  PASSED|^\[  FAILED|^\[  SKIPPED' "$1" | tr '\n' ' '; }
echo "# verify_kda commit ${KIMI_COMMIT:-unknown} $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

build() {  # build dir, extra CUDA flags, targets...
  local dir=$1 flags=$2; shift 2
  cmake --preset cuda -B "$dir" -DCMAKE_PREFIX_PATH="$prefix/usr" -DKIMI_TESTS=ON -DKIMI_BENCH=ON -DKIMI_PYTHON=OFF \
    -DCMAKE_CUDA_FLAGS="$flags" >"$LOG/configure-$(basename "$dir").log" 2>&1 &&
    cmake --build "$dir" -j 16 --target "$@" >"$LOG/build-$(basename "$dir").log" 2>&1 ||
    { grep -E "error|FAILED" -A5 "$LOG/build-$(basename "$dir").log" | head -60; return 1; }
}
build build/cuda "" kimi_tests kimi_bench_kda_prefill kimi_bench_kda_decode || exit 1
echo "$(el) build ok"; grep -E "spill" "$LOG/build-cuda.log" | grep -v " 0 bytes spill" | sort | uniq -c | head

T=./build/cuda/tests/kimi_tests
if [ -n "${SMOKE:-}" ]; then  # SMOKE=<gtest filter>: a quick first check of a new kernel; the call stops if it fails
  # (or outlasts SMOKE_SECONDS: keep the conformance shapes out of the filter, they take ~40 s)
  timeout ${SMOKE_SECONDS:-60} $T --gtest_brief=1 --gtest_filter="$SMOKE" >"$LOG/tests-smoke.log" 2>&1
  rc=$?
  echo "$(el) smoke tests ($SMOKE): exit $rc; $(summary "$LOG/tests-smoke.log")"
  grep -E "^\[ (kda_|prefill)|^\[  FAILED|Failure" -A3 "$LOG/tests-smoke.log" | head -40
  [ $rc -eq 0 ] || exit 1
fi
# The decode-step cases first, briefly: if they fail (or hang) and FALLBACK_DEFINES is set, the main build is
# redone with those macros (compile-time switches back to the former kernels) so that the rest of the call
# measures correct code.
decode='*kda_decode*:*KdaDecode*'
timeout 60 $T --gtest_brief=1 --gtest_filter="$decode" >"$LOG/tests-decode.log" 2>&1
rc=$?
echo "$(el) decode-step tests: exit $rc; $(summary "$LOG/tests-decode.log")"
grep -E "^\[  FAILED|Failure" -A3 "$LOG/tests-decode.log" | head -20
if [ $rc -ne 0 ] && [ -n "${FALLBACK_DEFINES:-}" ]; then
  flags=""; for d in $FALLBACK_DEFINES; do flags="$flags -D$d"; done
  echo "$(el) rebuilding with$flags"
  build build/cuda "$flags" kimi_tests kimi_bench_kda_prefill kimi_bench_kda_decode || exit 1
  timeout 60 $T --gtest_brief=1 --gtest_filter="$decode" >"$LOG/tests-decode.log" 2>&1
  rc=$?; echo "$(el) decode-step tests ($flags): exit $rc; $(summary "$LOG/tests-decode.log")"
fi
timeout 200 $T --gtest_brief=1 --gtest_filter="*kda*:*Kda*:*KDA*-$decode" >"$LOG/tests-kda.log" 2>&1
rc=$?; echo "$(el) the other KDA tests: exit $rc; $(summary "$LOG/tests-kda.log")"
grep -E "^\[  FAILED|Failure" -A3 "$LOG/tests-kda.log" | head -30
grep -E "^\[ (kda_|prefill)|^\[seqpar\]" "$LOG/tests-kda.log"
timeout 120 $T --gtest_brief=1 --gtest_filter='*ModelCuda*:*Parity*Cuda*' >"$LOG/tests-model.log" 2>&1
rc=$?; echo "$(el) model tests on the GPU: exit $rc; $(summary "$LOG/tests-model.log")"
grep -E "^\[  FAILED|on cuda:0 vs" "$LOG/tests-model.log" | head -10

ncu_times() {  # bench binary, then the lines' prefix
  for sh in ${NCU_SHAPES:-}; do
    timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:"kda_chunk|kda_seg" --launch-skip 20 \
      --launch-count 6 "$1" "$sh" 2>&1 | grep -E "kda_chunk_(prep|walk)|kda_seg|gpu__time_duration|kimi kda" |
      sed -E 's/, Context.*//; s/ +/ /g' | sed "s/^/$2[ncu $sh]/"
  done
}
echo "$(el) benchmarks"
timeout 60 ./build/cuda/bench/kimi_bench_kda_prefill
timeout 60 ./build/cuda/bench/kimi_bench_kda_decode | grep -E "decode_step|floor"
ncu_times ./build/cuda/bench/kimi_bench_kda_prefill ""

small='*kda_decode*cuda*:KdaDecodeStep.Cuda*:CudaKdaSeqPar*:*kda_chunk_fwd_bf16_cuda*:KdaCudaShapes.OEpiloguesAgree'
small="$small:KdaCudaShapes.RowLoadPathsAgree"  # every row-load path of the prep
small="$small:KdaCudaShapes.SegmentWalks"  # the segments with both O epilogues
small="$small:KdaOneTokenCuda.*"  # kda_recurrent_fwd's one-token kernels, both families
for tool in memcheck racecheck synccheck; do
  KIMI_SEQPAR_SMALL=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $T --gtest_brief=1 \
    --gtest_filter="$small" >"$LOG/sanitizer-$tool.log" 2>&1
  rc=$?; echo "$(el) compute-sanitizer $tool: exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/sanitizer-$tool.log" | tail -1); $(summary "$LOG/sanitizer-$tool.log")"
done

for d in ${AB_DEFINES:-}; do
  if [ "$(left)" -lt 70 ]; then echo "$(el) A/B $d skipped (deadline)"; continue; fi
  build "build/ab-$d" "-D$d" kimi_bench_kda_prefill kimi_bench_kda_decode || continue
  echo "$(el) A/B: -D$d"
  timeout 45 "./build/ab-$d/bench/kimi_bench_kda_prefill" | sed "s/^/[$d] /"
  timeout 40 "./build/ab-$d/bench/kimi_bench_kda_decode" | grep -E "decode_step" | sed "s/^/[$d] /"
  ncu_times "./build/ab-$d/bench/kimi_bench_kda_prefill" "[$d]"
done
for ov in ${AB_OVERLAY:-}; do
  name=${ov%%:*} dir=${ov#*:} src="build/ov-${ov%%:*}-src"
  if [ "$(left)" -lt 90 ]; then echo "$(el) overlay $name skipped (deadline)"; continue; fi
  overlay_tree "$src" "$dir" || { echo "overlay $name: copy failed"; continue; }
  (cd "$src" && build "build/cuda" "" kimi_tests kimi_bench_kda_prefill) || continue
  To="$src/build/cuda/tests/kimi_tests"
  echo "$(el) overlay $name built"
  if [ "${OV_CHECK:-1}" = 1 ]; then
    timeout 120 $To --gtest_brief=1 --gtest_filter='*kda_chunk*:KdaCuda*:CudaKdaSeqPar*' >"$LOG/tests-ov-$name.log" 2>&1
    rc=$?; echo "$(el) [$name] KDA chunk tests: exit $rc; $(summary "$LOG/tests-ov-$name.log")"
    grep -E "^\[  FAILED|Failure" -A3 "$LOG/tests-ov-$name.log" | head -20
  fi
  timeout 45 "$src/build/cuda/bench/kimi_bench_kda_prefill" | sed "s/^/[$name] /"
  ncu_times "$src/build/cuda/bench/kimi_bench_kda_prefill" "[$name]"
  [ "${OV_CHECK:-1}" = 1 ] || continue
  for tool in racecheck synccheck; do
    KIMI_SEQPAR_SMALL=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $To --gtest_brief=1 \
      --gtest_filter='*kda_chunk_fwd_bf16_cuda*:KdaCudaShapes.OEpiloguesAgree' >"$LOG/sanitizer-ov-$name-$tool.log" 2>&1
    rc=$?; echo "$(el) [$name] compute-sanitizer $tool: exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/sanitizer-ov-$name-$tool.log" | tail -1)"
  done
done
echo "$(el) done"
