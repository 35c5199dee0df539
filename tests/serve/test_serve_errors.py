"""Bad requests get HTTP 4xx with an OpenAI-style error naming the field, never a crash (the server answers
/health after all of them and exits 0 on SIGTERM); bad flags of `kimi serve`; SIGINT stops it cleanly."""
import json
import signal
import subprocess

import openai
import pytest

from conftest import Server
from helpers import client, curl, post_json


def error_of(status_body):
    status, body = status_body
    return status, body["error"]


def check(err, status, param, code, message=None, got=None):
    s, e = err
    assert s == status, e
    assert e["type"] == ("invalid_request_error" if status < 500 else "server_error")
    assert e["param"] == param and e["code"] == code, e
    if message is not None:
        assert e["message"] == message
    return e


def test_bad_requests_through_curl(server):
    url = server.url
    parse = lambda sb: (sb[0], json.loads(sb[1])["error"])
    # Malformed JSON: the byte and the field it broke in.
    e = check(parse(curl(url + "/v1/completions", data=b'{"model": "tiny", "prompt": "x", "max_tokens": }')),
              400, "max_tokens", "invalid_json")
    assert e["message"].startswith("request body: expected valid JSON, got an error at byte 48 (in max_tokens): ")
    # Invalid UTF-8 inside a message.
    body = b'{"model": "tiny", "messages": [{"role": "user", "content": "caf\xc3"}]}'
    e = check(parse(curl(url + "/v1/chat/completions", data=body)), 400, "messages[0].content", "invalid_utf8")
    assert e["message"].startswith("request body: expected valid UTF-8, got an error at byte ")
    # A body over 10 MB.
    big = json.dumps({"model": "tiny", "prompt": "a" * (10 << 20)}).encode()
    check(parse(curl(url + "/v1/completions", data=big)), 413, None, "request_too_large",
          "request body: expected at most 10485760 bytes")
    # No such route.
    check(parse(curl(url + "/v2/nothing")), 404, None, "not_found")
    # Not an object.
    check(parse(curl(url + "/v1/completions", data=b"[]")), 400, "body", "invalid_type",
          "body: expected a JSON object, got an array")


def test_bad_requests_through_openai(server):
    c = client(server)
    cases = [
        (lambda: c.completions.create(model="other", prompt="x"), 404, "model", "model_not_found",
         'model: expected "tiny" (the model this server serves), got "other"'),
        (lambda: c.completions.create(model="tiny", prompt="x", max_tokens=-3), 400, "max_tokens", "invalid_value",
         "max_tokens: expected an integer >= 1, got -3"),
        (lambda: c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}],
                                           max_completion_tokens=-1), 400, "max_completion_tokens", "invalid_value",
         "max_completion_tokens: expected an integer >= 1, got -1"),
        (lambda: c.completions.create(model="tiny", prompt="x" * 1024), 400, "prompt", "context_length_exceeded",
         "prompt: expected fewer than 1024 tokens (the context, --ctx-size, less one new token), got 1024"),
        (lambda: c.completions.create(model="tiny", prompt="x" * 1000, max_tokens=30), 400, "max_tokens",
         "context_length_exceeded",
         "max_tokens: expected at most 24 (the context of 1024 tokens less the prompt's 1000), got 30"),
        (lambda: c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x" * 1100}]), 400,
         "messages", "context_length_exceeded", None),
        (lambda: c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"},
                                                                   {"role": "robot", "content": "y"}]),
         400, "messages[1].role", "invalid_value",
         'messages[1].role: expected one of system, developer, user, assistant, tool, got "robot"'),
        (lambda: c.completions.create(model="tiny", prompt="x", n=2), 400, "n", "invalid_value",
         "n: expected 1 (one choice per request), got 2"),
        (lambda: c.completions.create(model="tiny", prompt=[1, 2, 999]), 400, "prompt[2]", "invalid_value",
         "prompt[2]: expected a token id below 512 (the vocabulary), got 999"),
        (lambda: c.completions.create(model="tiny", prompt="x", temperature=3), 400, "temperature", "invalid_value",
         "temperature: expected a number in [0, 2], got 3"),
        (lambda: c.completions.create(model="tiny", prompt="x", stop=["a", "b", "c", "d", "e"]), 400, "stop",
         "invalid_value", "stop: expected at most 4 strings, got 5"),
    ]
    for call, status, param, code, message in cases:
        with pytest.raises(openai.APIStatusError) as e:
            call()
        assert e.value.status_code == status, e.value
        body = e.value.body
        err = body["error"] if "error" in body else body
        assert (err["param"], err["code"], err["type"]) == (param, code, "invalid_request_error"), err
        if message is not None:
            assert err["message"] == message
    # Still serving.
    assert client(server).completions.create(model="tiny", prompt="ok", max_tokens=1).usage.completion_tokens == 1


def test_sigint_stops_cleanly_and_flags_are_checked(kimi, model_dir):
    s = Server(kimi, model_dir, "--slots", "2", "--ctx-size", "64", "--max-batch-tokens", "16")
    assert s.stop(signal.SIGINT) == 0
    out = "".join(s.lines)
    assert "kimi serve: SIGINT: stopping" in out and out.endswith("kimi serve: stopped\n")

    def fails(*flags):
        p = subprocess.run([kimi, "serve", model_dir, *flags], capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, p.stderr
        return p.stderr

    assert fails("--slots", "4", "--max-batch-tokens", "3") == (
        "kimi: serve: --max-batch-tokens: expected a value in [--slots = 4, 1048576] (every decoding request takes "
        "one token of each step), got 3\n")
    assert fails("--port", "70000") == "kimi: serve: --port: expected a value in [0, 65535] (0: any free port), got 70000\n"
    assert fails("--ctx-size", "1") == (
        "kimi: serve: --ctx-size: expected a value in [2, 1048576] (the model's context limit), got 1\n")
    assert fails("--slots", "0") == "kimi: serve: --slots: expected a value in [1, 4096], got 0\n"
    # A port in use.
    taken = Server(kimi, model_dir, "--ctx-size", "64")
    try:
        port = taken.url.rsplit(":", 1)[1]
        assert fails("--port", port, "--ctx-size", "64") == (
            f"kimi: serve: --host/--port: cannot listen on 127.0.0.1:{port} (address in use, not an address of this "
            "machine, or a privileged port)\n")
    finally:
        assert taken.stop() == 0
