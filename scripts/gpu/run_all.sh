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

. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
peer_python             # FLA 0.6 on PYTHONPATH, Triton's cache in build/triton-cache

summary() { echo "$@" | tee -a "$OUT/summary.txt"; }
summary "# kimi.cpp GPU run: $(date -u +%Y-%m-%d) commit ${KIMI_COMMIT:-unknown}"
summary "# $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
summary "# nvcc $(nvcc --version | tail -1)"

# Each step is bounded so that the whole call ends inside the device tool's 10-minute limit.
step() { local limit=$1; shift; timeout "$limit" "$@"; }

t0=$(date +%s)
cuda_build kimi_tests kimi_cli kimi_bench_kda_decode kimi_bench_kda_prefill kimi_bench_mla kimi_bench_linear \
  kimi_bench_state_stream || exit 1
summary "build: $(( $(date +%s) - t0 )) s"

echo "== tests (CPU and CUDA cases; the model on the GPU is the next step)"
model_tests='*ModelCuda*:*Parity*Cuda*:*Placement*'
step 180 ./build/cuda/tests/kimi_tests --gtest_brief=1 --gtest_filter="-$model_tests" >"$OUT/tests.log" 2>&1
summary "tests: exit $?; $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|tests ran' "$OUT/tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|Failure|rel|error" "$OUT/tests.log" | head -40

echo "== the model on the GPU: tests (CUDA vs CPU model, parity fixtures through the CUDA model), then generate"
step 120 ./build/cuda/tests/kimi_tests --gtest_brief=1 --gtest_filter="$model_tests" >"$OUT/model-tests.log" 2>&1
summary "model tests (CUDA): exit $?; $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \]' "$OUT/model-tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|Failure|on cuda:0 vs" "$OUT/model-tests.log" | head -40 | tee -a "$OUT/summary.txt"
step 90 compute-sanitizer --tool memcheck --error-exitcode 9 ./build/cuda/tests/kimi_tests --gtest_brief=1 \
  --gtest_filter='Tiny/ModelCuda.LogitsMatch*/K3_gpu_max:Tiny/ModelCuda.VarlenBatch*/KimiLinear_no_linear' \
  >"$OUT/model-memcheck.log" 2>&1
summary "model memcheck (K3 all on the GPU, Kimi-Linear mixed): exit $? ($(grep -E 'ERROR SUMMARY' "$OUT/model-memcheck.log" | tail -1))"
# k3-tiny, then a K3-shaped slice (K3's widths: hidden 7168, 96 KDA / MLA heads, latent MoE with MXFP4 experts, on
# one KDA and one MLA layer, 8 experts, vocab 8192: ~2.3 GB, scripts/gpu/k3-gpu-slice.json), each on the CPU and
# with --device cuda; the placement line and the fallback notes say which blocks ran where.
ids() { python3 -c "import random; r=random.Random($2); print(','.join(str(r.randrange($3)) for _ in range($1)))"; }
step 20 ./build/cuda/kimi random-model k3-tiny --out /tmp/kimi-k3-tiny >/dev/null 2>&1
step 60 ./build/cuda/kimi random-model scripts/gpu/k3-gpu-slice.json --experts mxfp4 --out /tmp/kimi-k3-gpu-slice \
  >"$OUT/model-random.log" 2>&1 || summary "random-model k3-gpu-slice: exit $? (see model-random.log)"
for m in "k3-tiny 512 128 4 32" "k3-gpu-slice 8192 64 2 8"; do
  set -- $m
  args=(); for b in $(seq 1 "$4"); do args+=(--prompt "$(ids "$3" "$b" "$2")"); done
  for dev in cpu cuda; do
    step 60 ./build/cuda/kimi generate "/tmp/kimi-$1" "${args[@]}" --max-tokens "$5" --warmup --device "$dev" \
      >"$OUT/model-$1-$dev.log" 2>&1
    summary "generate $1 ($4 x $3 tokens, $5 new) --device $dev: exit $?; $(grep -E '^(prefill|decode)' "$OUT/model-$1-$dev.log" | tr -s ' ' | tr '\n' ' ')"
  done
  grep -E "^placement|^kimi:|^device" "$OUT/model-$1-cuda.log" | sort -u | tee -a "$OUT/summary.txt"
