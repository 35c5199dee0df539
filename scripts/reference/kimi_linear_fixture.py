#!/usr/bin/env python3
"""kimi_linear_fixture.py: the kimi-linear-tiny model-level fixture from Hugging Face transformers.

Writes the checkpoint with `kimi random-model kimi-linear-tiny`, loads it with transformers' built-in
KimiLinearForCausalLM in fp32 with eager attention (pure-PyTorch fallbacks: no fla, no causal_conv1d), and writes
tests/fixtures/kimi-linear-tiny.safetensors (format: docs/model/reference-fixtures.md).

  hidden[0]   = output of model.embed_tokens (forward hook)
  hidden[i+1] = output of model.layers[i] (forward hook): the residual stream after layer i, before the final norm
                (output_hidden_states is not used).
Prefill is one forward of the whole prompt with use_cache=True; each decode step is a forward of ONE token with
the returned past_key_values (transformers' DynamicCache with linear-attention layers).

Usage: kimi_linear_fixture.py [--kimi build/release/kimi] [--seed 1] [--out tests/fixtures/kimi-linear-tiny.safetensors]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_common as fc  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kimi", default="build/release/kimi", help="the kimi CLI (random-model)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", help="use this existing kimi-linear-tiny checkpoint instead of generating one")
    ap.add_argument("--out", default="tests/fixtures/kimi-linear-tiny.safetensors")
    ap.add_argument("--fp64-diagnostic", action="store_true",
                    help="validation only, never for the committed fixture: run transformers in float64 by loading "
                         "with dtype=float64 and redirecting its internal fp32 casts (torch.float32 inside "
                         "modeling_kimi_linear, Tensor.float) to float64")
    ap.add_argument("--experts-implementation", default="eager",
                    help="transformers experts_implementation (eager: the per-expert loop of KimiLinearExperts.forward)")
    args = ap.parse_args()
    torch.set_num_threads(1)

    import transformers
    from transformers import AutoModelForCausalLM
    from transformers.models.kimi_linear import modeling_kimi_linear as mkl

    dtype = torch.float32
    if args.fp64_diagnostic:
        import types
        dtype = torch.float64
        proxy = types.ModuleType("torch_fp64_proxy")
        proxy.__dict__.update({k: getattr(torch, k) for k in dir(torch) if not k.startswith("__")})
        proxy.float32 = torch.float64
        mkl.torch = proxy
        torch.Tensor.float = lambda self: self.to(torch.float64)
        torch.set_default_dtype(torch.float64)

    # Record which implementation of each kernel entry point runs (fla / causal_conv1d or the torch fallback).
    calls = collections.Counter()
    impls = {}
    for fn in ("chunk_kimi_delta_attention", "recurrent_kimi_delta_attention", "causal_conv1d_fn",
               "causal_conv1d_update", "eager_attention_forward"):
        orig = getattr(mkl, fn)

        def wrapped(*a, __orig=orig, __name=fn, **kw):
            if __name == "chunk_kimi_delta_attention":
                calls[f"{__name}(T={a[0].shape[1]}, chunk_size={kw.get('chunk_size', 64)})"] += 1
            elif __name in ("recurrent_kimi_delta_attention", "causal_conv1d_fn", "causal_conv1d_update"):
                calls[f"{__name}(T={a[0].shape[1] if 'kimi' in __name else a[0].shape[-1]})"] += 1
            else:
                calls[__name] += 1
            return __orig(*a, **kw)

        impls[fn] = f"{getattr(orig, '__module__', '?')}.{getattr(orig, '__qualname__', fn)}"
        setattr(mkl, fn, wrapped)

    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            ckpt, gen_cmd = args.model, None
        else:
            ckpt = os.path.join(tmp, "kimi-linear-tiny")
            gen_cmd = fc.run_random_model(args.kimi, "kimi-linear-tiny", ckpt, args.seed, "bf16")
        model, info = AutoModelForCausalLM.from_pretrained(ckpt, dtype=dtype, attn_implementation="eager",
                                                           experts_implementation=args.experts_implementation,
                                                           output_loading_info=True)
        model.eval()
        assert type(model).__name__ == "KimiLinearForCausalLM", type(model)
        assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
        assert all(p.dtype == dtype for p in model.parameters())
        assert all(b.dtype == dtype for b in model.buffers() if b.is_floating_point())
        print(f"loaded {type(model).__name__}: attn_implementation={model.config._attn_implementation} "
              f"experts_implementation={model.config._experts_implementation}")
        vocab = model.config.vocab_size

        captured = {}

        def hook(idx):
            def f(_mod, _inp, out):
                captured[idx] = (out[0] if isinstance(out, tuple) else out).detach()
            return f

        inner = model.model
        inner.embed_tokens.register_forward_hook(hook(0))
        for i, layer in enumerate(inner.layers):
            layer.register_forward_hook(hook(i + 1))
        nl = len(inner.layers)

        router_gap = [float("inf")]  # smallest K-th minus (K+1)-th biased router score over every routing decision

        def router_hook(mod, _inp, out):
            biased = out[0].sigmoid() + mod.e_score_correction_bias
            top = torch.topk(biased, mod.top_k + 1, dim=-1).values
            router_gap[0] = min(router_gap[0], float((top[:, -2] - top[:, -1]).min()))

        for layer in inner.layers:
            if type(layer.mlp).__name__ == "KimiLinearMoE":
                layer.mlp.gate.register_forward_hook(router_hook)

        cache_info = set()

        def prefill(prompt):
            captured.clear()
            with torch.no_grad():
                out = model(input_ids=torch.tensor([prompt]), use_cache=True)
            pkv = out.past_key_values
            cache_info.add(type(pkv).__module__ + "." + type(pkv).__name__ + " layers: " +
                           ", ".join(sorted({type(l).__name__ for l in pkv.layers})))
            hidden = torch.stack([captured[j][0] for j in range(nl + 1)]).numpy()
            return out.logits[0].numpy(), hidden, pkv

        def decode(tok, pkv):
            with torch.no_grad():
                out = model(input_ids=torch.tensor([[tok]]), past_key_values=pkv, use_cache=True)
            return out.logits[0, -1].numpy(), out.past_key_values

        tensors, margins = {}, []
        prompts = fc.make_prompts(vocab)
        for p, prompt in enumerate(prompts):
            arrs, m = fc.greedy_protocol(prefill, decode, prompt)
            for k, v in arrs.items():
                tensors[f"p{p}.{k}"] = v
            margins.append(m)
            print(f"p{p}: T={len(prompt)} tokens={arrs['tokens'].tolist()} min greedy gap "
                  f"{min(g for g, _ in m):.4g} (min gap/std {min(r for _, r in m):.4g})")

        print(f"smallest router gap (K-th minus (K+1)-th biased score, any token, any MoE layer): {router_gap[0]:.4g}")
        # The last-entry question: is output_hidden_states[-1] pre- or post-norm? (documented, not used)
        with torch.no_grad():
            o = model(input_ids=torch.tensor([prompts[0]]), output_hidden_states=True)
        hs = o.hidden_states
        last_is_post_norm = bool(torch.allclose(hs[-1][0], inner.norm(torch.tensor(tensors["p0.hidden"][-1])), atol=1e-6))
        print(f"output_hidden_states: {len(hs)} entries, last is post-norm: {last_is_post_norm}")

        paths = {"attn_implementation": model.config._attn_implementation,
                 "experts_implementation": model.config._experts_implementation, "implementations": impls,
                 "calls": dict(sorted(calls.items())), "caches": sorted(cache_info),
                 "fla_installed": _importable("fla"), "causal_conv1d_installed": _importable("causal_conv1d"),
                 "output_hidden_states_last_is_post_norm": last_is_post_norm}
        print(json.dumps(paths, indent=1))
        cmdline = "scripts/reference/kimi_linear_fixture.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        meta = {
            "config": "kimi-linear-tiny",
            "seed": str(args.seed),
            "experts": "bf16",
            "generator": cmdline + ("" if gen_cmd is None else "  [checkpoint: " + fc.describe_random_model(gen_cmd) + "]"),
            "reference": f"transformers {transformers.__version__} KimiLinearForCausalLM "
                         f"{'fp64 (diagnostic)' if args.fp64_diagnostic else 'fp32'} eager "
                         f"(pure-PyTorch chunk_kda chunk 64 / fused_recurrent_kda / causal_conv1d fallbacks); "
                         f"torch {torch.__version__}",
            "num_prompts": str(len(prompts)),
            "decode_steps": str(fc.DECODE_STEPS),
            "min_greedy_gap": repr(min(g for m in margins for g, _ in m)),
            "min_router_gap": repr(router_gap[0]),
            "transformers_code_paths": json.dumps(paths),
            "checksums": json.dumps(fc.checkpoint_checksums(ckpt)),
        }
        fc.write_fixture(args.out, tensors, meta)
        print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


def _importable(name: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(name) is not None


if __name__ == "__main__":
    main()
