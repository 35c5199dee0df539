"""`kimi serve` under load: 64 concurrent streaming clients on 8 slots (the queue longer than the slots waits),
each getting exactly the tokens it gets alone; a client that disconnects frees its slot; a full queue answers 503."""
import json
import socket
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import Server, wait_for
from helpers import client, metrics


def prompt_of(i):
    return f"request {i}: " + "xyz"[i % 3] * (i % 23)


def stream_text(server, prompt, max_tokens):
    text, finish, usage = "", None, None
    for c in client(server).completions.create(model="tiny", prompt=prompt, max_tokens=max_tokens, temperature=0,
                                               stream=True, stream_options={"include_usage": True}):
        usage = c.usage or usage
        for ch in c.choices:
            text += ch.text
            finish = ch.finish_reason or finish
    return text, finish, usage.completion_tokens


def test_64_concurrent_streams_match_their_solo_runs(server):
    n = 64
    solo = [stream_text(server, prompt_of(i), 10) for i in range(n)]
    assert len({s[0] for s in solo}) > n // 2  # the prompts give different outputs: a mix-up would show
    before = metrics(server)
    barrier = threading.Barrier(n)
    waiting_seen = []

    def one(i):
        barrier.wait(60)
        return stream_text(server, prompt_of(i), 10)

    def watch():  # the queue holds what the 8 slots cannot
        m = metrics(server)
        waiting_seen.append(m["kimi_requests_waiting"])
        assert m["kimi_requests_running"] <= 8 and m["kimi_cache_slots_used"] == m["kimi_requests_running"]
        return len(waiting_seen) > 200 or m["kimi_requests_waiting"] > 0

    with ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(one, i) for i in range(n)]
        wait_for(watch, 60, "requests waiting for a slot")
        loaded = [f.result(timeout=300) for f in futures]
    assert max(waiting_seen) > 0
    assert loaded == solo
    after = metrics(server)
    assert after["kimi_generation_tokens_total"] - before["kimi_generation_tokens_total"] == sum(s[2] for s in solo)
    assert after["kimi_requests_running"] == 0 and after["kimi_requests_waiting"] == 0


def open_stream(server, payload):
    """A raw HTTP/1.1 streaming request; returns the socket after the first SSE event arrived."""
    u = urllib.parse.urlparse(server.url)
    s = socket.create_connection((u.hostname, u.port), timeout=60)
    body = json.dumps(payload).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while b"data: " not in got:
        chunk = s.recv(4096)
        assert chunk, "connection closed before the first event"
        got += chunk
    return s


def test_client_disconnect_cancels_and_frees_the_slot(server):
    before = metrics(server)
    s = open_stream(server, {"model": "tiny", "prompt": "long", "max_tokens": 900, "temperature": 0, "stream": True})
    wait_for(lambda: metrics(server)["kimi_requests_running"] == 1, 30, "the request running")
    s.close()
    wait_for(lambda: metrics(server)["kimi_cache_slots_used"] == 0, 30, "the slot freed after the disconnect")
    after = metrics(server)
    key = 'kimi_requests_total{finish_reason="cancelled"}'
    assert after[key] - before.get(key, 0) == 1
    # Far fewer than the 900 tokens asked for were generated.
    assert after["kimi_generation_tokens_total"] - before["kimi_generation_tokens_total"] < 900
    # A non-streaming request whose client goes away is cancelled too.
    u = urllib.parse.urlparse(server.url)
    c = socket.create_connection((u.hostname, u.port), timeout=60)
    body = json.dumps({"model": "tiny", "prompt": "long", "max_tokens": 900, "temperature": 0}).encode()
    c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() +
              b"\r\n\r\n" + body)
    wait_for(lambda: metrics(server)["kimi_requests_running"] == 1, 30, "the request running")
    c.close()
    wait_for(lambda: metrics(server)[key] - before.get(key, 0) == 2, 30, "the second cancellation")
    assert metrics(server)["kimi_cache_slots_used"] == 0


@pytest.fixture(scope="module")
def one_slot(kimi, model_dir):
    s = Server(kimi, model_dir, "--slots", "1", "--ctx-size", "1024", "--max-batch-tokens", "32", "--max-queue", "2")
    yield s
    assert s.stop() == 0, "".join(s.lines)


def test_queue_longer_than_the_slots_waits_and_beyond_its_bound_gets_503(one_slot):
    s = one_slot
    hold = open_stream(s, {"model": "tiny", "prompt": "hold", "max_tokens": 1000, "temperature": 0, "stream": True})
    results = []

    def queued(i):
        results.append(client(s).completions.create(model="tiny", prompt=f"q{i}", max_tokens=3, temperature=0))

    threads = [threading.Thread(target=queued, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    wait_for(lambda: metrics(s)["kimi_requests_waiting"] == 2, 30, "two requests queued")
    import openai
    with pytest.raises(openai.APIStatusError) as e:
        client(s).completions.create(model="tiny", prompt="one too many", max_tokens=3)
    assert e.value.status_code == 503
    err = e.value.body if isinstance(e.value.body, dict) and "code" in e.value.body else e.value.body["error"]
    assert err["code"] == "queue_full" and err["type"] == "server_error"
    assert err["message"] == "serve: the queue is full (2 requests waiting for a slot); retry later"
    hold.close()  # the slot frees; the queued two run
    for t in threads:
        t.join(120)
    assert len(results) == 2 and all(r.usage.completion_tokens >= 1 for r in results)
    m = metrics(s)
    assert m["kimi_requests_rejected_total"] == 1 and m["kimi_requests_waiting"] == 0