done

echo "== KDA decode and prefill: kimi.cpp, then FLA 0.6 on the same shapes and options"
step 60 ./build/cuda/bench/kimi_bench_kda_decode 2>&1 | tee -a "$OUT/summary.txt"
step 30 ./build/cuda/bench/kimi_bench_state_stream 2>&1 | tee -a "$OUT/summary.txt"  # the decode's streaming ceiling
step 45 ./build/cuda/bench/kimi_bench_kda_prefill 2>&1 | tee -a "$OUT/summary.txt"
step 60 ./build/cuda/bench/kimi_bench_mla 2>&1 | tee -a "$OUT/summary.txt"
PYTHONUNBUFFERED=1 step 45 python3 bench/peers/fla_kda.py 2>&1 | grep -v Warning | tee -a "$OUT/summary.txt"
echo "== linear (GEMV for decode M, cuBLAS above) against plain cuBLAS bf16"
step 60 ./build/cuda/bench/kimi_bench_linear 2>&1 | tee -a "$OUT/summary.txt"

echo "== compute-sanitizer memcheck (CUDA cases)"
step ${MEMCHECK_SECONDS:-150} compute-sanitizer --tool memcheck --error-exitcode 9 ./build/cuda/tests/kimi_tests --gtest_brief=1 \
  --gtest_filter='*cuda*:KdaDecodeStep.Cuda*:KdaOneTokenCuda.*' >"$OUT/sanitizer-memcheck.log" 2>&1
summary "compute-sanitizer memcheck: exit $? ($(grep -E 'ERROR SUMMARY' "$OUT/sanitizer-memcheck.log" | tail -1); $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$OUT/sanitizer-memcheck.log" | tr '\n' ' '))"
echo "== compute-sanitizer racecheck (CUDA kda, mla, attn_res, moe, norm cases)"
step ${RACECHECK_SECONDS:-90} compute-sanitizer --tool racecheck --error-exitcode 9 ./build/cuda/tests/kimi_tests --gtest_brief=1 \
  --gtest_filter='*kda*cuda*:KdaOneTokenCuda.*:*mla*cuda*:*attn_res*cuda*:*moe*cuda*:*norm*cuda*' \
  >"$OUT/sanitizer-racecheck.log" 2>&1
summary "compute-sanitizer racecheck: exit $? ($(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/sanitizer-racecheck.log" | tail -1))"

echo "== kimi check (model shapes, CUDA rows): the K3 / Kimi-Linear layer decode steps (the chunk rows' fp64 oracle
# at model shapes takes minutes on the host, more than this call can give it)"
step 60 ./build/cuda/kimi check --filter kda_decode >"$OUT/check.txt" 2>&1
summary "kimi check --filter kda_decode: exit $? $(tail -1 "$OUT/check.txt")"
grep -E " cuda" "$OUT/check.txt" | tee -a "$OUT/summary.txt"

# FLA's chunk_kda autotunes its Triton kernels on first calls (minutes on a fresh machine; a second call on the warm
# machine finds them in build/triton-cache): opt in with FLA_PREFILL_SECONDS=<limit>; whatever finishes in time is
# printed.
if [ "${FLA_PREFILL_SECONDS:-0}" -gt 0 ]; then
  echo "== FLA 0.6 chunk_kda prefill"
  PYTHONUNBUFFERED=1 step "$FLA_PREFILL_SECONDS" python3 bench/peers/fla_kda_prefill.py 2>&1 | grep -v Warning | tee -a "$OUT/summary.txt"
fi
summary "total: $(( $(date +%s) - t0 )) s"
