#!/usr/bin/env python3
"""Load generator for `kimi serve` (or any OpenAI-compatible server): N concurrent streaming clients on
POST /v1/completions, Python standard library only (processes of threads, http.client), every wait bounded.

    python3 bench/serve/load.py --url http://127.0.0.1:8000 --streams 64 --prompt-tokens 512 --max-tokens 128 \
        [--warmup 1] [--json out.json]

Each client sends one request (per round) with its own prompt of --prompt-tokens seeded random token ids in
[0, --prompt-vocab) (distinct prompts: no prefix-cache hits between clients or rounds), temperature 0,
`ignore_eos: true` (so every request generates exactly --max-tokens) and `stream_options: {include_usage,
continuous_usage_stats}` (every chunk carries the request's completion tokens so far). The clients start together
(a barrier); each SSE event's arrival time is taken as it is read, and the events are parsed after the run.

Measured, per request:
  TTFT   send -> the first event carrying a token (usage.completion_tokens > 0)
  ITL    the gaps between consecutive token-carrying events (one per SSE chunk; a chunk may carry more than one
         token when the server coalesces them, which the tokens/chunk column shows)
  TPOT   (last token event - first token event) / (completion_tokens - 1)
and over the run:
  output tok/s  total completion tokens / (last response end - first send): prefill, queueing and tails included
  decode tok/s  the steady window where every request is generating: from the last first token to the first
                last token (T0 = max TTFT arrival, T1 = min last arrival); the tokens delivered in it (from the
                per-chunk usage) / (T1 - T0). With as many slots as streams this is the server's decode rate at
                batch = streams, the figure comparable to `kimi bench -n N -b streams`. null when the window is
                empty (some request finished before another started) or the server sends no per-chunk usage.
Percentiles are linear interpolations between order statistics (numpy's default).
Exit status: 0 when every request succeeded with exactly --max-tokens tokens, 1 otherwise (the report says which).
"""
import argparse
import http.client
import json
import math
import multiprocessing
import os
import queue
import random
import sys
import threading
import time
import urllib.parse


def percentile(xs, q):
    """The q-th percentile (0..100) of xs by linear interpolation; None for an empty list."""
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(xs):
    return {"n": len(xs), "mean": sum(xs) / len(xs) if xs else None, "p50": percentile(xs, 50),
            "p90": percentile(xs, 90), "p99": percentile(xs, 99), "max": max(xs) if xs else None}


class Target:
    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise SystemExit(f"load.py: --url: expected http://HOST:PORT, got {url!r}")
        self.host, self.port = u.hostname, u.port or 80

    def conn(self, timeout):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def get_json(self, path, timeout):
        c = self.conn(timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            if r.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {r.status}: {body[:300]!r}")
            return json.loads(body)
        finally:
            c.close()


def wait_healthy(target, seconds):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            if target.get_json("/health", 5).get("status") == "ok":
                return
        except (OSError, RuntimeError, ValueError) as e:
            last = e
        time.sleep(0.2)
    raise SystemExit(f"load.py: the server at {target.host}:{target.port} was not healthy within {seconds} s "
                     f"(last error: {last})")


def make_prompt(args, index):
    if args.prompt_text is not None:
        return args.prompt_text
    rng = random.Random(args.seed * 1_000_003 + index)
    return [rng.randrange(args.prompt_vocab) for _ in range(args.prompt_tokens)]


def one_request(target, args, model, prompt, barrier):
    """Sends one streaming completion; returns its record: send time, the raw events with their arrival times,
    the end time, the HTTP status and an error (None when it went through)."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": args.max_tokens, "temperature": 0,
                       "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    rec = {"events": [], "status": None, "error": None, "t_send": math.nan}
    c = target.conn(args.timeout)
    try:
        barrier.wait(args.timeout)
        rec["t_send"] = time.perf_counter()
        c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        rec["status"] = r.status
        if r.status != 200:
            rec["error"] = f"HTTP {r.status}: {r.read()[:300]!r}"
            return rec
        deadline = rec["t_send"] + args.timeout
        while True:
            line = r.readline()
            t = time.perf_counter()
            if not line:
                rec["error"] = "the stream ended without data: [DONE]"
                break
            if line.startswith(b"data: "):
                payload = line[6:].strip()
                if payload == b"[DONE]":
                    break
                rec["events"].append((t, payload))
            if t > deadline:
                rec["error"] = f"not done within --timeout {args.timeout} s"
                break
    except (OSError, http.client.HTTPException, threading.BrokenBarrierError) as e:
        rec["error"] = f"{type(e).__name__}: {e}"
    finally:
        rec["t_end"] = time.perf_counter()
        c.close()
    return rec


def analyse(rec):
    """Parses a record's events: token events [(t, cumulative completion tokens)], final usage, errors."""
    toks, usage, last_n = [], None, 0
    for t, payload in rec["events"]:
        try:
            ev = json.loads(payload)
        except ValueError:
            rec["error"] = rec["error"] or f"an event that is not JSON: {payload[:200]!r}"
            continue
        if "error" in ev:
            rec["error"] = rec["error"] or f"error event: {ev['error']}"
            continue
        u = ev.get("usage")
        if u and ev.get("choices") == []:  # the final usage chunk
            usage = u
            continue
        if u and u.get("completion_tokens", 0) > last_n:
            last_n = u["completion_tokens"]
            toks.append((t, last_n))
        elif not u and any(ch.get("text") for ch in ev.get("choices", [])):
            toks.append((t, None))  # a server without per-chunk usage: one event, count unknown
    rec["tokens"], rec["usage"] = toks, usage
    return rec


def client_group(target, args, model, prompts, indices, barrier, results):
    """One process's clients (threads): puts [(index, record)] on `results`."""
    recs = {}

    def client(i):
        recs[i] = one_request(target, args, model, prompts[i], barrier)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in indices]
    for th in threads:
        th.start()
    for th in threads:
        th.join(args.timeout + 30)
    results.put(list(recs.items()))


