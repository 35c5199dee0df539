#!/usr/bin/env bash
# The shortest useful GPU call for a kernel change (a few minutes of device time; the device tool's `run`, `.deps`
# carried), for OP=prefill (default: the KDA chunk kernels) or OP=decode (the fused KDA decode step):
#   prefill: builds kimi_tests and the prefill benchmark, runs the KDA chunk cases that cover every kernel path (the
#     conformance shapes excluded: verify_kda.sh / run_all.sh run those), the benchmark on SHAPES (indices of
#     bench/cuda/bench_kda_prefill.cpp, default "0 3 5 6"), with the launcher's choices or once per variant of
#     VARIANTS (argument sets of the benchmark, commas for spaces, e.g. "seg=off seg=100 o=f32,seg=off");
#   decode: builds kimi_tests and the decode benchmark, runs the kda_decode_step and kda_recurrent_fwd harness cases
#     (CPU and CUDA), KdaDecodeStep.* and KdaOneTokenCuda.*, compute-sanitizer memcheck of the CUDA ones, the
#     benchmark's decode-step and one-token recurrence lines;
# then, for each directory of AB="dir ..." (files at their repository paths laid over a copy of the tree, e.g. main's
# versions of the changed files from `git archive`; or def:MACRO[,MACRO...]: the tree built with -DMACRO, a
# compile-time switch such as walk_rs.cuh's experiments), the same benchmark of that build, prefixed [<name>]: a
# change and what it replaced timed in the same call (AB_TESTS=1: each overlay also built with the tests and
# checked like the tree, racecheck included: several branches validated in one call); last, compute-sanitizer
# racecheck on the op's small CUDA cases (RACECHECK=0: not for the tree).
#   [OP=decode] [FLA=1 [FLA_SECONDS=300]] [AB="ab/base ab/step1"] [AB_TESTS=1] [SHAPES="0 3"]
#   [VARIANTS="seg=off seg=80"] [RACECHECK=0] [TESTS=0] bash scripts/gpu/quick_ab.sh
# (TESTS=0: the tree's tests and racecheck skipped, for a benchmark sweep of a tree already checked. FLA=1, decode:
# FLA 0.6's fused_recurrent_kda on its benchmark shapes (bench/peers/fla_kda.py) after the tree's lines; prefill:
# FLA 0.6's chunk_kda on the bounded-gate shapes of SHAPES (bench/peers/fla_kda_prefill.py) within FLA_SECONDS
# (default 300; its first calls autotune for minutes, whose results build/triton-cache keeps for the next call
# while the machine is warm).)
# Output: $OUT/quick.log (and $OUT/racecheck[-<name>].log, the report, where racecheck finds hazards).
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
    cases='*kda_chunk*cuda*:KdaCudaShapes.RowLoadPathsAgree:KdaCudaShapes.OEpiloguesAgree'
    cases="$cases:KdaCudaShapes.ShortAndRaggedT"
    cases="$cases:KdaCudaShapes.GateSweepExtremes:CudaKdaSeqPar*"
    cases="$cases:KdaCudaShapes.SegmentWalks"
    sanitized='*kda_chunk_fwd_bf16_cuda*:KdaCudaShapes.OEpiloguesAgree:KdaCudaShapes.RowLoadPathsAgree'
    sanitized="$sanitized:CudaKdaSeqPar*:KdaCudaShapes.SegmentWalks"
    # neither: one run per shape with the launcher's choices
    variants=${VARIANTS:-}
    bench() {  # binary, prefix
      for sh in ${SHAPES:-0 3 5 6}; do
        for v in ${variants:-default}; do
          local args=${v//,/ }; [ "$v" = default ] && args=""
          echo "$2shape $sh${args:+ $args}: $(timeout 30 "$1" "$sh" $args | tail -1)"
        done
      done
    } ;;
  decode)
    target=kimi_bench_kda_decode
    cases='*kda_decode*:KdaDecodeStep.*:*kda_recurrent_fwd*:KdaOneTokenCuda.*'
    sanitized='*kda_decode*cuda*:KdaDecodeStep.Cuda*:*kda_recurrent_fwd*cuda*:KdaOneTokenCuda.*'
    bench() { timeout 120 "$1" | grep -E "kda_decode_step|kda_recurrent_fwd" |
      sed -E "s/kimi (kda_decode_step|kda_recurrent_fwd) /\1 /; s/K=V=128 |K=128 V=128 //; s/^/$2/"; } ;;
  *) echo "OP=$OP: expected prefill or decode"; exit 2 ;;
