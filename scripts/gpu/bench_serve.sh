#!/usr/bin/env bash
# `kimi serve` against `kimi bench` on the same model and batch, in one device call (issue 25, Performance):
#   [KIMI_COMMIT=<sha>] bash scripts/gpu/bench_serve.sh            with `.deps` carried (scripts/gpu/fetch_deps.sh)
# 1. builds kimi (cuda preset, kimi serve on: deps.sh's cuda_build);
# 2. writes the model once with `kimi random-model CONFIG --experts bf16` (weights and its tokenizer) to $CKPT;
# 3. `kimi bench $CKPT -p 0 -n GEN -b STREAMS --context PROMPT`: decode tokens/s at batch STREAMS after PROMPT
#    tokens per sequence, the engine alone on the same weights the server loads (and, for reference beside earlier
#    tables, the same row with `--random CONFIG`: weights made on the device);
# 4. `kimi serve $CKPT --slots STREAMS` (every stream has a slot), waits for it to listen (bounded);
# 5. bench/serve/load.py: STREAMS concurrent streaming /v1/completions of PROMPT random token ids, GEN tokens each
#    (ignore_eos, temperature 0), one untimed warm-up round then ROUNDS timed rounds; stops the server;
# 6. $OUT/serve_bench.txt and .json: bench tok/s, the server's decode tok/s (the window where every stream generates,
#    load.py) and its end-to-end output tok/s, their ratios to bench, TTFT / ITL / TPOT percentiles.
# Environment (defaults): CONFIG (configs/kimi-linear-48b-slice.json), STREAMS (64), PROMPT (512), GEN (128),
# ROUNDS (1), MAX_BATCH_TOKENS (8192: the server's tokens per step), SERVE_FLAGS (extra `kimi serve` flags), REPS (3).
# A dry run on the CPU (no build, no GPU): DEVICE=cpu KIMI=build/release/kimi CONFIG=kimi-linear-tiny STREAMS=4
# PROMPT=64 GEN=8 OUT=/tmp/sb bash scripts/gpu/bench_serve.sh
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

# 3. the engine alone: decode at batch STREAMS after PROMPT tokens per sequence
timeout 300 "$kimi" bench "$CKPT" --device "$DEVICE" -p 0 -n "$GEN" -b "$STREAMS" --context "$PROMPT" -r "$REPS" \
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

# 5. the load: a warm-up round (its own prompts), then the timed rounds
timeout 900 python3 bench/serve/load.py --url "$url" --streams "$STREAMS" --prompt-tokens "$PROMPT" \
  --max-tokens "$GEN" --rounds "$ROUNDS" --warmup 1 --timeout 300 --wait-health 60 --json "$OUT/load.json"
load_rc=$?
echo "$(el) load.py exit $load_rc"
python3 -c "import sys, urllib.request as u; sys.stdout.write(u.urlopen(sys.argv[1], timeout=10).read().decode())" \
  "$url/metrics" >"$OUT/metrics.txt" || echo "GET /metrics failed"
stop_server
trap - EXIT

# 6. the summary (the intermediate JSON files go into serve_bench.json: the device tool returns few files)
STREAMS=$STREAMS PROMPT=$PROMPT GEN=$GEN python3 - "$OUT" "$load_rc" <<'EOF'
import json, os, sys
out, load_rc = sys.argv[1], int(sys.argv[2])
def load(name):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)
bench, bench_random, serve = load("bench.json"), load("bench_random.json"), load("load.json")
metrics = open(os.path.join(out, "metrics.txt")).read() if os.path.exists(os.path.join(out, "metrics.txt")) else ""
def tg(b):
    return next((r for r in b["rows"] if r["kind"] == "tg"), None) if b else None
row, row_r = tg(bench), tg(bench_random)
res = {"bench": bench, "bench_random": bench_random, "serve": serve, "load_exit": load_rc, "metrics": metrics}
lines = [f"# bench_serve: {os.environ.get('STREAMS')} streams, prompt {os.environ.get('PROMPT')} tokens, "
         f"{os.environ.get('GEN')} new tokens each; model {bench and bench['model']}"]
if row:
    lines.append(f"kimi bench {row['test']} batch {row['batch']}: {row['tokens_per_s']:.1f} tok/s "
                 f"({row['ms_per_step']:.3f} ms/step; graphs: {bench['decode_graphs']})")
if row_r:
    lines.append(f"kimi bench --random {row_r['test']} batch {row_r['batch']}: {row_r['tokens_per_s']:.1f} tok/s "
                 f"({row_r['ms_per_step']:.3f} ms/step)")
if serve:
    d = serve["decode"]
    if d:
        lines.append(f"server decode: {d['tokens_per_s']:.1f} tok/s (window of {d['window_s']:.3f} s where every "
                     f"stream generates)")
    else:
        lines.append(f"server decode: - ({serve['decode_unavailable']})")
    o = serve["output_tokens_per_s"]
    lines.append(f"server output: {o or 0:.1f} tok/s end to end ({serve['completion_tokens']} tokens in "
                 f"{serve['wall_s']:.3f} s, prefill and queueing included); "
                 f"{serve['requests_ok']}/{serve['requests']} requests ok")
    if row:
        res["ratio_decode"] = d["tokens_per_s"] / row["tokens_per_s"] if d else None
        res["ratio_output"] = o / row["tokens_per_s"] if o else None
        lines.append(f"ratio to kimi bench: decode {res['ratio_decode']:.3f}" if d else "ratio to kimi bench: decode -")
        lines[-1] += f", end to end {res['ratio_output'] or 0:.3f} (target: decode >= 0.90)"
    lines.append("| metric (ms) | n | mean | p50 | p90 | p99 | max |")
    lines.append("|---|---|---|---|---|---|---|")
    f = lambda x: "-" if x is None else f"{1e3 * x:.2f}"
    for k in ("ttft_s", "itl_s", "tpot_s"):
        s = serve[k]
        lines.append(f"| {k[:-2].upper()} | {s['n']} | {f(s['mean'])} | {f(s['p50'])} | {f(s['p90'])} | "
                     f"{f(s['p99'])} | {f(s['max'])} |")
    lines += [f"error: {e}" for e in serve["errors"]]
else:
    lines.append("load.py wrote no results")
text = "\n".join(lines) + "\n"
print(text, end="")
open(os.path.join(out, "serve_bench.txt"), "w").write(text)
json.dump(res, open(os.path.join(out, "serve_bench.json"), "w"), indent=2)
EOF
rm -f "$OUT/bench.json" "$OUT/bench_random.json" "$OUT/load.json" "$OUT/metrics.txt"
echo "$(el) done"
exit "$load_rc"
