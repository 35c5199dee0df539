#!/usr/bin/env bash
# A refactor's "behaviour unchanged" check on the GPU machine, in one call (the device tool's `run`, `.deps` and the
# former tree carried):
#   BASE=<dir> [BASE_COMMIT=<sha>] [KIMI_COMMIT=<sha>] [STEPS="tests bench sanitize"] [SIDES="base tree"]
#     [BENCH_ROUNDS=2] [BENCH_F32=1] bash scripts/gpu/before_after.sh
# BASE is a folder inside the checkout holding the former tree (`git archive <sha> | tar -x -C base`, the folder
# git-ignored). Both trees are built (the cuda preset with tests and the KDA benchmarks), then each runs:
#   - the whole test binary (every CPU and CUDA harness case against the fp64 oracle, the conformance shapes, the
#     model-on-GPU parity tests): pass / fail counts and the per-shape error lines the KDA tests print;
#   - the KDA prefill and decode benchmarks, alternating base / tree BENCH_ROUNDS times so that both see the same
#     clocks;
#   - (tree only) compute-sanitizer memcheck and racecheck on the small KDA CUDA cases.
# STEPS and SIDES pick a part, so that the whole check can be split over two calls inside the 10-minute limit; the
# builds (build/cuda and build/base-cuda, kept on a warm machine) are incremental.
# Output: $OUT/before_after.log (everything) and $OUT/logs.tgz (each step's full log).
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
LOG=${LOG:-/tmp/kimi-gpu-logs}
mkdir -p "$OUT" "$LOG"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/before_after.log") 2>&1
trap 'tar czf "$OUT/logs.tgz" -C "$LOG" . 2>/dev/null' EXIT
. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
summary() { grep -E '^\[  PASSED|^\[  FAILED|^\[  SKIPPED|tests? ran' "$1" | tr '\n' ' '; }
BASE=${BASE:?BASE=<folder holding the former tree>}
echo "# before_after: base ${BASE_COMMIT:-$BASE}, tree ${KIMI_COMMIT:-unknown}, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

build() {  # source dir, log name
  local src=$1 name=$2
  local bin=build/cuda; [ "$name" = base ] && bin=../build/base-cuda
  (cd "$src" && cmake --preset cuda -B "$bin" -DCMAKE_PREFIX_PATH="$prefix/usr" -DKIMI_TESTS=ON -DKIMI_BENCH=ON -DKIMI_PYTHON=OFF \
      >"$LOG/configure-$name.log" 2>&1 &&
    cmake --build "$bin" -j 8 --target kimi_tests kimi_bench_kda_prefill kimi_bench_kda_decode kimi_cli \
      >"$LOG/build-$name.log" 2>&1) ||
    { echo "build of $name failed:"; grep -E "error|FAILED" -A5 "$LOG/build-$name.log" | head -60; return 1; }
}
[ -e "$BASE/.deps" ] || ln -s "$PWD/.deps" "$BASE/.deps"
pids=()
for side in ${SIDES:-base tree}; do
  if [ $side = base ]; then build "$BASE" base & else build . tree & fi
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || exit 1; done
echo "$(el) built: ${SIDES:-base tree}"
grep -hE "spill" "$LOG/build-tree.log" | grep -v " 0 bytes spill" | sort | uniq -c | head

bin() { [ "$1" = base ] && echo build/base-cuda || echo build/cuda; }
has() { [[ " ${STEPS:-tests bench sanitize} " == *" $1 "* ]]; }
if has tests; then
for side in ${SIDES:-base tree}; do
  timeout 400 "$(bin $side)/tests/kimi_tests" --gtest_brief=1 >"$LOG/tests-$side.log" 2>&1
  rc=$?
  echo "$(el) [$side] all tests: exit $rc; $(summary "$LOG/tests-$side.log")"
  grep -E "^\[  FAILED|Failure" -A3 "$LOG/tests-$side.log" | head -30
  # the lines the KDA tests print per shape (errors vs fp64), for a side-by-side diff
  grep -E "^\[ (kda_|prefill)|^\[seqpar\]|on cuda:0 vs" "$LOG/tests-$side.log" | sed -E 's/[0-9.]+ ?ms//g' | sort \
    >"$OUT/errors-$side.txt"
done
if [ -f "$OUT/errors-base.txt" ] && [ -f "$OUT/errors-tree.txt" ]; then
  echo "$(el) per-shape error lines: base $(wc -l <"$OUT/errors-base.txt"), tree $(wc -l <"$OUT/errors-tree.txt"); diff:"
  diff "$OUT/errors-base.txt" "$OUT/errors-tree.txt" | head -40 && echo "(identical)"
fi
fi

has bench && for r in $(seq "${BENCH_ROUNDS:-2}"); do
  for side in ${SIDES:-base tree}; do
    echo "$(el) [$side] round $r: prefill"
    timeout 90 "$(bin $side)/bench/kimi_bench_kda_prefill" 2>&1 | sed "s/^/[$side] /"
    echo "$(el) [$side] round $r: decode"
    timeout 90 "$(bin $side)/bench/kimi_bench_kda_decode" 2>&1 | sed "s/^/[$side] /"
  done
done
# an fp32 o (BENCH_F32=1, where both trees' benchmark takes o=f32)
[ "${BENCH_F32:-0}" = 1 ] && has bench && for side in ${SIDES:-base tree}; do
  timeout 90 "$(bin $side)/bench/kimi_bench_kda_prefill" o=f32 2>&1 | sed "s/^/[$side o=f32] /"
done

if has sanitize; then
  T=./build/cuda/tests/kimi_tests
  small='*kda_decode*cuda*:KdaDecodeStep.Cuda*:CudaKdaSeqPar*:*kda_chunk_fwd_bf16_cuda*:KdaCudaShapes.OEpiloguesAgree'
  small="$small:KdaCudaShapes.RowLoadPathsAgree:KdaCudaShapes.SegmentWalks:KdaOneTokenCuda.*"
  for tool in memcheck racecheck; do
    KIMI_SEQPAR_SMALL=1 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $T --gtest_brief=1 \
      --gtest_filter="$small" >"$LOG/sanitizer-$tool.log" 2>&1
    rc=$?
    echo "$(el) [tree] compute-sanitizer $tool: exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' \
      "$LOG/sanitizer-$tool.log" | tail -1); $(summary "$LOG/sanitizer-$tool.log")"
  done
fi
echo "$(el) done"
