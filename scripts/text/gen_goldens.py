#!/usr/bin/env python3
"""Golden token ids from tiktoken for kimi.cpp's tokenizer tests (tests/test_tokenizer_golden.cpp).

The reference is tokenization_kimi.py's TikTokenTokenizer.encode over the `tiktoken` package: the same pat_str, the
same special tokens (ids N..N+255, named by tokenizer_config.json's added_tokens_decoder, else
<|reserved_token_{id}|>), the same 400,000-character chunks and 25,000-character run cuts (Python's str.isspace()),
and tiktoken's Encoding.encode on each part with disallowed_special=() (specials that are not allowed are text).
Decoding is tiktoken's Encoding.decode (bytes.decode("utf-8", "replace")).

  gen_goldens.py --out tests/fixtures/text
      writes two synthetic vocabularies, each a checkpoint-like directory (tiktoken.model, tokenizer_config.json)
      with its goldens.json: "trained" (all bytes + byte-level BPE merges trained on the corpus) and "shuffled" (all
      bytes + random corpus substrings, every rank shuffled: tiktoken's merge loop on a vocabulary that no training
      would give) and "substrings" (all bytes + every 2- and 3-byte substring of the hand-picked texts, shuffled:
      a piece boundary in the wrong place changes the ids). Deterministic (seeded).
  gen_goldens.py --checkpoint DIR --out FILE [--fuzz N --seed S]
      goldens of a real checkpoint's tokenizer (DIR holds tiktoken.model and tokenizer_config.json), or of one of
      the fixture vocabularies; --fuzz adds N more random strings (longer ones too) from seed S. The C++ test
      reads FILE when KIMI_TOKENIZER_GOLDENS=FILE and KIMI_TOKENIZER_DIR=DIR are set (docs/text/tokenizer.md).
  gen_goldens.py --check tests/fixtures/text
      recomputes every fixture vocabulary's goldens with the installed tiktoken and compares them with the
      committed goldens.json (ctest: tokenizer_goldens_fresh).
"""
import argparse
import base64
import collections
import hashlib
import json
import os
import random
import re
import sys

import tiktoken
from tiktoken.load import load_tiktoken_bpe

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

TIKTOKEN_VERSION = "0.14.0"
PAT_STR = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
NUM_RESERVED = 256
VOCABS = ("trained", "shuffled", "substrings")
TIKTOKEN_MAX_ENCODE_CHARS = 400_000
MAX_NO_WHITESPACES_CHARS = 25_000
# The names tokenization_kimi.py's checkpoints give some of their specials (the rest are reserved).
NAMED_SPECIALS = ["[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|start_header_id|>",
                  "<|end_header_id|>", "[EOT]", "<|im_system|>", "<|im_middle|>"]


def load_encoding(dirname):
    """tokenization_kimi.py's construction of its tiktoken.Encoding from a checkpoint directory."""
    ranks = load_tiktoken_bpe(os.path.join(dirname, "tiktoken.model"))
    with open(os.path.join(dirname, "tokenizer_config.json"), encoding="utf-8") as f:
        decoder = json.load(f).get("added_tokens_decoder", {})
    names = {int(k): v["content"] for k, v in decoder.items()}
    n = len(ranks)
    specials = {names.get(i, f"<|reserved_token_{i}|>"): i for i in range(n, n + NUM_RESERVED)}
    return tiktoken.Encoding(name="golden", pat_str=PAT_STR, mergeable_ranks=ranks, special_tokens=specials)


def split_whitespaces_or_nonwhitespaces(s, max_len):
    """tokenization_kimi.py's _split_whitespaces_or_nonwhitespaces (the same loop)."""
    cur_len = 0
    cur_space = s[0].isspace() if s else False
    start = 0
    for i in range(len(s)):
        space = s[i].isspace()
        if cur_space ^ space:
            cur_len = 1
            cur_space = space
        else:
            cur_len += 1
            if cur_len > max_len:
                yield s[start:i]
                start = i
                cur_len = 1
    yield s[start:]


def kimi_encode(enc, text, allowed):
    """tokenization_kimi.py's encode: chunks, run cuts, then tiktoken on each part."""
    allowed_special = enc.special_tokens_set if allowed == "all" else set(allowed)
    ids = []
    for i in range(0, len(text), TIKTOKEN_MAX_ENCODE_CHARS):
        for part in split_whitespaces_or_nonwhitespaces(text[i:i + TIKTOKEN_MAX_ENCODE_CHARS],
                                                        MAX_NO_WHITESPACES_CHARS):
            ids.extend(enc.encode(part, allowed_special=allowed_special, disallowed_special=()))
    return ids


def fnv1a64(ids):
    h = 0xCBF29CE484222325
    for t in ids:
        for b in t.to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def training_text():
    parts = list(corpus.CASES) + corpus.random_strings(seed=99, count=300)
    parts.append("def main():\n    for i in range(10):\n        print(i)\n\n    return 0\n" * 3)
    parts.append("The tokenizer splits text into pieces, then merges bytes by rank. " * 5)
    parts.append("模型把文本切成片段，再按等级合并字节。" * 5)
    return "\n".join(parts)


