#!/usr/bin/env python3
"""The peer of `kimi bench`: Hugging Face transformers' KimiLinearForCausalLM (bf16, sdpa attention, FLA's
kernels for KDA where `fla` imports, grouped_mm experts) on the same shapes, timed the same way.

  python bench/peers/transformers_model.py (--checkpoint DIR | --config CONFIG.json) [--prefill 1x8192,16x512]
      [--decode 1,32,128] [--context 512] [--steps 32] [--reps 3] [--json OUT.json]

--checkpoint loads a checkpoint directory (e.g. one `kimi random-model` wrote: the same weights kimi.cpp reads);
--config builds the model from a config.json with random weights made on the GPU (for models whose checkpoint would
not fit the disk; routing of random weights is near uniform on both sides).

  prefill BxN : one forward of B sequences of N tokens (no cache kept), after one untimed warm-up; median of --reps;
                tokens/s = B N / seconds.
  decode  B   : B sequences prefilled with --context tokens, then --steps single-token steps (2 untimed first), each
                step one forward of [B, 1] with the cache; ms/step = median step time; tokens/s = B / step.
Peak GPU memory is torch.cuda.max_memory_allocated over the whole run. Output: one line per row, and --json.
"""
import argparse
import json
import statistics
import sys
import time

import torch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="checkpoint directory (config.json + safetensors)")
    src.add_argument("--config", help="config.json: random weights made on the GPU")
    p.add_argument("--prefill", default="1x8192,16x512", help="BxN shapes, comma-separated ('' for none)")
    p.add_argument("--decode", default="1,32,128", help="decode batch sizes, comma-separated ('' for none)")
    p.add_argument("--context", type=int, default=512, help="tokens per sequence before the decode steps")
    p.add_argument("--steps", type=int, default=32, help="timed decode steps (after 2 untimed)")
    p.add_argument("--reps", type=int, default=3, help="timed prefill repetitions")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the rows here")
    a = p.parse_args()
    for name in ("context", "steps", "reps"):
        if getattr(a, name) < 1:
            p.error(f"--{name}: expected >= 1, got {getattr(a, name)}")
    return a


def load(a):
    from transformers import AutoConfig, AutoModelForCausalLM

    def build(**kw):
        kw.update(dtype=torch.bfloat16, attn_implementation="sdpa")
        if a.checkpoint:
            return AutoModelForCausalLM.from_pretrained(a.checkpoint, device_map="cuda", **kw)
        cfg = AutoConfig.from_pretrained(a.config)
        with torch.device("cuda"):
            return AutoModelForCausalLM.from_config(cfg, **kw)

    try:  # transformers 5: the MoE experts' implementation
        model, experts = build(experts_implementation="grouped_mm"), "grouped_mm"
    except (TypeError, ValueError) as e:
        print(f"note: experts_implementation='grouped_mm' refused ({e}); default experts", file=sys.stderr)
        model, experts = build(), "default"
    model.eval()
    return model, experts


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


@torch.inference_mode()
def main():
    a = parse_args()
    torch.manual_seed(a.seed)
    model, experts = load(a)
    vocab = model.config.vocab_size
    try:
        import fla  # noqa: F401

        kda = f"fla {getattr(fla, '__version__', '?')}"
    except ImportError:
        kda = "transformers' pure-PyTorch fallback (fla not importable)"
    info = {"peer": "transformers", "transformers": __import__("transformers").__version__, "torch": torch.__version__,
            "device": torch.cuda.get_device_name(), "experts": experts, "kda": kda,
            "layers": model.config.num_hidden_layers}
    print("# " + json.dumps(info), flush=True)
    rows = []
    g = torch.Generator(device="cuda").manual_seed(a.seed)
    ids = lambda b, n: torch.randint(0, vocab, (b, n), device="cuda", generator=g)

    for shape in filter(None, a.prefill.split(",")):
        b, n = (int(x) for x in shape.lower().split("x"))
        x = ids(b, n)
        timed(lambda: model(input_ids=x, use_cache=False, logits_to_keep=1))  # warm-up (autotuning, allocator)
        ts = [timed(lambda: model(input_ids=x, use_cache=False, logits_to_keep=1))[0] for _ in range(a.reps)]
        t = statistics.median(ts)
        rows.append({"test": f"pp{n}", "batch": b, "tokens_per_s": b * n / t, "ms": t * 1e3,
                     "ms_min": min(ts) * 1e3, "ms_max": max(ts) * 1e3})
        print(json.dumps(rows[-1]), flush=True)
        del x
        torch.cuda.empty_cache()

    for b in (int(x) for x in filter(None, a.decode.split(","))):
        out = model(input_ids=ids(b, a.context), use_cache=True, logits_to_keep=1)
        cache, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        steps = []
        for i in range(a.steps + 2):
            t, out = timed(lambda: model(input_ids=nxt, past_key_values=cache, use_cache=True))
            cache, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
            if i >= 2:
                steps.append(t)
        t = statistics.median(steps)
        rows.append({"test": f"tg{a.steps}", "batch": b, "context": a.context, "tokens_per_s": b / t, "ms": t * 1e3,
                     "ms_min": min(steps) * 1e3, "ms_max": max(steps) * 1e3})
        print(json.dumps(rows[-1]), flush=True)
        del cache, out
        torch.cuda.empty_cache()

    info["peak_gpu_bytes"] = torch.cuda.max_memory_allocated()
    print(f"# peak GPU memory {info['peak_gpu_bytes'] / 2**30:.2f} GiB", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
