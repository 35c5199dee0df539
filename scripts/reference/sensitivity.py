#!/usr/bin/env python3
"""sensitivity.py: how much a model-level fixture pins each detail (docs/model/reference-fixtures.md, section 6).

Runs k3_reference.py on one prompt with one detail changed at a time and prints the max relative logit change
(max|d| / max|base|). A change far above the C++ tolerance (1e-4) means the fixture catches that mistake; a change
below it means only a per-op test can.
  sensitivity.py --model DIR [--prompt 2]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_common as fc  # noqa: E402
import k3_reference as R  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    m = R.Model(args.model)
    cfg = m.cfg
    prompt = fc.make_prompts(cfg.vocab_size)[args.prompt]
    base = m.forward(prompt, m.new_cache())[0].numpy()

    def weights_named(suffix):
        return {id(t) for n, t in m.W.t.items() if n.endswith(suffix)}

    def with_norm_eps(suffixes, eps):
        ids = set().union(*(weights_named(s) for s in suffixes))
        orig = R.rms_norm
        return (lambda: setattr(R, "rms_norm", lambda x, w, e: orig(x, w, eps if id(w) in ids else e)),
                lambda: setattr(R, "rms_norm", orig))

    def set_attr(obj, name, value):
        old = getattr(obj, name)
        return lambda: setattr(obj, name, value), lambda: setattr(obj, name, old)

    def patch_fn(name, make):
        orig = getattr(R, name)
        return lambda: setattr(R, name, make(orig)), lambda: setattr(R, name, orig)

    cases = {
        "mla eps 1e-5 (q_a/kv_a_layernorm)": set_attr(cfg, "mla_eps", 1e-5),
        "o_norm eps 1e-6": with_norm_eps(["o_norm.weight"], 1e-6),
        "mxfp4 nibbles swapped": patch_fn("dequant_mxfp4", lambda f: lambda p, s: f(((p & 0x0F) << 4) | (p >> 4), s)),
        "moe_renormalize off": set_attr(cfg, "renorm", not cfg.renorm),
        "routed_scaling_factor x2": set_attr(cfg, "scaling", 2 * cfg.scaling),
    }
    if cfg.latent is not None and cfg.latent_norm:
        cases["routed_expert_norm eps 1e-6"] = with_norm_eps(["routed_expert_norm.weight"], 1e-6)
    if cfg.block is not None:
        cases["attn_res eps 1e-6"] = patch_fn("attn_res", lambda f: lambda p, b, pw, nw, e: f(p, b, pw, nw, 1e-6))
        cases["attn_res without norm_w"] = patch_fn(
            "attn_res", lambda f: lambda p, b, pw, nw, e: f(p, b, pw, torch.ones_like(nw), e))
    if cfg.act == "situ":
        cases["situ without the linear-beta tanh"] = set_attr(cfg, "situ_lbeta", None)
    for name, (apply, undo) in cases.items():
        apply()
        try:
            out = m.forward(prompt, m.new_cache())[0].numpy()
        finally:
            undo()
        print(f"{name:38s} max rel logit change {R.rel_errors(out, base)[0]:.3g}")


if __name__ == "__main__":
    main()