def train_vocab(text, merges):
    """All 256 bytes (ranks 0..255), then byte-level BPE merges of frequent adjacent pairs within words."""
    words = collections.Counter(tuple(bytes([b]) for b in w.encode("utf-8")) for w in re.findall(r" ?\S+|\s+", text))
    vocab = [bytes([b]) for b in range(256)]
    seen = set(vocab)
    for _ in range(merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[a, b] += c
        best = None
        for (a, b), c in pairs.most_common():
            if a + b not in seen:
                best = (a, b)
                break
        if best is None:
            break
        new = best[0] + best[1]
        vocab.append(new)
        seen.add(new)
        merged = collections.Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += c
        words = merged
    return vocab


def shuffled_vocab(text, extra, seed):
    """All 256 bytes and `extra` random byte substrings of the text (cutting characters anywhere), ranks shuffled."""
    rng = random.Random(seed)
    data = text.encode("utf-8")
    toks = {bytes([b]) for b in range(256)}
    while len(toks) < 256 + extra:
        n = rng.randint(2, 10)
        i = rng.randrange(0, len(data) - n)
        toks.add(data[i:i + n])
    vocab = sorted(toks)
    rng.shuffle(vocab)
    return vocab


def substring_vocab(texts, seed):
    """All 256 bytes and every 2- and 3-byte substring of the texts, ranks shuffled: nearly every boundary between
    two pieces of these texts could be merged across, so a piece boundary in the wrong place changes the ids."""
    rng = random.Random(seed)
    toks = {bytes([b]) for b in range(256)}
    for t in texts:
        data = t.encode("utf-8")
        for n in (2, 3):
            toks.update(data[i:i + n] for i in range(len(data) - n + 1))
    vocab = sorted(toks)
    rng.shuffle(vocab)
    return vocab


def write_checkpoint(dirname, vocab):
    os.makedirs(dirname, exist_ok=True)
    with open(os.path.join(dirname, "tiktoken.model"), "w", encoding="ascii") as f:
        for rank, tok in enumerate(vocab):
            f.write(f"{base64.b64encode(tok).decode()} {rank}\n")
    n = len(vocab)
    decoder = {str(n + k): {"content": name, "special": True} for k, name in enumerate(NAMED_SPECIALS)}
    with open(os.path.join(dirname, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"added_tokens_decoder": decoder, "tokenizer_class": "TikTokenTokenizer"}, f, indent=1)
        f.write("\n")


def goldens(enc, seed, fuzz=0, fuzz_seed=0):
    rng = random.Random(seed)
    cases = []
    extra = corpus.random_strings(seed=fuzz_seed, count=fuzz, max_len=400) if fuzz else []
    for text in corpus.CASES + corpus.random_strings() + extra:
        cases.append({"text": text, "allowed": "none", "ids": kimi_encode(enc, text, "none")})
    for text in corpus.SPECIAL_CASES + [t for t in corpus.CASES if "<|" in t or "[" in t]:
        for allowed in ("all", ["<|im_end|>"], ["<|im_middle|>", "[BOS]"]):
            cases.append({"text": text, "allowed": allowed, "ids": kimi_encode(enc, text, allowed)})
    for desc, parts in corpus.long_cases():
        text = "".join(s * k for s, k in parts)
        ids = kimi_encode(enc, text, "none")
        cases.append({"name": desc, "repeat": parts, "allowed": "none", "count": len(ids), "fnv1a64": fnv1a64(ids),
                      "head": ids[:100], "tail": ids[-100:]})
    decodes = []
    n = enc.n_vocab
    for _ in range(300):
        ids = [rng.randrange(n) if rng.random() < 0.05 else rng.randrange(n - NUM_RESERVED)
               for _ in range(rng.randint(1, 12))]
        decodes.append({"ids": ids, "text": enc.decode(ids)})
    return {"tiktoken_version": tiktoken.__version__, "encode": cases, "decode": decodes}


def write_goldens(path, data):
    with open(path, "w", encoding="ascii") as f:
        json.dump(data, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {len(data['encode'])} encode cases, {len(data['decode'])} decode cases, "
          f"sha256 {hashlib.sha256(open(path, 'rb').read()).hexdigest()[:16]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--checkpoint")
    ap.add_argument("--check")
    ap.add_argument("--fuzz", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if tiktoken.__version__ != TIKTOKEN_VERSION:
        sys.exit(f"gen_goldens.py: expected tiktoken {TIKTOKEN_VERSION}, got {tiktoken.__version__}")
    if args.check:
        bad = 0
        for name in VOCABS:
            d = os.path.join(args.check, name)
            with open(os.path.join(d, "goldens.json"), encoding="ascii") as f:
                committed = json.load(f)
            fresh = json.loads(json.dumps(goldens(load_encoding(d), seed=7)))  # tuples as JSON lists
            differ = False
            for kind in ("encode", "decode"):
                if fresh[kind] != committed[kind]:
                    i = next((i for i, (a, b) in enumerate(zip(fresh[kind], committed[kind])) if a != b),
                             min(len(fresh[kind]), len(committed[kind])))
                    print(f"{d}: {kind} case {i} differs from tiktoken {tiktoken.__version__}: regenerate with "
                          f"scripts/text/gen_goldens.py --out {args.check}")
                    differ = True
            bad += differ
            print(f"{d}: {len(fresh['encode'])} encode and {len(fresh['decode'])} decode goldens "
                  f"{'differ' if differ else 'equal tiktoken ' + tiktoken.__version__}")
        sys.exit(1 if bad else 0)
    if not args.out:
        ap.error("--out is required")
    if args.checkpoint:
        write_goldens(args.out, goldens(load_encoding(args.checkpoint), seed=7, fuzz=args.fuzz, fuzz_seed=args.seed))
        return
    text = training_text()
    probes = corpus.CASES + corpus.SPECIAL_CASES + corpus.random_strings()[:150]
    vocabs = {"trained": train_vocab(text, 1500), "shuffled": shuffled_vocab(text, 3000, seed=5),
              "substrings": substring_vocab(probes, seed=11)}
    for name in VOCABS:
        vocab = vocabs[name]
        d = os.path.join(args.out, name)
        write_checkpoint(d, vocab)
        write_goldens(os.path.join(d, "goldens.json"), goldens(load_encoding(d), seed=7))


if __name__ == "__main__":
    main()
