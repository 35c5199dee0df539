"""The fields benchmarks use (`ignore_eos`, `stream_options.continuous_usage_stats`) and bench/serve/load.py, the
load generator of docs/serve.md "Measuring the server", against a `kimi serve` on loopback."""
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from conftest import Server
from helpers import post_json

LOAD_PY = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "serve", "load.py")


def sse_events(server, payload):
    """The parsed `data:` events of a streaming /v1/completions, up to [DONE]."""
    req = urllib.request.Request(server.url + "/v1/completions", data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"})
    events = []
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            if line.startswith(b"data: "):
                if line.strip() == b"data: [DONE]":
                    return events
                events.append(json.loads(line[6:]))
    raise AssertionError("the stream ended without data: [DONE]")


def test_ignore_eos_generates_max_tokens_past_a_stop_token(server):
    # A seeded sampled request that ends at a stop token ([EOS] or <|im_end|>) well before max_tokens ...
    body = {"model": "tiny", "prompt": "hello", "max_tokens": 300, "temperature": 1.5}
    for seed in range(64):
        status, a = post_json(server, "/v1/completions", dict(body, seed=seed))
        assert status == 200, a
        if a["choices"][0]["finish_reason"] == "stop" and a["usage"]["completion_tokens"] < 250:
            break
    else:
        pytest.fail("no seed in 0..63 ended at a stop token before 250 tokens")
    # ... with ignore_eos runs on to max_tokens: the same tokens up to the stop token (same seed), whose text then
    # appears (decoded like any token), and more after it.
    status, b = post_json(server, "/v1/completions", dict(body, seed=seed, ignore_eos=True))
    assert status == 200, b
    assert b["choices"][0]["finish_reason"] == "length"
    assert b["usage"]["completion_tokens"] == 300
    text_a, text_b = a["choices"][0]["text"], b["choices"][0]["text"]
    assert text_b.startswith(text_a)
    assert text_b[len(text_a):].startswith(("[EOS]", "<|im_end|>"))
    assert len(text_b) > len(text_a) + len("<|im_end|>")
    # false is the default: the same as without the field
    status, c = post_json(server, "/v1/completions", dict(body, seed=seed, ignore_eos=False))
    assert status == 200 and c["choices"][0]["text"] == text_a and c["usage"] == a["usage"]
    # chat refuses it (its reply ends at the turn end)
    status, e = post_json(server, "/v1/chat/completions",
                          {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "ignore_eos": True})
    assert status == 400 and e["error"]["param"] == "ignore_eos" and e["error"]["code"] == "unsupported_value"


def test_continuous_usage_stats_counts_every_chunk(server):
    events = sse_events(server, {"model": "tiny", "prompt": "count", "max_tokens": 12, "temperature": 0,
                                 "ignore_eos": True, "stream": True,
                                 "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    # every chunk carries the usage so far; the counts never fall and end at the final usage chunk's
    assert all(e["usage"] is not None for e in events)
    counts = [e["usage"]["completion_tokens"] for e in events]
    assert counts == sorted(counts) and counts[0] >= 1
    assert events[-1]["choices"] == [] and counts[-1] == 12
    assert all(e["usage"]["prompt_tokens"] == events[-1]["usage"]["prompt_tokens"] for e in events)
    # without it, only the final chunk has a usage (include_usage's null elsewhere)
    plain = sse_events(server, {"model": "tiny", "prompt": "count", "max_tokens": 12, "temperature": 0,
                                "stream": True, "stream_options": {"include_usage": True}})
    assert all(e["usage"] is None for e in plain[:-1]) and plain[-1]["usage"]["completion_tokens"] >= 1


@pytest.fixture(scope="module")
def four_slots(kimi, model_dir):
    s = Server(kimi, model_dir, "--slots", "4", "--ctx-size", "256", "--max-batch-tokens", "64")
    yield s
    assert s.stop() == 0, "".join(s.lines)


def test_load_py_counts_add_up(four_slots, tmp_path):
    out = tmp_path / "load.json"
    streams, max_tokens, prompt = 4, 8, 40
    p = subprocess.run([sys.executable, LOAD_PY, "--url", four_slots.url, "--streams", str(streams),
                        "--prompt-tokens", str(prompt), "--max-tokens", str(max_tokens), "--warmup", "1",
                        "--timeout", "120", "--wait-health", "30", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(out.read_text())
    assert r["model"] == "tiny" and r["requests"] == r["requests_ok"] == streams and r["errors"] == []
    assert r["completion_tokens"] == streams * max_tokens and r["requests_with_wrong_token_count"] == 0
    assert r["prompt_tokens"] == streams * prompt
    assert r["ttft_s"]["n"] == streams and r["tpot_s"]["n"] == streams
    # one ITL per gap between token-carrying chunks: streams x (chunks - 1), at most streams x (max_tokens - 1)
    assert 0 < r["itl_s"]["n"] <= streams * (max_tokens - 1)
    for k in ("ttft_s", "itl_s", "tpot_s"):
        s = r[k]
        assert 0 <= s["p50"] <= s["p90"] <= s["p99"] <= s["max"], (k, s)
    assert r["wall_s"] > 0 and r["output_tokens_per_s"] == pytest.approx(r["completion_tokens"] / r["wall_s"])
    assert r["ttft_s"]["max"] <= r["wall_s"]
    # four slots for four streams: a window where all generate exists, and it holds at most every token but the
    # streams' first ones
    if r["decode"] is not None:
        assert 0 < r["decode"]["tokens"] <= streams * (max_tokens - 1) and r["decode"]["tokens_per_s"] > 0
    else:
        assert "a request ended before another began" in r["decode_unavailable"]
    assert "TTFT" in p.stdout and "ITL" in p.stdout


def test_bench_serve_sh_dry_run_on_the_cpu(kimi, tmp_path):
    """scripts/gpu/bench_serve.sh's steps with DEVICE=cpu (no build): random-model, kimi bench, kimi serve, load.py
    at 2 and 1 streams, the summary."""
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "gpu", "bench_serve.sh")
    out = tmp_path / "out"
    env = dict(os.environ, DEVICE="cpu", KIMI=kimi, CONFIG="kimi-linear-tiny", CKPT=str(tmp_path / "model"),
               STREAMS="2", EXTRA_STREAMS="1", PROMPT="32", GEN="4", REPS="1", OUT=str(out), OMP_NUM_THREADS="1")
    p = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert sorted(os.listdir(out)) == ["serve.log", "serve_bench.json", "serve_bench.log", "serve_bench.txt"]
    r = json.loads((out / "serve_bench.json").read_text())
    assert sorted(r["summary"]) == ["1", "2"] and r["main_streams"] == 2
    for n in ("1", "2"):
        s, ld = r["summary"][n], r["load"][n]
        assert ld["requests_ok"] == ld["requests"] == int(n) and ld["completion_tokens"] == int(n) * 4
        assert s["bench_tokens_per_s"] > 0 and s["server_decode_tokens_per_s"] > 0
        assert s["ratio_decode"] == pytest.approx(s["server_decode_tokens_per_s"] / s["bench_tokens_per_s"])
    assert [row["batch"] for row in r["bench"]["rows"]] == [1, 2]
    assert "kimi_generation_tokens_total" in r["metrics"]
    assert "target (issue 25)" in (out / "serve_bench.txt").read_text()
