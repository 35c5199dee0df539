"""Exact prefix caching through the HTTP API (docs/serve.md, "Prefix caching"): the same greedy request twice is a
hit the second time (per /metrics) with the same output; a prompt extending a cached one resumes from its snapshot
and gives the output of an uncached run (a fresh server with the same flags); the cache's flags are checked."""
import subprocess

import pytest

from conftest import Server
from helpers import client, metrics

FLAGS = ("--slots", "2", "--ctx-size", "1024", "--max-batch-tokens", "64", "--prefix-grid", "64",
         "--prefix-cache-mb", "64")

# The byte-level tokenizer: one token per byte, so these are 210 and 290 prompt tokens.
BASE = ("The quick brown fox jumps over the lazy dog while the patient cat watches from the windowsill, "
        "counting birds that pass the old oak tree near the river bank in the late afternoon sun. " * 2)[:210]
LONGER = BASE + ("Then the fox ran home across the fields and the cat went to sleep by the fire. " * 2)[:80]


@pytest.fixture(scope="module")
def cached(kimi, model_dir):
    s = Server(kimi, model_dir, *FLAGS)
    yield s
    assert s.stop() == 0, "".join(s.lines)


def greedy(server, prompt, **kw):
    return client(server).completions.create(model="tiny", prompt=prompt, max_tokens=12, temperature=0, **kw)


def test_the_same_greedy_request_twice_is_a_hit_with_the_same_output(cached):
    assert len(BASE) == 210 and len(LONGER) == 290
    m0 = metrics(cached)
    first = greedy(cached, BASE)
    m1 = metrics(cached)
    assert m1["kimi_prefix_cache_misses_total"] - m0["kimi_prefix_cache_misses_total"] == 1
    assert m1["kimi_prefix_cache_hits_total"] == m0["kimi_prefix_cache_hits_total"]
    assert m1["kimi_prefix_cache_entries"] >= 1 and m1["kimi_prefix_cache_bytes"] > 0
    second = greedy(cached, BASE)
    m2 = metrics(cached)
    assert m2["kimi_prefix_cache_hits_total"] - m1["kimi_prefix_cache_hits_total"] == 1
    # 210 tokens: the snapshot at 192 (the largest multiple of 64 below 210) is restored, 18 tokens run.
    assert m2["kimi_prefix_cache_tokens_reused_total"] - m1["kimi_prefix_cache_tokens_reused_total"] == 192
    assert m2["kimi_prompt_tokens_total"] - m1["kimi_prompt_tokens_total"] == 18
    assert second.choices[0].text == first.choices[0].text
    assert second.usage.prompt_tokens == first.usage.prompt_tokens == 210  # usage counts the whole prompt
    assert second.usage.completion_tokens == first.usage.completion_tokens
    # Streamed, a hit again, the same text.
    streamed = "".join(ch.text for c in greedy(cached, BASE, stream=True) for ch in c.choices)
    assert streamed == first.choices[0].text
    assert metrics(cached)["kimi_prefix_cache_hits_total"] - m2["kimi_prefix_cache_hits_total"] == 1


def test_a_prompt_extending_a_cached_one_gives_the_uncached_output(kimi, model_dir, cached):
    greedy(cached, BASE)  # cached (again)
    m0 = metrics(cached)
    hit = greedy(cached, LONGER)
    m1 = metrics(cached)
    assert m1["kimi_prefix_cache_hits_total"] - m0["kimi_prefix_cache_hits_total"] == 1
    assert m1["kimi_prefix_cache_tokens_reused_total"] - m0["kimi_prefix_cache_tokens_reused_total"] == 192
    fresh = Server(kimi, model_dir, *FLAGS)  # nothing cached: the uncached run
    try:
        uncached = greedy(fresh, LONGER)
        m = metrics(fresh)
        assert m["kimi_prefix_cache_misses_total"] == 1 and m["kimi_prefix_cache_hits_total"] == 0
        assert m["kimi_prompt_tokens_total"] == 290
    finally:
        assert fresh.stop() == 0
    assert hit.choices[0].text == uncached.choices[0].text
    assert hit.usage.completion_tokens == uncached.usage.completion_tokens


def test_a_chat_turn_twice_is_a_hit(cached):
    c = client(cached)
    msgs = [{"role": "system", "content": BASE}, {"role": "user", "content": "What did the cat do?"}]
    m0 = metrics(cached)
    a = c.chat.completions.create(model="tiny", messages=msgs, max_tokens=8, temperature=0)
    b = c.chat.completions.create(model="tiny", messages=msgs, max_tokens=8, temperature=0)
    m1 = metrics(cached)
    assert m1["kimi_prefix_cache_hits_total"] - m0["kimi_prefix_cache_hits_total"] >= 1
    assert b.choices[0].message.content == a.choices[0].message.content


def test_prefix_cache_flags_are_checked(kimi, model_dir):
    def fails(*flags):
        p = subprocess.run([kimi, "serve", model_dir, *flags], capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, p.stderr
        return p.stderr

    assert fails("--prefix-grid", "100") == (
        "kimi: serve: --prefix-grid: expected a positive multiple of 64 (the KDA chunk), got 100\n")
    assert fails("--prefix-cache-mb", "-1") == (
        "kimi: serve: --prefix-cache-mb: expected a value in [0, 1073741824] (MiB; 0: prefix caching off), got -1\n")
    off = Server(kimi, model_dir, "--ctx-size", "512", "--prefix-cache-mb", "0")
    try:
        assert "kimi serve: prefix cache off" in "".join(off.lines)
        greedy(off, BASE)
        greedy(off, BASE)
        m = metrics(off)
        assert m["kimi_prefix_cache_hits_total"] == 0 and m["kimi_prefix_cache_misses_total"] == 0
        assert m["kimi_prompt_tokens_total"] == 420
    finally:
        assert off.stop() == 0