def run_round(target, args, model, round_index):
    """N clients in --procs processes of threads (one GIL each: the events' arrival times stay accurate at
    thousands of events per second); the processes share a barrier, and time.perf_counter is the system's
    monotonic clock, the same in every process."""
    n = args.streams
    prompts = [make_prompt(args, round_index * n + i) for i in range(n)]
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(n)
    results = ctx.Queue()
    groups = [list(range(n))[k::args.procs] for k in range(args.procs)]
    procs = [ctx.Process(target=client_group, args=(target, args, model, prompts, g, barrier, results), daemon=True)
             for g in groups if g]
    for pr in procs:
        pr.start()
    recs = [None] * n
    deadline = time.monotonic() + args.timeout + 60
    for _ in procs:
        try:
            for i, r in results.get(timeout=max(1.0, deadline - time.monotonic())):
                recs[i] = r
        except queue.Empty:
            break
    for pr in procs:
        pr.join(5)
        if pr.is_alive():
            pr.terminate()
    for i, r in enumerate(recs):
        if r is None:
            recs[i] = {"events": [], "status": None, "error": "the client did not finish",
                       "t_send": math.nan, "t_end": math.nan}
    for r in recs:
        r["round"] = round_index
    return [analyse(r) for r in recs]


def report(args, recs):
    ok = [r for r in recs if r["error"] is None and r["usage"] is not None]
    errors = [r["error"] or "no usage chunk" for r in recs if r not in ok]
    wrong = [r["usage"]["completion_tokens"] for r in ok if r["usage"]["completion_tokens"] != args.max_tokens]
    ttft, itl, tpot, per_chunk = [], [], [], []
    for r in ok:
        toks = r["tokens"]
        if not toks:
            continue
        ttft.append(toks[0][0] - r["t_send"])
        itl += [b[0] - a[0] for a, b in zip(toks, toks[1:])]
        n = r["usage"]["completion_tokens"]
        if n > 1 and len(toks) > 1:
            tpot.append((toks[-1][0] - toks[0][0]) / (n - 1))
        per_chunk.append(n / len(toks))
    out_tokens = sum(r["usage"]["completion_tokens"] for r in ok)
    prompt_tokens = sum(r["usage"]["prompt_tokens"] for r in ok)
    t0 = min((r["t_send"] for r in recs if math.isfinite(r["t_send"])), default=math.nan)
    t_end = max((r["t_end"] for r in recs if math.isfinite(r["t_end"])), default=math.nan)
    wall = t_end - t0
    # the steady window: every request has its first token and none has its last yet
    decode, why = None, None
    counted = ok and all(r["tokens"] and r["tokens"][0][1] is not None for r in ok)
    if len(ok) != len(recs):
        why = "some requests failed"
    elif not counted:
        why = "the server sends no per-chunk usage (stream_options.continuous_usage_stats)"
    else:
        def cum(toks, t):  # tokens delivered by time t
            c = 0
            for tt, n in toks:
                if tt > t:
                    break
                c = n
            return c
        tokens, seconds, windows = 0, 0.0, []
        for k in sorted({r["round"] for r in ok}):  # one window per round
            rs = [r for r in ok if r["round"] == k]
            w0 = max(r["tokens"][0][0] for r in rs)
            w1 = min(r["tokens"][-1][0] for r in rs)
            if w1 <= w0:
                why = "no moment when every request was generating (a request ended before another began)"
                break
            tokens += sum(cum(r["tokens"], w1) - cum(r["tokens"], w0) for r in rs)
            seconds += w1 - w0
            windows.append([w0 - t0, w1 - t0])
        if why is None:
            decode = {"tokens_per_s": tokens / seconds, "window_s": seconds, "tokens": tokens, "windows_s": windows}
    return {
        "streams": args.streams, "prompt_tokens_per_request": args.prompt_tokens if args.prompt_text is None else None,
        "max_tokens": args.max_tokens, "requests": len(recs), "requests_ok": len(ok), "errors": errors[:10],
        "requests_with_wrong_token_count": len(wrong), "completion_tokens": out_tokens, "prompt_tokens": prompt_tokens,
        "wall_s": wall, "output_tokens_per_s": out_tokens / wall if math.isfinite(wall) and wall > 0 else None,
        "decode": decode, "decode_unavailable": why,
        "ttft_s": summary(ttft), "itl_s": summary(itl), "tpot_s": summary(tpot),
        "tokens_per_chunk": summary(per_chunk),
    }


