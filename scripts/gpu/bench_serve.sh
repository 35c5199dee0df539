#!/usr/bin/env bash
# `kimi serve` against `kimi bench` on the same model and batch, in one device call (issue 25, Performance):
#   [KIMI_COMMIT=<sha>] bash scripts/gpu/bench_serve.sh            with `.deps` carried (scripts/gpu/fetch_deps.sh)
# 1. builds kimi (cuda preset, kimi serve on: deps.sh's cuda_build);
# 2. writes the model once with `kimi random-model CONFIG --experts bf16` (weights and its tokenizer) to $CKPT;
# 3. `kimi bench $CKPT -p 0 -n GEN -b STREAMS,EXTRA_STREAMS --context PROMPT`: decode tokens/s at each batch after
#    PROMPT tokens per sequence, the engine alone on the weights the server loads (and, for reference beside earlier
#    tables, the same rows with `--random CONFIG`: weights made on the device);
# 4. `kimi serve $CKPT --slots STREAMS` (every stream has a slot), waits for it to listen (bounded);
# 5. bench/serve/load.py: STREAMS concurrent streaming /v1/completions of PROMPT random token ids, GEN tokens each
#    (ignore_eos, temperature 0), one untimed warm-up round then ROUNDS timed rounds; then the same at each of
#    EXTRA_STREAMS (<= STREAMS) concurrent streams; stops the server;
# 6. bench/serve/bench_serve_summary.py: $OUT/serve_bench.txt and .json: per stream count, bench tok/s at that
#    batch, the server's decode tok/s (the window where every stream generates) and end-to-end output tok/s, their
#    ratios to bench, TTFT / ITL / TPOT percentiles; the server's /metrics at the end.
# Environment (defaults): CONFIG (configs/kimi-linear-48b-slice.json), STREAMS (64), EXTRA_STREAMS ("1 16"), PROMPT
# (512), GEN (128), ROUNDS (1), MAX_BATCH_TOKENS (8192: the server's tokens per step), SERVE_FLAGS (extra `kimi
# serve` flags), REPS (3), CKPT (/tmp/kimi-serve-bench-<config name>).
# A dry run on the CPU (no build, no GPU): DEVICE=cpu KIMI=build/release/kimi CONFIG=kimi-linear-tiny STREAMS=4
# EXTRA_STREAMS=1 PROMPT=64 GEN=8 OUT=/tmp/sb bash scripts/gpu/bench_serve.sh
# Output files in $OUT: serve_bench.{txt,json,log}, serve.log (the server's output), and cuda_build's logs.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 1
exec > >(tee "$OUT/serve_bench.log") 2>&1
DEVICE=${DEVICE:-cuda}
CONFIG=${CONFIG:-configs/kimi-linear-48b-slice.json}
STREAMS=${STREAMS:-64}
PROMPT=${PROMPT:-512}
GEN=${GEN:-128}
ROUNDS=${ROUNDS:-1}
REPS=${REPS:-3}
MAX_BATCH_TOKENS=${MAX_BATCH_TOKENS:-8192}
EXTRA_STREAMS=${EXTRA_STREAMS-1 16}
SERVE_FLAGS=${SERVE_FLAGS:-}
CKPT=${CKPT:-/tmp/kimi-serve-bench-$(basename "$CONFIG" .json)}
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
fail() { echo "bench_serve: $*"; exit 1; }

if [ "$DEVICE" = cpu ]; then
  kimi=${KIMI:?DEVICE=cpu: set KIMI to a built kimi binary (e.g. build/release/kimi)}
else
  . scripts/gpu/deps.sh  # $prefix (build dependencies, cpp-httplib included), cuda_build
  echo "# bench_serve: $(date -u +%Y-%m-%d) commit ${KIMI_COMMIT:-unknown}," \
    "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  echo "# $(g++ --version | head -1); $(nvcc --version | tail -1)"
  # the carried cpp-httplib (Debian 12's, built by GCC 12) must load with this machine's libstdc++: fail fast if not
  python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$prefix/usr/lib/x86_64-linux-gnu/libcpp-httplib.so.0.11" ||
    fail "the carried libcpp-httplib does not load here (above); kimi serve cannot run on this machine"
  cuda_build kimi_cli || exit 1
  kimi=./build/cuda/kimi
  echo "$(el) built"
fi
[ -x "$kimi" ] || fail "no kimi binary at $kimi"

