#!/usr/bin/env bash
# End-to-end decode with and without programmatic dependent launch (src/cuda/pdl.cuh), one device call (the device
# tool's `run`, `.deps` carried): builds kimi and the tests, runs the tests of the ops and the model on the GPU that
# the change touches (TESTS=0: none), then `kimi bench --random` decode rows on the Kimi-Linear slice, the full
# Kimi-Linear-48B-A3B and the K3 real-width slice (named config k3-slice), alternating KIMI_CUDA_PDL=1 / 0 so both see the same clocks.
# AB_VAR / AB_VALUES alternate another switch instead (AB_VAR=KIMI_CUDA_GEMV AB_VALUES="mma ffma": the tensor-core
# GEMV against the FFMA GEMV + cuBLAS, src/cuda/linear/linear.cu).
#   [TESTS=0] [BATCHES=1,32,128] [MODELS="slice full k3"] [AB_VAR=.. AB_VALUES=".."] bash scripts/gpu/decode_ab.sh
#   ->  $OUT/decode_ab.txt
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
. scripts/gpu/deps.sh
t0=$(date +%s)
if [ "${TESTS:-1}" != 0 ]; then cuda_build kimi_cli kimi_tests || exit 1; else cuda_build kimi_cli || exit 1; fi
echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/decode_ab.txt"
if [ "${TESTS:-1}" != 0 ]; then
  f='*moe_router*:*Moe*:*oe_*:*Gemv*:*inear*:*ModelCuda*:*Parity*:*DecodeGraph*:*Capture*:*kda_decode*:*rms_norm*'
  timeout 300 ./build/cuda/tests/kimi_tests --gtest_brief=1 --gtest_filter="$f" >"$OUT/tests.log" 2>&1
  echo "tests: exit $?; $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$OUT/tests.log" | tr '\n' ' ')" |
    tee -a "$OUT/decode_ab.txt"
  grep -E "^\[  FAILED  \]" "$OUT/tests.log" | head -20 | tee -a "$OUT/decode_ab.txt"
fi
declare -A cfg=([slice]=configs/kimi-linear-48b-slice.json [full]=configs/kimi-linear-48b-a3b.json
                [k3]=k3-slice)
for m in ${MODELS:-slice full k3}; do
  for v in ${AB_VALUES:-1 0}; do
    echo "== $m ${AB_VAR:-KIMI_CUDA_PDL}=$v" | tee -a "$OUT/decode_ab.txt"
    env "${AB_VAR:-KIMI_CUDA_PDL}=$v" timeout 200 ./build/cuda/kimi bench --random "${cfg[$m]}" --device cuda -p 0 -n 16 \
      -b "${BATCHES:-1,32,128}" --context 512 -r 3 --warmup 1 2>&1 | grep -E "tg16|error" | tee -a "$OUT/decode_ab.txt"
  done
done