def num(x):
    return "-" if x is None else f"{x:.1f}"


def ms(x):
    return "-" if x is None else f"{1e3 * x:.2f}"


def table(res):
    rows = [f"requests        {res['requests_ok']}/{res['requests']} ok, {res['completion_tokens']} completion tokens "
            f"({res['streams']} streams x {res['max_tokens']}), {res['prompt_tokens']} prompt tokens, "
            f"{res['wall_s']:.3f} s",
            f"output tok/s    {num(res['output_tokens_per_s'])} (all completion tokens / wall time)"]
    d = res["decode"]
    rows.append(f"decode tok/s    {d['tokens_per_s']:.1f} ({d['tokens']} tokens in the {d['window_s']:.3f} s "
                f"window where every stream generates)" if d else f"decode tok/s    - ({res['decode_unavailable']})")
    rows.append("| metric (ms) | n | mean | p50 | p90 | p99 | max |")
    rows.append("|---|---|---|---|---|---|---|")
    for name in ("ttft_s", "itl_s", "tpot_s"):
        s = res[name]
        rows.append(f"| {name[:-2].upper()} | {s['n']} | {ms(s['mean'])} | {ms(s['p50'])} | {ms(s['p90'])} | "
                    f"{ms(s['p99'])} | {ms(s['max'])} |")
    c = res["tokens_per_chunk"]
    if c["n"]:
        rows.append(f"tokens/chunk    mean {c['mean']:.3f}, max {c['max']:.3f}")
    for e in res["errors"]:
        rows.append(f"error           {e}")
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--model", help="the served model name (default: the first of GET /v1/models)")
    p.add_argument("--streams", type=int, default=64, help="concurrent clients")
    p.add_argument("--prompt-tokens", type=int, default=512, help="prompt length in token ids")
    p.add_argument("--prompt-vocab", type=int, default=256,
                   help="prompt ids are drawn from [0, this) (default 256: byte tokens, valid in any Kimi vocabulary)")
    p.add_argument("--prompt-text", help="one text prompt for every request instead of token ids")
    p.add_argument("--max-tokens", type=int, default=128, help="tokens each request generates (ignore_eos)")
    p.add_argument("--rounds", type=int, default=1, help="timed rounds of --streams requests (reported together)")
    p.add_argument("--warmup", type=int, default=0, help="untimed rounds first (other prompts)")
    p.add_argument("--procs", type=int, default=0,
                   help="client processes (threads in each; default: one per 16 streams, at most the CPUs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300, help="seconds per request (connect, each read, whole)")
    p.add_argument("--wait-health", type=float, default=60, help="seconds to wait for GET /health first")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    for name in ("streams", "prompt_tokens", "prompt_vocab", "max_tokens", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: expected >= 1, got {getattr(args, name)}")
    if args.warmup < 0 or args.timeout <= 0 or args.procs < 0:
        p.error("--warmup, --procs: expected >= 0; --timeout: expected > 0")
    if args.procs == 0:
        args.procs = max(1, min((args.streams + 15) // 16, os.cpu_count() or 1))
    args.procs = min(args.procs, args.streams)

    target = Target(args.url)
    wait_healthy(target, args.wait_health)
    model = args.model or target.get_json("/v1/models", 30)["data"][0]["id"]
    for w in range(args.warmup):
        recs = run_round(target, args, model, args.rounds + w)  # prompts of their own: no prefix-cache hits later
        bad = [r["error"] for r in recs if r["error"]]
        print(f"warm-up {w + 1}/{args.warmup}: {len(recs) - len(bad)}/{len(recs)} ok"
              + (f" (first error: {bad[0]})" if bad else ""), flush=True)
    recs = []
    for k in range(args.rounds):
        recs += run_round(target, args, model, k)
    res = report(args, recs)
    res.update({"url": args.url, "model": model, "rounds": args.rounds, "warmup_rounds": args.warmup,
                "seed": args.seed, "procs": args.procs})
    print(table(res), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
            f.write("\n")
    good = res["requests_ok"] == res["requests"] and res["requests_with_wrong_token_count"] == 0
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
