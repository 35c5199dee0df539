#!/usr/bin/env python3
"""`kimi chat` driven through a pipe (one user turn per line) on two tiny random checkpoints with tokenizers, one of
each chat format: kimi-linear-tiny (kimi_k2) and k3-tiny (kimi_k3). Runs the built binary:

    python3 tests/cli/chat.py build/release/kimi      (ctest: kimi_cli_chat)

--print-ids makes the chat print each turn's prompt ids and generated ids on stderr, so a turn's greedy reply can
be checked against `kimi generate` on the same prompt ids.
"""
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest

KIMI = None  # the binary, from argv[1]
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def run(*args, stdin=""):
    p = subprocess.run([KIMI, *map(str, args)], input=stdin, capture_output=True, text=True, timeout=300, env=ENV)
    return p.returncode, p.stdout, p.stderr


def turns(err):
    """{turn: (prompt ids, generated ids, finish)} from --print-ids lines."""
    prompts = {int(t): list(map(int, ids.split()))
               for t, ids in re.findall(r"^kimi chat: turn (\d+) prompt ids ([\d ]+)$", err, re.M)}
    out = {}
    for t, ids, fin in re.findall(r"^kimi chat: turn (\d+) generated ids ([\d ]*) \((\w+)\)$", err, re.M):
        out[int(t)] = (prompts[int(t)], list(map(int, ids.split())), fin)
    return out


