"""Fixtures of the `kimi serve` tests (tests/serve; ctest: serve_tests): a kimi-linear-tiny random checkpoint with a
byte-level tokenizer, and `kimi serve` started on a free loopback port (--port 0: the server prints the port it
bound), stopped with SIGTERM after the tests (killed if it does not stop within 30 s: a test failure then).

    pytest tests/serve --kimi build/release/kimi
"""
import base64
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

import pytest

# The Kimi-Linear specials at their offsets from N = 256 (the released checkpoints' ids are 163584 + offset).
K2_SPECIALS = {0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>",
               6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>",
               11: "<|tool_calls_section_begin|>", 12: "<|tool_calls_section_end|>", 13: "<|tool_call_begin|>",
               14: "<|tool_call_argument_begin|>", 15: "<|tool_call_end|>", 17: "<|im_middle|>", 254: "[UNK]",
               255: "[PAD]"}


def pytest_addoption(parser):
    parser.addoption("--kimi", required=True, help="the kimi binary")


@pytest.fixture(scope="session")
def kimi(request):
    return os.path.abspath(request.config.getoption("--kimi"))


def write_byte_tokenizer(d):
    """tiktoken.model with the 256 bytes as ranks 0..255 (no merges: one token per byte) and the 256 specials
    256..511, so that the vocabulary is kimi-linear-tiny's 512."""
    with open(os.path.join(d, "tiktoken.model"), "w") as f:
        for b in range(256):
            f.write(f"{base64.b64encode(bytes([b])).decode()} {b}\n")
    decoder = {str(256 + k): {"content": name, "special": True} for k, name in K2_SPECIALS.items()}
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"added_tokens_decoder": decoder, "tokenizer_class": "TikTokenTokenizer"}, f)


@pytest.fixture(scope="session")
def model_dir(kimi):
    tmp = tempfile.TemporaryDirectory(prefix="kimi-serve-")
    d = os.path.join(tmp.name, "tiny")
    subprocess.run([kimi, "random-model", "kimi-linear-tiny", "--out", d, "--seed", "3"], check=True,
                   capture_output=True, timeout=300)
    write_byte_tokenizer(d)
    yield d
    tmp.cleanup()


class Server:
    """A running `kimi serve`; .url is its base URL, .lines what it printed so far."""

    def __init__(self, kimi, model_dir, *flags):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen([kimi, "serve", model_dir, "--port", "0", "--model-name", "tiny", *flags],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines = []
        listening = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.lines.append(line)
                if "listening on" in line:
                    listening.set()
            listening.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not listening.wait(120) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("kimi serve did not start: " + "".join(self.lines))
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", "".join(self.lines))
        self.url = m.group(1)

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError("kimi serve did not stop within 30 s of " + sig.name)
        self.reader.join(10)
        return self.proc.returncode


@pytest.fixture(scope="module")
def server(kimi, model_dir):
    s = Server(kimi, model_dir, "--slots", "8", "--ctx-size", "1024", "--max-batch-tokens", "64", "--max-queue", "128")
    yield s
    assert s.stop() == 0, "".join(s.lines)


def wait_for(predicate, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
