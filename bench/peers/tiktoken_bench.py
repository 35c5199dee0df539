#!/usr/bin/env python3
"""The Kimi tokenizer's encode throughput beside tiktoken's, on the same vocabulary and texts, one thread each.

    python3 bench/peers/tiktoken_bench.py build/release/kimi_bench_tokenizer [--ranks 32768] [--mb 4] [--reps 5]

1. Texts (each repeated to --mb MB): English prose (the licence texts of /usr/share/common-licenses), code (this
   repository's src/**/*.{h,cpp,cu}), CJK (CPython's test/cjkencodings/*-utf8.txt: Chinese, Japanese, Korean prose)
   and mixed (their paragraphs interleaved).
2. A vocabulary of --ranks ranks trained with the `tokenizers` package (byte-level BPE; its merges in order become
   ranks 256.., after the 256 single bytes) on those texts and CPython's standard library sources (more words than
   the texts alone have merges for), written as tiktoken.model + tokenizer_config.json (Kimi's
   named specials, then reserved ones), as a checkpoint ships them.
3. tiktoken 0.14.0: tokenization_kimi.py's Encoding (Kimi's pat_str, these ranks) and its encode of each text with
   no specials allowed (scripts/text/gen_goldens.py: kimi_encode, the 400,000-character chunks and 25,000-character
   runs), in this process: one thread (tiktoken's encode holds the GIL; only encode_batch uses threads). Fastest of
   --reps runs; and tiktoken's encode_ordinary of the whole text in one call (its Rust core alone).
4. kimi_bench_tokenizer (bench/text/tokenizer_throughput.cpp): Tokenizer::encode of each file, fastest of --reps.
The ids of both must be equal (count and FNV-1a hash); the table gives MB/s (1e6 bytes of UTF-8) and the ratio.
"""
import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts", "text"))
import gen_goldens  # noqa: E402


def read(paths):
    parts = []
    for p in sorted(paths):
        with open(p, encoding="utf-8", errors="strict") as f:
            parts.append(f.read())
    if not parts:
        raise SystemExit(f"no text found ({paths})")
    return "\n".join(parts)


def texts(mb):
    import sysconfig
    english = read(p for p in glob.glob("/usr/share/common-licenses/*") if os.path.isfile(p))
    code = read(glob.glob(os.path.join(ROOT, "src", "**", "*.h"), recursive=True) +
                glob.glob(os.path.join(ROOT, "src", "**", "*.cpp"), recursive=True) +
                glob.glob(os.path.join(ROOT, "src", "**", "*.cu"), recursive=True))
    cjk = read(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "test", "cjkencodings", "*-utf8.txt")))
    paras = [t.split("\n\n") for t in (english, code, cjk)]
    mixed = "\n\n".join(p[i % len(p)] for i in range(max(map(len, paras))) for p in paras)
    out = {}
    for name, t in (("english", english), ("code", code), ("cjk", cjk), ("mixed", mixed)):
        n = max(1, int(mb * 1e6 / len(t.encode())))
        out[name] = (t + "\n") * n
    return out


def byte_decoder():
    """GPT-2's bytes_to_unicode, inverted: the byte-level alphabet of `tokenizers` back to bytes."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def train_vocab(corpus, num_ranks, out_dir):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=num_ranks, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    dec = byte_decoder()
    merges = json.loads(tok.to_str())["model"]["merges"]
    ranks = [bytes([b]) for b in range(256)]
    seen = set(ranks)
    for m in merges:
        a, b = m if isinstance(m, list) else m.split(" ")
        t = bytes(dec[c] for c in a + b)
        if t not in seen:
            seen.add(t)
            ranks.append(t)
    import base64
    with open(os.path.join(out_dir, "tiktoken.model"), "w") as f:
        for r, t in enumerate(ranks):
            f.write(f"{base64.b64encode(t).decode()} {r}\n")
    names = gen_goldens.NAMED_SPECIALS
    cfg = {"added_tokens_decoder": {str(len(ranks) + i): {"content": n, "special": True} for i, n in enumerate(names)}}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f)
    return len(ranks)


def fnv1a(ids):
    h = 1469598103934665603
    for b in struct.pack(f"<{len(ids)}I", *ids):
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench", help="build/release/kimi_bench_tokenizer")
    ap.add_argument("--ranks", type=int, default=32768)
    ap.add_argument("--mb", type=float, default=4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--keep", help="write the vocabulary and texts into this directory and keep them (rerun "
                                   "kimi_bench_tokenizer DIR DIR/*.txt on them)")
    args = ap.parse_args()
    import tiktoken
    ts = texts(args.mb)
    with tempfile.TemporaryDirectory(prefix="kimi-tokbench-") as tmp:
        d = args.keep or tmp
        os.makedirs(d, exist_ok=True)
        import sysconfig
        stdlib = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "**", "*.py"), recursive=True))
        corpus = [t[: len(t) // max(1, int(args.mb))] for t in ts.values()]
        for p in stdlib:
            with open(p, encoding="utf-8", errors="replace") as f:
                corpus.append(f.read())
        n = train_vocab(corpus, args.ranks, d)
        enc = gen_goldens.load_encoding(d)
        files = []
        for name, t in ts.items():
            files.append(os.path.join(d, name + ".txt"))
            with open(files[-1], "w", encoding="utf-8") as f:
                f.write(t)
        kimi = [json.loads(l) for l in subprocess.run([args.bench, d, *files, "--reps", str(args.reps)], check=True,
                                                       capture_output=True, text=True).stdout.splitlines()]
        print(f"vocabulary: {n} ranks (byte-level BPE trained by `tokenizers` on the texts and CPython's stdlib), "
              f"tiktoken {tiktoken.__version__}, one thread each, fastest of {args.reps}")
        print("| text | MB | tokens | tiktoken, tokenization_kimi.py's encode MB/s | tiktoken encode_ordinary MB/s | "
              "kimi.cpp MB/s | kimi / kimi.py's | kimi / encode_ordinary |")
        print("|---|---|---|---|---|---|---|---|")
        for (name, t), k in zip(ts.items(), kimi):
            def fastest(f):
                best = float("inf")
                for _ in range(args.reps):
                    t0 = time.perf_counter()
                    r = f()
                    best = min(best, time.perf_counter() - t0)
                return best, r
            best, ids = fastest(lambda: gen_goldens.kimi_encode(enc, t, "none"))
            # encode_ordinary of the whole text in one call: tiktoken's Rust alone, without tokenization_kimi.py's
            # Python-level splitting into 400,000-character chunks and 25,000-character runs.
            raw, _ = fastest(lambda: enc.encode_ordinary(t))
            assert len(ids) == k["tokens"] and fnv1a(ids) == k["fnv1a"], f"{name}: kimi.cpp and tiktoken disagree"
            mb = len(t.encode()) / 1e6
            print(f"| {name} | {mb:.2f} | {len(ids)} | {mb / best:.2f} | {mb / raw:.2f} | {k['mb_per_s']:.2f} | "
                  f"{k['mb_per_s'] / (mb / best):.2f} | {k['mb_per_s'] / (mb / raw):.2f} |")


if __name__ == "__main__":
    main()
