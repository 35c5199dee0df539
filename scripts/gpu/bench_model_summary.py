#!/usr/bin/env python3
"""The summary table of scripts/gpu/bench_model.sh: kimi bench's rows beside transformers' on the same shapes.

  python3 scripts/gpu/bench_model_summary.py OUT_DIR

Reads OUT_DIR/kimi-<model>-*.json (kimi bench --json) and OUT_DIR/peer-<model>.json
(bench/peers/transformers_model.py --json). One row per (model, test, batch): kimi tokens/s and ms, the peer's, the
ratio kimi / peer (tokens/s), and kimi's fraction of the roofline floor (`floor_ms / ms_per_step` from kimi plan's
cost model) where kimi bench printed one. Also writes OUT_DIR/bench_model.csv.
"""
import csv
import glob
import json
import os
import sys


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    rows = {}
    info = {}
    for path in sorted(glob.glob(os.path.join(out, "kimi-*.json"))):
        model = os.path.basename(path)[len("kimi-"):].split("-")[0]
        j = json.load(open(path))
        info.setdefault(model, {})["kimi_weights_gib"] = j.get("weight_bytes", 0) / 2**30
        for r in j["rows"]:
            key = (model, r["kind"], r["n"] if r["kind"] == "pp" else 0, r["batch"])
            rows.setdefault(key, {})["kimi"] = r
    for path in sorted(glob.glob(os.path.join(out, "peer-*.json"))):
        model = os.path.basename(path)[len("peer-"):-len(".json")]
        j = json.load(open(path))
        info.setdefault(model, {})["peer"] = j["info"]
        for r in j["rows"]:
            kind = r["test"][:2]
            n = int(r["test"][2:]) if kind == "pp" else 0
            rows.setdefault((model, kind, n, r["batch"]), {})["peer"] = r

    header = ["model", "test", "batch", "kimi tok/s", "kimi ms", "peer tok/s", "peer ms", "kimi/peer", "floor ms",
              "floor fraction", "kimi peak GiB"]
    table = []
    for (model, kind, n, b), v in sorted(rows.items()):
        k, p = v.get("kimi"), v.get("peer")
        test = f"pp{n}" if kind == "pp" else f"tg (context {k['context'] if k else p.get('context', '?')})"
        kms = k["ms_per_step"] if k else None
        row = [model, test, b,
               f"{k['tokens_per_s']:.0f}" if k else "", f"{kms:.3f}" if k else "",
               f"{p['tokens_per_s']:.0f}" if p else "", f"{p['ms']:.3f}" if p else "",
               f"{k['tokens_per_s'] / p['tokens_per_s']:.2f}x" if k and p else "",
               f"{k['floor_ms']:.3f}" if k and "floor_ms" in k else "",
               f"{100 * k['floor_ms'] / kms:.0f}%" if k and "floor_ms" in k and kms else "",
               f"{k['peak_bytes'] / 2**30:.1f}" if k else ""]
        table.append(row)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *table)] if table else [len(h) for h in header]
    line = lambda r: "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |"
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in table:
        print(line(r))
    for model, i in sorted(info.items()):
        print(f"# {model}: {json.dumps(i)}")
    with open(os.path.join(out, "bench_model.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(table)


if __name__ == "__main__":
    main()
