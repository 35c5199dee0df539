"""Small clients of the tests: the openai client, curl, raw HTTP, and /metrics parsed."""
import json
import subprocess
import urllib.request

import openai


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def curl(*args, data=None):
    """(status, body) of `curl -s` with a bounded time; data: bytes sent as the body (POST)."""
    cmd = ["curl", "-s", "--max-time", "120", "-w", "\n%{http_code}", *args]
    if data is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    p = subprocess.run(cmd, input=data, capture_output=True, timeout=150)
    body, _, code = p.stdout.rpartition(b"\n")
    return int(code), body


def post_json(server, path, payload):
    """(status, parsed JSON body) of a POST through curl."""
    status, body = curl(server.url + path, data=json.dumps(payload).encode())
    return status, json.loads(body)


def metrics(server):
    """/metrics as {"name" or "name{labels}": float}."""
    with urllib.request.urlopen(server.url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out
