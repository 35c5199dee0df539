"""pytest for the model-level references (CPU, ~1 minute): run from the repository root with
    KIMI_BIN=build/release/kimi python -m pytest -q scripts/reference/test_reference.py
The checkpoint-based tests are skipped when the kimi CLI is not found."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_common as fc  # noqa: E402
import k3_reference as R  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KIMI = os.environ.get("KIMI_BIN", os.path.join(ROOT, "build", "release", "kimi"))
needs_kimi = pytest.mark.skipif(not (os.path.exists(KIMI) or shutil.which(KIMI)), reason="kimi CLI not built")


def test_chunk_form_matches_recurrence():
    assert R.check_chunk_form() < 1e-12


def test_mxfp4_dequant():
    import torch
    # byte 0x9A: low nibble 0xA = -1.0 (even column), high nibble 0x9 = -0.5 (odd column); scale 128 -> x2
    packed = torch.tensor([[0x9A] + [0x07] * 15], dtype=torch.uint8)   # 0x07: low 6.0, high 0.0
    scale = torch.tensor([[128]], dtype=torch.uint8)
    w = R.dequant_mxfp4(packed, scale)
    assert w.shape == (1, 32)
    assert w[0, :4].tolist() == [-2.0, -1.0, 12.0, 0.0]


@needs_kimi
@pytest.mark.parametrize("config,seed", [("kimi-linear-tiny", 1), ("k3-tiny", 18)])
def test_fixture_reproduces(config, seed):
    """The committed fixture's checksums match a regenerated checkpoint, and the reference reproduces its tensors."""
    fx = os.path.join(ROOT, "tests", "fixtures", f"{config}.safetensors")
    ref, meta = fc.read_fixture(fx)
    assert meta["config"] == config and int(meta["seed"]) == seed
    with tempfile.TemporaryDirectory() as tmp:
        ck = os.path.join(tmp, config)
        subprocess.run([KIMI, "random-model", config, "--out", ck, "--seed", str(seed)], check=True,
                       stdout=subprocess.DEVNULL)
        assert fc.checkpoint_checksums(ck) == json.loads(meta["checksums"])
        model = R.Model(ck)
        assert R.self_check(model, fc.make_prompts(model.cfg.vocab_size)[2]) < 1e-12
        assert R.check_absorbed_mla(model, fc.make_prompts(model.cfg.vocab_size)[0]) < 1e-12
        for p, prompt in enumerate(fc.make_prompts(model.cfg.vocab_size)):
            assert ref[f"p{p}.prompt"].tolist() == prompt
            logits, hidden = model.forward(prompt, model.new_cache())
            tol = 1e-6 if config == "k3-tiny" else 5e-5  # fp64 vs its own f32 rounding / vs transformers fp32
            assert R.rel_errors(logits.numpy(), ref[f"p{p}.prefill_logits"])[0] < tol
            assert R.rel_errors(hidden.numpy(), ref[f"p{p}.hidden"])[0] < tol
            cache = model.new_cache()
            model.forward(prompt, cache)
            for g, t in enumerate(ref[f"p{p}.tokens"].tolist()):
                row, _ = model.forward([t], cache)
                assert R.rel_errors(row[0].numpy(), ref[f"p{p}.decode_logits"][g])[0] < tol
                if g + 1 < len(ref[f"p{p}.tokens"]):
                    assert int(np.argmax(row[0].numpy())) == ref[f"p{p}.tokens"][g + 1]
