#!/usr/bin/env bash
# The engine end to end on the GPU machine beside transformers + FLA, in one device call (issue 23 item 6):
#   [KIMI_COMMIT=<sha>] [STEPS="build slice full k3"] [CONTEXT=512] [GEN=32] [REPS=3] bash scripts/gpu/bench_model.sh
# (split over two calls on a warm machine inside the 10-minute limit: STEPS="build slice", then STEPS="full k3")
# with `.deps` carried (FLA 0.6 wheels; transformers 5.17 and torch are on the machine's image).
#   slice: the Kimi-Linear-48B-A3B real-width 4-layer slice (configs/kimi-linear-48b-slice.json), one checkpoint
#          written by `kimi random-model` (bf16 experts), read by both engines: kimi bench and
#          bench/peers/transformers_model.py on prefill 1 x 8192 and 16 x 512, decode batch 1, 32, 128 after CONTEXT
#          tokens per sequence.
#   full:  the full-depth Kimi-Linear-48B-A3B (configs/kimi-linear-48b-a3b.json, ~98 GB bf16): kimi bench --random
#          (weights made on the GPU) and transformers from the config (random weights made on the GPU), same shapes.
#   k3:    the K3 real-width slice (named config k3-slice, MXFP4 experts), kimi bench --random alone (no peer runs K3).
# Each kimi row carries `kimi plan`'s roofline prediction for the same shape (its floor fraction); the summary table
# puts the peer's row beside it with the ratio. Output: $OUT/bench_model.txt (the summary, committed under docs/gpu/),
# $OUT/bench_model_json.tgz (every engine's rows as JSON), $OUT/bench_model.log and .csv.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/bench_model.log") 2>&1
. scripts/gpu/deps.sh  # $prefix (build dependencies), cuda_build
peer_python             # FLA 0.6 on PYTHONPATH
STEPS=${STEPS:-build slice full k3}
CONTEXT=${CONTEXT:-512}
GEN=${GEN:-32}
REPS=${REPS:-3}
has() { [[ " $STEPS " == *" $1 "* ]]; }
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
kimi=./build/cuda/kimi
echo "# bench_model: $(date -u +%Y-%m-%d) commit ${KIMI_COMMIT:-unknown}, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

if has build; then
  cuda_build kimi_cli || exit 1
  echo "$(el) built"
fi

# kimi: prefill rows (pp) then decode rows (tg), JSON into $OUT/kimi-<name>.json
kimi_rows() {  # name, model arguments...
  local name=$1; shift
  timeout 300 $kimi bench "$@" --device cuda -p 8192 -b 1 -n 0 -r "$REPS" --json="$OUT/kimi-$name-pp8192.json" &&
    timeout 300 $kimi bench "$@" --device cuda -p 512 -b 16 -n 0 -r "$REPS" --json="$OUT/kimi-$name-pp512.json" &&
    timeout 300 $kimi bench "$@" --device cuda -p 0 -n "$GEN" -b 1,32,128 --context "$CONTEXT" -r "$REPS" \
      --json="$OUT/kimi-$name-tg.json"
  local rc=$?
  echo "$(el) kimi $name: exit $rc"
}
peer_rows() {  # name, peer arguments...
  local name=$1; shift
  timeout 420 python3 bench/peers/transformers_model.py "$@" --prefill 1x8192,16x512 --decode 1,32,128 \
    --context "$CONTEXT" --steps "$GEN" --reps "$REPS" --json "$OUT/peer-$name.json"
  local rc=$?
  echo "$(el) transformers $name: exit $rc"
}

if has slice; then
  ckpt=/tmp/kimi-kl-slice
  [ -f "$ckpt/config.json" ] || timeout 300 $kimi random-model configs/kimi-linear-48b-slice.json --experts bf16 \
    --seed 1 --out "$ckpt" >"$OUT/random-model.log" 2>&1 || { echo "random-model failed"; tail "$OUT/random-model.log"; }
  echo "$(el) slice checkpoint: $(du -sh $ckpt | cut -f1)"
  kimi_rows slice "$ckpt"
  peer_rows slice --checkpoint "$ckpt"
fi
if has full; then
  kimi_rows full --random configs/kimi-linear-48b-a3b.json
  mkdir -p /tmp/kl48-config && cp configs/kimi-linear-48b-a3b.json /tmp/kl48-config/config.json
  peer_rows full --config /tmp/kl48-config
fi
if has k3; then
  kimi_rows k3 --random k3-slice
fi

python3 scripts/gpu/bench_model_summary.py "$OUT" | tee "$OUT/bench_model.txt"
# the device tool returns a handful of files: every engine's rows travel as one archive
(cd "$OUT" && tar czf bench_model_json.tgz ./*.json && rm -f ./*.json)
