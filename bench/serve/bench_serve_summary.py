#!/usr/bin/env python3
"""The summary of scripts/gpu/bench_serve.sh: `kimi bench` decode rows beside bench/serve/load.py's results at the
same batch (= concurrent streams), into OUT/serve_bench.txt (a table) and OUT/serve_bench.json (every input whole).

    python3 bench/serve/bench_serve_summary.py OUT --main-streams 64 --prompt 512 --gen 128

Reads OUT/bench.json (kimi bench on the served checkpoint), OUT/bench_random.json (optional: the same rows with
--random), OUT/load_<streams>.json (one per stream count) and OUT/metrics.txt (the server's /metrics at the end).
ratio = the server's decode tok/s (the window where every stream generates) / kimi bench's tok/s at that batch: the
issue-25 target is >= 0.90 at 64 streams. Exit status 1 when the main stream count has no result.
"""
import argparse
import glob
import json
import os
import re
import sys


def read_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def tg_rows(bench):
    """{batch: row} of a kimi bench JSON's decode (tg) rows."""
    return {r["batch"]: r for r in bench["rows"] if r["kind"] == "tg"} if bench else {}


def ms3(s):
    return "-" if not s or s["p50"] is None else f"{1e3 * s['p50']:.2f} / {1e3 * s['p90']:.2f} / {1e3 * s['p99']:.2f}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--main-streams", type=int, required=True)
    p.add_argument("--prompt", type=int, required=True)
    p.add_argument("--gen", type=int, required=True)
    args = p.parse_args(argv)
    bench = read_json(os.path.join(args.out, "bench.json"))
    bench_random = read_json(os.path.join(args.out, "bench_random.json"))
    loads = {}
    for path in glob.glob(os.path.join(args.out, "load_*.json")):
        m = re.fullmatch(r"load_(\d+)\.json", os.path.basename(path))
        if m:
            loads[int(m.group(1))] = read_json(path)
    metrics_path = os.path.join(args.out, "metrics.txt")
    metrics = open(metrics_path).read() if os.path.exists(metrics_path) else ""
    rows, rows_r = tg_rows(bench), tg_rows(bench_random)

    lines = [f"# bench_serve: prompt {args.prompt} tokens, {args.gen} new tokens per stream (ignore_eos), one slot "
             f"per stream; model {bench['model'] if bench else '?'}",
             f"# kimi bench: tg{args.gen}@{args.prompt} on the served checkpoint"
             + (f"; decode graphs: {bench['decode_graphs']}" if bench else ""),
             "# decode tok/s: the window where every stream generates; output tok/s: all tokens / wall time "
             "(prefill, queueing and tails included); ratio: server decode / kimi bench at that batch",
             "| streams | kimi bench tok/s | bench --random tok/s | server decode tok/s | ratio | server output tok/s "
             "| TTFT ms p50 / p90 / p99 | ITL ms p50 / p90 / p99 | TPOT ms p50 / p90 / p99 | requests ok |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    summary = {}
    for n in sorted(loads):
        ld, b, br = loads[n], rows.get(n), rows_r.get(n)
        d = ld["decode"] if ld else None
        ratio = d["tokens_per_s"] / b["tokens_per_s"] if d and b else None
        summary[n] = {"bench_tokens_per_s": b and b["tokens_per_s"],
                      "bench_random_tokens_per_s": br and br["tokens_per_s"],
                      "server_decode_tokens_per_s": d and d["tokens_per_s"], "ratio_decode": ratio,
                      "server_output_tokens_per_s": ld and ld["output_tokens_per_s"],
                      "ttft_s": ld and ld["ttft_s"], "itl_s": ld and ld["itl_s"], "tpot_s": ld and ld["tpot_s"]}

        def f1(x):
            return "-" if x is None else f"{x:.1f}"
        lines.append(f"| {n} | {f1(b and b['tokens_per_s'])} | {f1(br and br['tokens_per_s'])} | "
                     f"{f1(d and d['tokens_per_s'])} | {'-' if ratio is None else f'{ratio:.3f}'} | "
                     f"{f1(ld and ld['output_tokens_per_s'])} | {ms3(ld and ld['ttft_s'])} | "
                     f"{ms3(ld and ld['itl_s'])} | {ms3(ld and ld['tpot_s'])} | "
                     f"{ld['requests_ok'] if ld else 0}/{ld['requests'] if ld else '?'} |")
        if ld and not d:
            lines.append(f"#   {n} streams: no decode window ({ld['decode_unavailable']})")
        for e in (ld["errors"] if ld else []):
            lines.append(f"#   {n} streams: error: {e}")
    main_ok = args.main_streams in loads and summary[args.main_streams]["ratio_decode"] is not None
    if main_ok:
        r = summary[args.main_streams]["ratio_decode"]
        lines.append(f"target (issue 25): server decode >= 0.90 x kimi bench at {args.main_streams} streams: {r:.3f} "
                     f"({'met' if r >= 0.9 else 'NOT met'})")
    else:
        lines.append(f"target (issue 25): no ratio at {args.main_streams} streams (see above)")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    with open(os.path.join(args.out, "serve_bench.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "serve_bench.json"), "w") as f:
        json.dump({"prompt": args.prompt, "gen": args.gen, "main_streams": args.main_streams,
                   "summary": {str(k): v for k, v in summary.items()}, "bench": bench, "bench_random": bench_random,
                   "load": {str(k): v for k, v in loads.items()}, "metrics": metrics}, f, indent=2)
    return 0 if main_ok else 1


if __name__ == "__main__":
    sys.exit(main())
