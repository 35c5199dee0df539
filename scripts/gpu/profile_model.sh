#!/usr/bin/env bash
# Where the engine's step time goes on the GPU machine (the device tool's `run`, `.deps` carried): builds kimi_cli,
# then `kimi bench --profile` (per-operator time under the cost model's layer kinds, beside kimi plan's prediction)
# on random weights made on the GPU: the Kimi-Linear real-width slice and, with FULL=1, the full Kimi-Linear-48B-A3B.
# Rows: prefill 1 x 8192 and 16 x 512, decode at batch 1, 32, 128 after 512 tokens of context.
# Writes $OUT/profile_<model>.txt (tables) and $OUT/profile_<model>.json.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
. scripts/gpu/deps.sh
cuda_build kimi_cli || exit 1
kimi=./build/cuda/kimi
run() {  # name config
  "$kimi" bench --random "$2" --device cuda -p 8192 -b 1 -n 0 -r 3 --profile --json="$OUT/profile_$1_pp1.json" \
    >"$OUT/profile_$1.txt" 2>&1 || { tail -20 "$OUT/profile_$1.txt"; return 1; }
  "$kimi" bench --random "$2" --device cuda -p 512 -b 16 -n 0 -r 3 --profile --json="$OUT/profile_$1_pp16.json" \
    >>"$OUT/profile_$1.txt" 2>&1 || { tail -20 "$OUT/profile_$1.txt"; return 1; }
  "$kimi" bench --random "$2" --device cuda -p 0 -n 16 -b 1,32,128 --context 512 -r 2 --profile \
    --json="$OUT/profile_$1_tg.json" >>"$OUT/profile_$1.txt" 2>&1 || { tail -20 "$OUT/profile_$1.txt"; return 1; }
  grep -v "^bench: \[" "$OUT/profile_$1.txt"
}
run slice configs/kimi-linear-48b-slice.json
[ "${FULL:-0}" = 1 ] && run full configs/kimi-linear-48b-a3b.json
exit 0
