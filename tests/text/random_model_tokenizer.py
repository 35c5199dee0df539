#!/usr/bin/env python3
"""The tokenizer `kimi random-model` writes, read by tiktoken (ctest: random_model_tokenizer_tiktoken).

For a Kimi-Linear and a K3 config with a 4096-token vocabulary (3840 base tokens: bytes + BPE merges) and for the
tiny named configs (vocabulary 512: bytes only), `kimi random-model` writes a checkpoint; tiktoken loads its
tiktoken.model and tokenizer_config.json as tokenization_kimi.py does (scripts/text/gen_goldens.py load_encoding),
and must give the same ids as `kimi tokenize` on the goldens' corpus (scripts/text/corpus.py), user text and text
with specials allowed. The family's specials must sit at the released checkpoints' ids (N + offset).

    python3 tests/text/random_model_tokenizer.py build/release/kimi
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "text"))
import corpus  # noqa: E402
import gen_goldens  # noqa: E402

# Offsets from N of some specials of each family (docs/text/tokenizer.md gives the sources).
EXPECTED = {
    "kimi_linear": {"[BOS]": 0, "[EOS]": 1, "<|im_end|>": 2, "<|im_user|>": 3, "<|im_assistant|>": 4, "[EOT]": 9,
                    "<|im_system|>": 10, "<|tool_calls_section_begin|>": 11, "<|tool_call_end|>": 15,
                    "<|im_middle|>": 17, "[UNK]": 254, "[PAD]": 255},
    "k3": {"[BOS]": 0, "[EOS]": 1, "<|end_of_msg|>": 2, "<|open|>": 3, "<|close|>": 4, "<|sep|>": 5, "[EOT]": 9,
           "[UNK]": 254, "[PAD]": 255},
}


def run(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAILED: {' '.join(map(str, args))}\n{r.stdout}{r.stderr}")
    return r.stdout


def kimi_ids(kimi, model, text, specials, tmp):
    path = os.path.join(tmp, "text.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return json.loads(run(kimi, "tokenize", model, "--text-file", path, "--specials", specials, "--json"))["ids"]


def check(kimi, config, family, vocab, tmp):
    model = os.path.join(tmp, f"{config}-{vocab}")
    if vocab == 512:
        run(kimi, "random-model", config, "--out", model)
    else:  # the named config with a larger vocabulary
        base = os.path.join(tmp, f"{config}-base")
        run(kimi, "random-model", config, "--out", base)
        with open(os.path.join(base, "config.json")) as f:
            cfg = json.load(f)
        (cfg["text_config"] if "text_config" in cfg else cfg)["vocab_size"] = vocab
        path = os.path.join(tmp, f"{config}-{vocab}.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        run(kimi, "random-model", path, "--out", model)
    enc = gen_goldens.load_encoding(model)
    n = vocab - 256
    assert enc.n_vocab == vocab, (config, enc.n_vocab, vocab)
    for name, offset in EXPECTED[family].items():
        assert enc.encode_single_token(name) == n + offset, (config, name, enc.encode_single_token(name), n + offset)
    text = "\n".join(corpus.CASES + corpus.random_strings(seed=7, count=200))
    want = gen_goldens.kimi_encode(enc, text, [])
    got = kimi_ids(kimi, model, text, "none", tmp)
    assert got == want, (config, vocab, "user text: kimi and tiktoken differ")
    special_text = "".join(f"{name} hello 世界 {i}\n" for i, name in enumerate(EXPECTED[family]))
    want = gen_goldens.kimi_encode(enc, special_text, "all")
    got = kimi_ids(kimi, model, special_text, "all", tmp)
    assert got == want, (config, vocab, "specials allowed: kimi and tiktoken differ")
    assert enc.decode(want) == special_text
    merges = sum(1 for t in enc._mergeable_ranks if len(t) > 1)  # noqa: SLF001
    print(f"{config} vocab {vocab}: {n} base tokens ({merges} longer than a byte), {len(want)} ids agree")
    if vocab > 512:
        assert merges == n - 256, (config, merges)
        # trained merges shorten English and Chinese text
        assert len(enc.encode("The quick brown fox jumps over the lazy dog.")) < 30
        assert len(enc.encode("机器学习是人工智能的一个分支。")) < 30


def main():
    kimi = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="kimi-rm-tok-") as tmp:
        check(kimi, "kimi-linear-tiny", "kimi_linear", 512, tmp)
        check(kimi, "k3-tiny", "k3", 512, tmp)
        check(kimi, "kimi-linear-tiny", "kimi_linear", 4096, tmp)
        check(kimi, "k3-tiny", "k3", 4096, tmp)
    print("random-model tokenizers: tiktoken and kimi agree")


if __name__ == "__main__":
    main()
