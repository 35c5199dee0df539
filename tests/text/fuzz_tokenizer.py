#!/usr/bin/env python3
"""Differential fuzz of the tokenizer against tiktoken: random strings (up to 400 characters) from a fresh seed,
encoded by tiktoken through scripts/text/gen_goldens.py on the "substrings" fixture vocabulary (where a misplaced
piece boundary changes the ids), then checked by the C++ golden test on the same vocabulary.

    python3 tests/text/fuzz_tokenizer.py build/release/tests/kimi_tests [COUNT]   (ctest: tokenizer_fuzz)

KIMI_FUZZ_SEED=S repeats a run (the seed is printed first).
"""
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    tests = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    seed = int(os.environ.get("KIMI_FUZZ_SEED", random.randrange(2**31)))
    print(f"tokenizer fuzz: seed {seed} (KIMI_FUZZ_SEED={seed} repeats it), {count} strings", flush=True)
    vocab = os.path.join(ROOT, "tests", "fixtures", "text", "substrings")
    with tempfile.TemporaryDirectory(prefix="kimi-tok-fuzz-") as tmp:
        goldens = os.path.join(tmp, "goldens.json")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "text", "gen_goldens.py"), "--checkpoint", vocab,
                        "--out", goldens, "--fuzz", str(count), "--seed", str(seed)], check=True)
        env = dict(os.environ, KIMI_TOKENIZER_DIR=vocab, KIMI_TOKENIZER_GOLDENS=goldens)
        rc = subprocess.run([tests, "--gtest_filter=*TokenizerGolden*checkpoint", "--gtest_brief=1"], env=env).returncode
    if rc != 0:
        print(f"tokenizer fuzz: FAILED with seed {seed}")
    sys.exit(rc)


if __name__ == "__main__":
    main()
