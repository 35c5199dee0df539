#!/usr/bin/env bash
# Model speed and peak memory on the CPU: prefill and decode tokens/s of `kimi generate` for k3-tiny,
# kimi-linear-tiny and (with --slice) k3-slice (K3's real per-layer widths, ~7 GB; written once to
# $KIMI_BENCH_DIR/k3-slice). Peak memory = max resident set (GNU time), which counts the mapped weight pages
# the run touched. Each run is timed after one untimed warm-up run (weights paged in). Usage: scripts/bench_model_cpu.sh [--slice]   (after a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
kimi=./build/release/kimi
dir=${KIMI_BENCH_DIR:-/tmp/kimi-bench}
mkdir -p "$dir"
ids() { python3 -c "import random; r=random.Random($2); print(','.join(str(r.randrange($3)) for _ in range($1)))"; }

run() {  # name vocab prompt_len batch new_tokens
  local name=$1 vocab=$2 len=$3 batch=$4 new=$5 args=()
  for b in $(seq 1 "$batch"); do args+=(--prompt "$(ids "$len" "$b" "$vocab")"); done
  echo "== $name: batch $batch x prompt $len, $new new tokens each, $(nproc) cores"
  /usr/bin/time -f "peak RSS %M KB, wall %e s" "$kimi" generate "$dir/$name" "${args[@]}" --max-tokens "$new" --warmup 2>&1 |
    grep -E "prefill|decode|cache|peak"
}

for name in k3-tiny kimi-linear-tiny; do
  [ -d "$dir/$name" ] || "$kimi" random-model "$name" --out "$dir/$name" --seed 1 >/dev/null
  run "$name" 512 128 1 64
  run "$name" 512 128 8 64
done
if [ "${1:-}" = "--slice" ]; then
  [ -d "$dir/k3-slice" ] || "$kimi" random-model k3-slice --out "$dir/k3-slice" --seed 1
  run k3-slice 32768 128 1 8
  run k3-slice 32768 16 4 8
fi