esac
build() {  # source dir, targets... (CUDA_FLAGS: extra nvcc flags, e.g. -DMACRO)
  local src=$1; shift
  (cd "$src" && cmake --preset cuda -DCMAKE_PREFIX_PATH="$prefix/usr" -DKIMI_TESTS=ON -DKIMI_BENCH=ON \
    -DKIMI_PYTHON=OFF -DCMAKE_CUDA_FLAGS="${CUDA_FLAGS:-}" >/tmp/quick-configure.log 2>&1 &&
    cmake --build build/cuda -j 16 --target "$@" \
    >/tmp/quick-build.log 2>&1) || { grep -E "error" -A5 /tmp/quick-build.log | head -40; return 1; }
}
tree_targets="kimi_tests $target"; [ "${TESTS:-1}" = 0 ] && tree_targets=$target
build . $tree_targets || exit 1
echo "$(el) build ok"
check() {  # test binary, prefix, log tag: the op's cases (and the decode memcheck)
  local T=$1 pre=$2 tag=$3
  KIMI_SEQPAR_SMALL=1 timeout 120 $T --gtest_brief=1 --gtest_filter="$cases" >/tmp/quick-tests$tag.log 2>&1
  rc=$?
  echo "$(el) $pre$OP tests: exit $rc; $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/quick-tests$tag.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" -A3 /tmp/quick-tests$tag.log | head -20
  if [ "$OP" = decode ]; then
    timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_brief=1 --gtest_filter="$sanitized" \
      >/tmp/quick-memcheck$tag.log 2>&1
    rc=$?; echo "$(el) ${pre}memcheck: exit $rc; $(grep -E 'ERROR SUMMARY' /tmp/quick-memcheck$tag.log | tail -1)"
  fi
}
racecheck() {  # test binary, prefix, log tag; on hazards: the report to $OUT/racecheck<tag>.log, and which kernels
  local T=$1 pre=$2 tag=$3   # and tests they are in (not brief: each test's name comes before its hazards)
  KIMI_SEQPAR_SMALL=1 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
    --gtest_filter="$sanitized" >/tmp/quick-racecheck$tag.log 2>&1
  rc=$?
  echo "$(el) ${pre}racecheck: exit $rc; $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' /tmp/quick-racecheck$tag.log |
    tail -1)"
  if [ $rc -ne 0 ]; then
    head -c 2000000 /tmp/quick-racecheck$tag.log >"$OUT/racecheck$tag.log"
    grep -oE "kda_[a-z_]+<[^>]*>|^\[ RUN +\] [A-Za-z_./0-9]+" /tmp/quick-racecheck$tag.log | uniq -c | head -40
  fi
}
[ "${TESTS:-1}" = 1 ] && check ./build/cuda/tests/kimi_tests "" ""
bench ./build/cuda/bench/$target ""
if [ "${FLA:-0}" = 1 ]; then  # FLA 0.6 on the same shapes, same call
  peer_python  # Triton's autotuning results kept in build/triton-cache
  if [ "$OP" = decode ]; then  # fused_recurrent_kda
    PYTHONUNBUFFERED=1 timeout 60 python3 bench/peers/fla_kda.py 2>&1 | grep -v Warning
  else  # chunk_kda on the bounded-gate shapes of SHAPES (0 .. 5)
    fla_shapes=$(for sh in ${SHAPES:-0 3 5 6}; do [ "$sh" -le 5 ] && printf '%s ' "$sh"; done)
    if [ -n "$fla_shapes" ]; then
      PYTHONUNBUFFERED=1 timeout "${FLA_SECONDS:-300}" python3 bench/peers/fla_kda_prefill.py $fla_shapes 2>&1 |
        grep -v Warning
      rc=${PIPESTATUS[0]}
      echo "$(el) FLA done: exit $rc$([ "$rc" = 124 ] && echo " (FLA_SECONDS ran out; its autotuning is kept)")"
    fi
  fi
fi
for item in ${AB:-}; do  # each overlay built and timed in turn (AB_TESTS=1: also checked), its lines prefixed [<name>]
  dir=$item name=$(basename "$item") flags=""
  if [ "${item#def:}" != "$item" ]; then  # def:MACRO[,MACRO...]: the tree itself built with -DMACRO ...
    name=${item#def:} dir=$(mktemp -d)
    flags="-D${name//,/ -D}" name=${name//,/+}  # no comma in the build path: nvcc splits -I paths at commas
  fi
  src=build/ab-$name
  targets=$target; [ "${AB_TESTS:-0}" = 1 ] && targets="kimi_tests $target"
  overlay_tree "$src" "$dir" && CUDA_FLAGS="$flags" build "$src" $targets && echo "$(el) [$name] built" || continue
  [ "${AB_TESTS:-0}" = 1 ] && check "$src/build/cuda/tests/kimi_tests" "[$name] " "-$name"
  bench "$src/build/cuda/bench/$target" "[$name] "
  [ "${AB_TESTS:-0}" = 1 ] && racecheck "$src/build/cuda/tests/kimi_tests" "[$name] " "-$name"
done
[ "${RACECHECK:-1}" = 1 ] && [ "${TESTS:-1}" = 1 ] && racecheck ./build/cuda/tests/kimi_tests "" ""
echo "$(el) done"