# 2. the model, with its tokenizer (random-model writes one for vocabularies >= 512)
if [ ! -f "$CKPT/config.json" ] || [ ! -f "$CKPT/tiktoken.model" ]; then
  timeout 420 "$kimi" random-model "$CONFIG" --experts bf16 --seed 1 --out "$CKPT" --force ||
    fail "random-model $CONFIG: exit $?"
fi
echo "$(el) model $CKPT ($(du -sh "$CKPT" | cut -f1))"

# 3. the engine alone: decode at batch STREAMS (and EXTRA_STREAMS) after PROMPT tokens per sequence
batches=$(echo "$EXTRA_STREAMS $STREAMS" | tr ' ' '\n' | grep . | sort -n -u | paste -sd,)
timeout 300 "$kimi" bench "$CKPT" --device "$DEVICE" -p 0 -n "$GEN" -b "$batches" --context "$PROMPT" -r "$REPS" \
  --json="$OUT/bench.json" || fail "kimi bench $CKPT: exit $?"
if [ "$DEVICE" != cpu ]; then
  timeout 300 "$kimi" bench --random "$CONFIG" --experts bf16 --device "$DEVICE" -p 0 -n "$GEN" -b "$STREAMS" \
    --context "$PROMPT" -r "$REPS" --json="$OUT/bench_random.json" || echo "kimi bench --random $CONFIG: exit $?"
fi
echo "$(el) bench done"

# 4. the server: one slot per stream, each of PROMPT + GEN tokens (and room to spare)
ctx=$(( (PROMPT + GEN + 64 + 63) / 64 * 64 ))
# shellcheck disable=SC2086  # SERVE_FLAGS is a list of flags
"$kimi" serve "$CKPT" --device "$DEVICE" --host 127.0.0.1 --port 0 --slots "$STREAMS" --ctx-size "$ctx" \
  --max-batch-tokens "$MAX_BATCH_TOKENS" --max-queue "$STREAMS" --model-name bench $SERVE_FLAGS \
  >"$OUT/serve.log" 2>&1 &
server=$!
stop_server() {
  kill -TERM "$server" 2>/dev/null || return 0
  for _ in $(seq 300); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$server" 2>/dev/null; then
    echo "the server did not stop within 30 s of SIGTERM: killed"
    kill -KILL "$server"
  fi
  wait "$server"
  echo "server exit: $?"
}
trap stop_server EXIT
url=
for _ in $(seq 3000); do  # at most 300 s: loading the checkpoint and planning
  url=$(grep -o "listening on http://[0-9.:]*" "$OUT/serve.log" | head -1 | cut -d' ' -f3)
  [ -n "$url" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$OUT/serve.log"; fail "kimi serve exited before listening"; }
  sleep 0.1
done
[ -n "$url" ] || { tail -20 "$OUT/serve.log"; fail "kimi serve did not listen within 300 s"; }
echo "$(el) serving on $url"
cat "$OUT/serve.log"

# 5. the load: at STREAMS (ROUNDS timed rounds), then at each of EXTRA_STREAMS; a warm-up round first each time
load_rc=0
for n in $STREAMS $EXTRA_STREAMS; do
  rounds=1
  [ "$n" = "$STREAMS" ] && rounds=$ROUNDS
  timeout 900 python3 bench/serve/load.py --url "$url" --streams "$n" --prompt-tokens "$PROMPT" --max-tokens "$GEN" \
    --rounds "$rounds" --warmup 1 --seed "$n" --timeout 300 --wait-health 60 --json "$OUT/load_$n.json"
  rc=$?
  echo "$(el) load.py --streams $n: exit $rc"
  [ "$rc" = 0 ] || load_rc=$rc
done
python3 -c "import sys, urllib.request as u; sys.stdout.write(u.urlopen(sys.argv[1], timeout=10).read().decode())" \
  "$url/metrics" >"$OUT/metrics.txt" || echo "GET /metrics failed"
stop_server
trap - EXIT

# 6. the summary (the intermediate JSON files go into serve_bench.json: the device tool returns few files)
python3 bench/serve/bench_serve_summary.py "$OUT" --main-streams "$STREAMS" --prompt "$PROMPT" --gen "$GEN" ||
  echo "bench_serve_summary.py: exit $?"
rm -f "$OUT/bench.json" "$OUT/bench_random.json" "$OUT"/load_*.json "$OUT/metrics.txt"
echo "$(el) done"
exit "$load_rc"
