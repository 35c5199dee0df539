#!/usr/bin/env python3
"""Tokenizer throughput beside tiktoken's on the same text.

    python scripts/text/bench_tokenizer.py build/release/kimi [CHECKPOINT_DIR] [--mb 8]

Encodes the same text (the corpus of scripts/text/corpus.py repeated to --mb MB: English, code, CJK, marks, emoji)
with tokenization_kimi.py's encode over tiktoken (one thread, in process) and with `kimi tokenize --text-file`
(its time less that of an empty file: the loading excluded, the printing of the ids counted against it), checks the ids are equal and
prints MB/s of both. CHECKPOINT_DIR defaults to the "trained" fixture vocabulary; a real checkpoint gives the
numbers that matter (163,840 tokens).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
import gen_goldens  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kimi")
    ap.add_argument("dir", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures",
                                                           "text", "trained"))
    ap.add_argument("--mb", type=float, default=8)
    args = ap.parse_args()
    unit = "\n".join(corpus.CASES + corpus.random_strings(count=100)) + "\n"
    unit += open(os.path.join(os.path.dirname(__file__), "gen_goldens.py"), encoding="utf-8").read()
    text = unit * max(1, int(args.mb * 1e6 / len(unit.encode())))
    data = text.encode()
    enc = gen_goldens.load_encoding(args.dir)
    t = time.perf_counter()
    ref = gen_goldens.kimi_encode(enc, text, "none")
    t_tiktoken = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as d:
        f, empty = os.path.join(d, "text.txt"), os.path.join(d, "empty.txt")
        open(f, "wb").write(data)
        open(empty, "wb").close()

        def timed(path):
            best, out = float("inf"), None
            for _ in range(3):
                t = time.perf_counter()
                out = subprocess.run([args.kimi, "tokenize", args.dir, "--text-file", path], check=True,
                                     capture_output=True, text=True).stdout
                best = min(best, time.perf_counter() - t)
            return best, out

        t_base, _ = timed(empty)
        t_kimi, out = timed(f)
    ids = [int(x) for x in out.strip().split(",")]
    assert ids == ref, "kimi tokenize and tiktoken disagree"
    mb = len(data) / 1e6
    print(f"{mb:.1f} MB, {len(ids)} tokens, vocabulary {args.dir}")
    import tiktoken
    print(f"tiktoken {tiktoken.__version__} (tokenization_kimi.py's encode): {mb / t_tiktoken:8.2f} MB/s")
    print(f"kimi tokenize (encode + printing the ids):    {mb / (t_kimi - t_base):8.2f} MB/s")


if __name__ == "__main__":
    main()