class Chat(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="kimi-chat-")
        cls.models = {}
        for name in ["kimi-linear-tiny", "k3-tiny"]:
            d = os.path.join(cls.tmp.name, name)
            rc, _, err = run("random-model", name, "--out", d, "--seed", 1)
            assert rc == 0, err
            cls.models[name] = d
        cls.config_only = os.path.join(cls.tmp.name, "config-only")
        os.makedirs(cls.config_only)
        with open(os.path.join(cls.models["k3-tiny"], "config.json")) as src, \
                open(os.path.join(cls.config_only, "config.json"), "w") as dst:
            dst.write(src.read())

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def chat(self, model, lines, *flags):
        rc, out, err = run("chat", self.models[model], "--print-ids", *flags, stdin="".join(l + "\n" for l in lines))
        self.assertEqual(rc, 0, err)
        return out, err, turns(err)

    def generate(self, model, prompt, max_tokens):
        rc, out, err = run("generate", self.models[model], "--prompt", ",".join(map(str, prompt)), "--max-tokens",
                           max_tokens, "--threads", 1, "--json")
        self.assertEqual(rc, 0, err)
        return json.loads(out)["sequences"][0]["ids"]

    def decode(self, model, ids):
        rc, out, err = run("tokenize", self.models[model], "--ids", ",".join(map(str, ids)), "--json")
        self.assertEqual(rc, 0, err)
        return json.loads(out)["text"]

    def test_turns_print_and_greedy_equals_generate(self):
        for model in self.models:
            with self.subTest(model=model):
                out, err, t = self.chat(model, ["hello", "how are you", "/exit", "never read"], "--max-tokens", 8)
                self.assertEqual(sorted(t), [0, 1], err)  # /exit ended it: the third line is no turn
                # Each turn renders the whole conversation: turn 1's prompt extends turn 0's.
                self.assertEqual(t[1][0][:len(t[0][0])], t[0][0])
                self.assertGreater(len(t[1][0]), len(t[0][0]) + len(t[0][1]))
                for k in (0, 1):
                    prompt, gen, fin = t[k]
                    self.assertIn(fin, ("stop", "length"))
                    self.assertEqual(len(gen) == 8, fin == "length")
                    # Greedy: the chat's reply is what `kimi generate` gives on the same prompt ids (cut at the
                    # turn's end token, which generate without --stop runs past).
                    self.assertEqual(self.generate(model, prompt, 8)[:len(gen)], gen)
                if model == "k3-tiny":  # the K3 generation prompt opens a thinking block: the reply is reasoning
                    self.assertTrue(out.startswith("[thinking] "), out)
                else:  # K2, no <think> in the reply: its text is the text of its ids less the special tokens
                    body = [i for i in t[0][1] if not re.fullmatch(r"<\|[a-z_0-9]+\|>", self.decode(model, [i]))]
                    self.assertTrue(out.startswith(self.decode(model, body) + "\n"), (out, body))

    def test_thinking_switch_k3(self):
        _, _, on = self.chat("k3-tiny", ["hi"], "--max-tokens", 2)
        _, _, off = self.chat("k3-tiny", ["hi"], "--max-tokens", 2, "--no-thinking")
        # <|open|>think<|sep|> vs <|open|>response<|sep|> ends the prompt; the effort message goes with thinking.
        think = self.decode("k3-tiny", on[0][0])
        resp = self.decode("k3-tiny", off[0][0])
        self.assertTrue(think.endswith("<|open|>think<|sep|>"), think[-60:])
        self.assertTrue(resp.endswith("<|open|>response<|sep|>"), resp[-60:])
        self.assertIn("thinking_effort", think)
        self.assertNotIn("thinking_effort", resp)

    def test_system_message(self):
        _, _, t = self.chat("kimi-linear-tiny", ["hi"], "--max-tokens", 2, "--system", "Be brief.")
        text = self.decode("kimi-linear-tiny", t[0][0])
        self.assertTrue(text.startswith("<|im_system|>system<|im_middle|>Be brief.<|im_end|><|im_user|>user"), text)

    def test_reset_clears_history(self):
        for model in self.models:
            with self.subTest(model=model):
                _, err, t = self.chat(model, ["hello", "/reset", "hello"], "--max-tokens", 4)
                self.assertIn("kimi chat: history cleared\n", err)
                self.assertEqual(t[1][0], t[0][0])  # the same prompt as the first turn's
                self.assertEqual(t[1][1], t[0][1])  # greedy: the same reply

    def test_end_of_input_ends(self):
        rc, out, err = run("chat", self.models["k3-tiny"], "--max-tokens", 2, stdin="")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "")

    def test_sigint_stops_the_reply_not_the_program(self):
        for model in self.models:
            with self.subTest(model=model):
                # --ignore-eos: replies run to --max-tokens, far beyond the test's patience, unless stopped.
                p = subprocess.Popen([KIMI, "chat", self.models[model], "--print-ids", "--ignore-eos",
                                      "--max-tokens", "60000", "--ctx-size", "65536"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
                err_bytes = b""
                try:
                    os.set_blocking(p.stdout.fileno(), False)
                    os.set_blocking(p.stderr.fileno(), False)
                    for k, line in enumerate([b"hello\n", b"second\n"]):
                        p.stdin.write(line)
                        p.stdin.flush()
                        got, deadline = b"", time.monotonic() + 60
                        while not got and time.monotonic() < deadline:  # the reply is streaming
                            got = p.stdout.read() or b""
                            time.sleep(0.05)
                        self.assertTrue(got, f"turn {k}: no output within 60 s")
                        self.assertIsNone(p.poll())
                        p.send_signal(signal.SIGINT)
                        # The reply has stopped (and the chat waits for the next line) before the next turn: a
                        # line sent earlier could find the chat still streaming turn k, and the next SIGINT the
                        # chat at its prompt, which ends it.
                        stopped, deadline = b"kimi chat: reply stopped (Ctrl-C)\n", time.monotonic() + 60
                        while err_bytes.count(stopped) <= k and time.monotonic() < deadline:
                            err_bytes += p.stderr.read() or b""
                            time.sleep(0.05)
                        self.assertEqual(err_bytes.count(stopped), k + 1, err_bytes.decode())
                        while p.stdout.read():  # the stopped reply's last bytes
                            pass
                    p.stdin.write(b"/exit\n")
                    p.stdin.close()
                    p.wait(timeout=60)
                    os.set_blocking(p.stderr.fileno(), True)
                    err = (err_bytes + p.stderr.read()).decode()
                finally:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                    p.stdout.close()
                    p.stderr.close()
                self.assertEqual(p.returncode, 0, err)
                t = turns(err)
                self.assertEqual(sorted(t), [0, 1], err)
                for k in (0, 1):
                    self.assertEqual(t[k][2], "stopped")
                    self.assertTrue(0 < len(t[k][1]) < 60000)
                self.assertEqual(err.count("kimi chat: reply stopped (Ctrl-C)\n"), 2)

    def test_sigint_at_the_prompt_ends_the_chat(self):
        p = subprocess.Popen([KIMI, "chat", self.models["k3-tiny"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=ENV)
        try:
            # The banner comes once the model is loaded and the handler installed; then the chat waits for a line.
            ready, _, _ = select.select([p.stderr], [], [], 60)
            self.assertTrue(ready, "no banner within 60 s")
            self.assertTrue(p.stderr.readline().startswith(b"kimi chat: "))
            time.sleep(0.2)
            p.send_signal(signal.SIGINT)
            self.assertEqual(p.wait(timeout=30), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (p.stdin, p.stdout, p.stderr):
                f.close()

    def fails(self, args, *fragments, stdin="hi\n"):
        rc, out, err = run(*args, stdin=stdin)
        self.assertEqual(rc, 2, f"kimi {' '.join(map(str, args))}\nstdout: {out}\nstderr: {err}")
        self.assertEqual(err.count("\n"), 1, f"one line expected: {err}")
        self.assertTrue(err.startswith("kimi: chat: "), err)
        for f in fragments:
            self.assertIn(f, err)
        self.assertEqual(out, "")

    def test_bad_flags(self):
        k2, k3 = self.models["kimi-linear-tiny"], self.models["k3-tiny"]
        self.fails(["chat", self.config_only],
                   f"chat: tokenizer: {self.config_only}/tiktoken.model: cannot open: no such file (a chat needs the "
                   "checkpoint's tiktoken.model and tokenizer_config.json)")
        self.fails(["chat", os.path.join(self.tmp.name, "nowhere")], "chat: model directory ", ": no such directory")
        self.fails(["chat", k3, "--max-tokens", 0],
                   "chat: --max-tokens: expected a value in [1, 4095] (--ctx-size 4096 less one prompt token), got 0")
        self.fails(["chat", k3, "--max-tokens", 100, "--ctx-size", 100],
                   "chat: --max-tokens: expected a value in [1, 99] (--ctx-size 100 less one prompt token), got 100")
        self.fails(["chat", k3, "--ctx-size", 1],
                   "chat: --ctx-size: expected a value in [2, 1048576] (the model's context limit), got 1")
        self.fails(["chat", k3, "--temperature", -1],
                   "chat: --temperature: expected a finite value >= 0 (0 = greedy), got -1")
        self.fails(["chat", k3, "--top-p", 0], "chat: --top-p: expected a value in (0, 1], got 0")
        self.fails(["chat", k3, "--top-k", -1], "chat: --top-k: expected >= 0 (0 = all tokens), got -1")
        self.fails(["chat", k3, "--seed", -1],
                   "chat: --seed: expected an integer in [0, 2^64 - 1 = 18446744073709551615], got '-1'")
        self.fails(["chat", k3, "--device", "tpu"], "chat: --device: expected cpu, cuda or cuda:<index>, got 'tpu'")
        self.fails(["chat", k2, "--no-thinking"],
                   "chat: --no-thinking: expected a checkpoint of the kimi_k3 chat format (its generation prompt opens "
                   "a thinking block or not), got one of the kimi_k2 format, whose prompt has no such switch")
        # CLI11's own errors: an unknown flag, a value that is no number.
        rc, _, err = run("chat", k3, "--bogus")
        self.assertNotEqual(rc, 0)
        self.assertIn("The following argument was not expected: --bogus", err)
        rc, _, err = run("chat", k3, "--max-tokens", "abc")
        self.assertNotEqual(rc, 0)
        self.assertIn("--max-tokens", err)

    def test_conversation_longer_than_the_context_is_dropped(self):
        _, err, t = self.chat("kimi-linear-tiny", ["x y z " * 100, "hi"], "--ctx-size", 128, "--max-tokens", 2)
        self.assertRegex(err, r"kimi chat: the conversation is \d+ tokens, expected fewer than --ctx-size 128: /reset")
        self.assertEqual(sorted(t), [0])  # the long line made no turn; the next one did
        self.assertLess(len(t[0][0]), 128)


if __name__ == "__main__":
    KIMI = sys.argv.pop(1)
    unittest.main()
