#!/usr/bin/env python3
"""k3_reference.py: the project's own whole-model reference of Kimi K3 and Kimi-Linear, in float64.

Written from /work/shared/SPEC.md alone (not from the C++ source, not from transformers). Simple on purpose:
  - KDA (SPEC 5): three causal short convs + SiLU, L2-normalized q/k, bounded (K3) or softplus (48B) decay gate,
    the naive token-by-token delta-rule recurrence, per-head gated RMSNorm with a full-rank (K3) or low-rank (48B)
    output gate.
  - Gated MLA (SPEC 6): q_lora or plain q_proj, NoPE (rope dims used unrotated), explicit softmax attention over
    the layer's own latent cache [RMSNorm(c) | k_pe] (the non-absorbed form: kv_b_proj is re-applied to the cache),
    optional sigmoid output gate.
  - MoE (SPEC 7): sigmoid router with correction bias for the choice and the unbiased scores as weights,
    renormalization, routed scaling, optional latent down/norm/up, shared experts; SiLU-GLU or SiTU-GLU; MXFP4
    routed experts dequantized per SPEC 10.
  - Block Attention Residuals (SPEC 8) or plain pre-norm residuals.
One code path serves prefill (T tokens) and decode (T = 1): each call appends to the caches (per KDA layer: the
recurrent state S [H, dk, dv] and the last W-1 pre-conv inputs of each of the q, k and v convs; per MLA layer:
the latent cache [N, kv_lora + qk_rope]).

Usage (from the repository root; see tests/fixtures/README.md):
  k3_reference.py --config k3-tiny --seed 18 --self-check --out tests/fixtures/k3-tiny.safetensors  # the K3 fixture
  k3_reference.py --config kimi-linear-tiny --seed 1 --compare tests/fixtures/kimi-linear-tiny.safetensors
  k3_reference.py --model DIR --self-check        # prefill/decode consistency, chunk form, absorbed MLA
  k3_reference.py --model DIR --dtype float32 --compare FIXTURE   # rounding-sensitivity diagnostic
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile

import numpy as np
import torch
from safetensors import safe_open

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_common as fc  # noqa: E402

DT = torch.float64  # --dtype float32 switches it (a diagnostic: the fixtures are always fp64)
STATS: dict = {}   # diagnostics gathered during forward (smallest router top-K vs top-(K+1) gap)


# ----------------------------------------------------------------------------------------------- config (SPEC 1, 13)
class Config:
    def __init__(self, path: str):
        with open(path) as f:
            raw = json.load(f)
        self.k3_layout = "text_config" in raw  # K3 wraps the text model; tensors under language_model.
        c = raw["text_config"] if self.k3_layout else raw
        self.raw = c
        self.vocab_size = c["vocab_size"]
        self.hidden_size = c["hidden_size"]
        self.num_layers = c["num_hidden_layers"]
        self.eps = float(c.get("rms_norm_eps", 1e-5))
        self.tie = bool(c.get("tie_word_embeddings", False))
        la = c["linear_attn_config"]
        self.kda_heads = la["num_heads"]
        self.kda_dim = la["head_dim"]
        self.conv_w = la.get("short_conv_kernel_size", 4)
        self.full_rank_gate = bool(la.get("use_full_rank_gate", False))
        self.gate_lower_bound = la.get("gate_lower_bound")  # None: softplus gate
        kda = [i - 1 for i in la["kda_layers"]]  # 1-based in the JSON
        mla = [i - 1 for i in la["full_attn_layers"]]
        assert sorted(kda + mla) == list(range(self.num_layers)), "kda_layers + full_attn_layers must cover every layer once"
        self.is_kda = [i in kda for i in range(self.num_layers)]
        self.mla_heads = c["num_attention_heads"]
        self.q_lora = c.get("q_lora_rank")
        self.kv_lora = c["kv_lora_rank"]
        self.nope = c["qk_nope_head_dim"]
        self.rope = c["qk_rope_head_dim"]
        self.v_dim = c["v_head_dim"]
        self.mla_gate = bool(c.get("mla_use_output_gate", False))
        self.mla_eps = 1e-6  # SPEC 3: q_a_layernorm / kv_a_layernorm eps (overridable with --mla-eps)
        self.act = c.get("hidden_act", "silu")
        assert self.act in ("silu", "situ"), f"hidden_act {self.act!r}"
        self.situ_beta = float(c.get("activation_situ_beta", 4.0))
        self.situ_lbeta = c.get("activation_situ_linear_beta")  # None: identity on up
        self.intermediate = c["intermediate_size"]
        self.first_dense = c.get("first_k_dense_replace", 0)
        self.moe_freq = c.get("moe_layer_freq", 1)
        self.num_experts = c.get("num_experts", 0) or 0
        self.top_k = c.get("num_experts_per_token", 0)
        self.num_shared = c.get("num_shared_experts", 0) or 0
        self.moe_inter = c.get("moe_intermediate_size", 0)
        self.latent = c.get("routed_expert_hidden_size")  # None: experts run on x itself
        self.latent_norm = bool(c.get("latent_moe_use_norm", False))
        self.renorm = bool(c.get("moe_renormalize", True))
        self.scaling = float(c.get("routed_scaling_factor", 1.0))
        assert c.get("moe_router_activation_func", "sigmoid") == "sigmoid"
        assert (c.get("num_expert_group") or 1) == 1 and (c.get("topk_group") or 1) == 1, "group-limited routing not in SPEC"
        self.block = c.get("attn_res_block_size")  # None: plain pre-norm residuals

    def is_moe(self, i: int) -> bool:  # SPEC 1
        return self.num_experts > 0 and i >= self.first_dense and i % self.moe_freq == 0

    def switches(self) -> dict:
        return {
            "attn_res_block_size": self.block, "routed_expert_hidden_size": self.latent,
            "latent_moe_use_norm": self.latent_norm, "hidden_act": self.act,
            "mla_use_output_gate": self.mla_gate, "use_full_rank_gate": self.full_rank_gate,
            "gate_lower_bound": self.gate_lower_bound, "q_lora_rank": self.q_lora,
        }


# ------------------------------------------------------------------------------------------------ weights (SPEC 10, 11)
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=DT)


def dequant_mxfp4(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """weight_packed u8 [out, in/2] (low nibble = even column), weight_scale u8 E8M0 [out, in/32] -> fp64 [out, in]."""
    out, half = packed.shape
    codes = torch.empty(out, 2 * half, dtype=torch.long)
    codes[:, 0::2] = (packed & 0x0F).long()
    codes[:, 1::2] = (packed >> 4).long()
    mag = E2M1[codes & 7]
    val = torch.where((codes & 8) != 0, -mag, mag)
    assert not bool((scale == 255).any()), "E8M0 scale 255 is NaN"
    s = torch.pow(torch.tensor(2.0, dtype=DT), scale.to(DT) - 127.0)
    assert scale.shape[1] * 32 == 2 * half
    return (val * s.repeat_interleave(32, dim=1)).to(DT)


class Weights:
    def __init__(self, ckpt_dir: str, cfg: Config):
        self.t = {}
        for path in fc.checkpoint_files(ckpt_dir):
            with safe_open(path, framework="pt") as f:
                for k in f.keys():
                    x = f.get_tensor(k)
                    self.t[k] = x if x.dtype == torch.uint8 else x.to(DT)  # bf16 / f32 -> fp64 exactly
        self.pre = "language_model.model." if cfg.k3_layout else "model."
        self.lm_head_name = "language_model.lm_head.weight" if cfg.k3_layout else "lm_head.weight"
        self.used = set()

    def __call__(self, name: str) -> torch.Tensor:
        full = self.pre + name
        self.used.add(full)
        return self.t[full]

    def has(self, name: str) -> bool:
        return (self.pre + name) in self.t

    def lm_head(self) -> torch.Tensor:
        if self.lm_head_name in self.t:
            self.used.add(self.lm_head_name)
            return self.t[self.lm_head_name]
        return self("embed_tokens.weight")  # tie_word_embeddings

    def expert(self, prefix: str) -> torch.Tensor:
        """A routed expert matrix, bf16 (`.weight`) or MXFP4 (`.weight_packed` + `.weight_scale`)."""
        if self.has(prefix + ".weight"):
            return self(prefix + ".weight")
        return dequant_mxfp4(self(prefix + ".weight_packed"), self(prefix + ".weight_scale"))


# ------------------------------------------------------------------------------------------------------ ops (SPEC 3-7)
def linear(x, w):  # weights are [out, in]; no biases anywhere
    return x @ w.T


def rms_norm(x, w, eps):  # SPEC 3 (in fp64 the cast to the input dtype is a no-op)
    y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w


def l2norm(x):  # SPEC 3: sum, not mean
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def silu(x):
    return x * torch.sigmoid(x)


def glu(cfg: Config, gate, up):  # SPEC 7
    if cfg.act == "silu":
        return silu(gate) * up
    b = cfg.situ_beta
    h = b * torch.tanh(gate / b) * torch.sigmoid(gate)
    if cfg.situ_lbeta is not None and cfg.situ_lbeta > 0:
        lb = float(cfg.situ_lbeta)
        up = lb * torch.tanh(up / lb)
    return h * up


def mlp(cfg, x, wg, wu, wd):
    return linear(glu(cfg, linear(x, wg), linear(x, wu)), wd)


def short_conv(x, w, cache):
    """SPEC 4. x [T, P] pre-conv inputs, w [P, 1, W] or [P, W], cache [W-1, P] (the previous W-1 inputs, zeros at
    the sequence start). Returns SiLU(conv) [T, P] and the new cache (the last W-1 inputs)."""
    w = w.reshape(w.shape[0], -1)
    W = w.shape[1]
    xc = torch.cat([cache, x], 0)  # row r is token r - (W-1)
    T = x.shape[0]
    u = torch.zeros_like(x)
    for j in range(W):  # w[:, W-1] multiplies the current token
        u = u + w[:, j] * xc[j:j + T]
    return silu(u), xc[-(W - 1):].clone()


class KDAState:
    def __init__(self, cfg: Config):
        H, K, W = cfg.kda_heads, cfg.kda_dim, cfg.conv_w
        P = H * K
        self.conv = {p: torch.zeros(W - 1, P, dtype=DT) for p in "qkv"}
        self.S = torch.zeros(H, K, K, dtype=DT)  # [H, dk, dv] (FLA layout)


def kda_layer(cfg: Config, W: Weights, i: int, x, st: KDAState):
    """SPEC 5 with the naive recurrence. x [T, d] is the normed layer input."""
    a = f"layers.{i}.self_attn."
    H, K = cfg.kda_heads, cfg.kda_dim
    T = x.shape[0]
    q, st.conv["q"] = short_conv(linear(x, W(a + "q_proj.weight")), W(a + "q_conv1d.weight"), st.conv["q"])
    k, st.conv["k"] = short_conv(linear(x, W(a + "k_proj.weight")), W(a + "k_conv1d.weight"), st.conv["k"])
    v, st.conv["v"] = short_conv(linear(x, W(a + "v_proj.weight")), W(a + "v_conv1d.weight"), st.conv["v"])
    q = l2norm(q.view(T, H, K)) * K ** -0.5
    k = l2norm(k.view(T, H, K))
    v = v.view(T, H, K)

    A_log = W(a + "A_log").flatten()
    assert bool((A_log[H:] == 0).all()), f"layer {i}: A_log tail beyond {H} heads is not zero"
    A = torch.exp(A_log[:H]).view(1, H, 1)
    f = linear(linear(x, W(a + "f_a_proj.weight")), W(a + "f_b_proj.weight")).view(T, H, K)  # no activation between
    z_in = f + W(a + "dt_bias").view(1, H, K)
    if cfg.gate_lower_bound is not None:
        g = float(cfg.gate_lower_bound) * torch.sigmoid(A * z_in)        # bounded (K3): g in (lb, 0)
    else:
        g = -A * torch.nn.functional.softplus(z_in)                      # softplus (48B): g in (-inf, 0)
    alpha = torch.exp(g)
    beta = torch.sigmoid(linear(x, W(a + "b_proj.weight")))             # [T, H]

    o = torch.empty(T, H, K, dtype=DT)
    S = st.S
    for t in range(T):
        S = alpha[t].unsqueeze(-1) * S                                   # decay first
        e = v[t] - torch.einsum("hkv,hk->hv", S, k[t])                   # prediction from the decayed state
        S = S + beta[t].view(H, 1, 1) * k[t].unsqueeze(-1) * e.unsqueeze(1)
        o[t] = torch.einsum("hkv,hk->hv", S, q[t])                       # read-out from the updated state
    st.S = S

    if cfg.full_rank_gate:
        z = linear(x, W(a + "g_proj.weight"))
    else:
        z = linear(linear(x, W(a + "g_a_proj.weight")), W(a + "g_b_proj.weight"))
    y = rms_norm(o, W(a + "o_norm.weight"), cfg.eps) * torch.sigmoid(z.view(T, H, K))
    return linear(y.reshape(T, H * K), W(a + "o_proj.weight"))


class MLAState:
    def __init__(self, cfg: Config):
        self.latent = torch.zeros(0, cfg.kv_lora + cfg.rope, dtype=DT)  # [N, RMSNorm(c) | k_pe]


def mla_layer(cfg: Config, W: Weights, i: int, x, st: MLAState):
    """SPEC 6: explicit attention over the layer's own latent cache."""
    a = f"layers.{i}.self_attn."
    H, dn, dr, dv, R = cfg.mla_heads, cfg.nope, cfg.rope, cfg.v_dim, cfg.kv_lora
    T = x.shape[0]
    if cfg.q_lora is not None:
        q = linear(rms_norm(linear(x, W(a + "q_a_proj.weight")), W(a + "q_a_layernorm.weight"), cfg.mla_eps),
                   W(a + "q_b_proj.weight"))
    else:
        q = linear(x, W(a + "q_proj.weight"))
    q = q.view(T, H, dn + dr)
    ckv = linear(x, W(a + "kv_a_proj_with_mqa.weight"))
    c, k_pe = ckv[:, :R], ckv[:, R:]
    n_prev = st.latent.shape[0]
    st.latent = torch.cat([st.latent, torch.cat([rms_norm(c, W(a + "kv_a_layernorm.weight"), cfg.mla_eps), k_pe], 1)], 0)
    N = st.latent.shape[0]
    kv = linear(st.latent[:, :R], W(a + "kv_b_proj.weight")).view(N, H, dn + dv)
    k_nope, v = kv[..., :dn], kv[..., dn:]
    k = torch.cat([k_nope, st.latent[:, R:].unsqueeze(1).expand(N, H, dr)], -1)  # k_pe shared by heads, unrotated
    s = torch.einsum("thd,nhd->htn", q, k) * (dn + dr) ** -0.5
    qpos = n_prev + torch.arange(T).view(T, 1)
    s = s.masked_fill(torch.arange(N).view(1, N) > qpos, float("-inf"))  # causal
    p = torch.softmax(s, -1)
    o = torch.einsum("htn,nhd->thd", p, v).reshape(T, H * dv)
    if cfg.mla_gate:
        o = o * torch.sigmoid(linear(x, W(a + "g_proj.weight")))
    return linear(o, W(a + "o_proj.weight"))


def moe(cfg: Config, W: Weights, i: int, x):
    """SPEC 7 (latent MoE when routed_expert_hidden_size is set). x [T, d] is the normed FFN input."""
    m = f"layers.{i}.block_sparse_moe."
    s = torch.sigmoid(linear(x, W(m + "gate.weight")))                   # [T, E]
    biased = s + W(m + "gate.e_score_correction_bias")
    sel = torch.topk(biased, cfg.top_k, dim=-1).indices                  # the choice uses the biased scores
    top = torch.topk(biased, min(cfg.top_k + 1, cfg.num_experts), dim=-1).values
    if top.shape[1] > cfg.top_k:                                         # diagnostics: K-th minus (K+1)-th score
        STATS["min_router_gap"] = min(STATS.get("min_router_gap", float("inf")), float((top[:, -2] - top[:, -1]).min()))
    w = torch.gather(s, 1, sel)                                          # the weights are the unbiased scores
    if cfg.renorm:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    w = w * cfg.scaling
    z = linear(x, W(m + "routed_expert_down_proj.weight")) if cfg.latent is not None else x
    y = torch.zeros_like(z)
    for e in range(cfg.num_experts):
        tok, slot = torch.nonzero(sel == e, as_tuple=True)
        if tok.numel() == 0:
            continue
        X = f"{m}experts.{e}."
        h = mlp(cfg, z[tok], W.expert(X + "w1"), W.expert(X + "w3"), W.expert(X + "w2"))
        y.index_add_(0, tok, w[tok, slot].unsqueeze(-1) * h)
    if cfg.latent is not None:
        if cfg.latent_norm:
            y = rms_norm(y, W(m + "routed_expert_norm.weight"), cfg.eps)
        y = linear(y, W(m + "routed_expert_up_proj.weight"))
    if cfg.num_shared > 0:
        sh = m + "shared_experts."
        y = y + mlp(cfg, x, W(sh + "gate_proj.weight"), W(sh + "up_proj.weight"), W(sh + "down_proj.weight"))
    return y


def ffn(cfg, W, i, x):
    if cfg.is_moe(i):
        return moe(cfg, W, i, x)
    p = f"layers.{i}.mlp."
    return mlp(cfg, x, W(p + "gate_proj.weight"), W(p + "up_proj.weight"), W(p + "down_proj.weight"))


def attn_res(partial, blocks, proj_w, norm_w, eps):
    """SPEC 8. partial [T, d], blocks list of [T, d]; proj_w [1, d] or [d]."""
    V = torch.stack(blocks + [partial], 1)                               # [T, n+1, d] candidates
    Kn = rms_norm(V, None, eps)                                          # RMSNorm without its weight
    s = (Kn * (norm_w * proj_w.flatten())).sum(-1)                       # [T, n+1], no 1/sqrt(d)
    p = torch.softmax(s, -1)
    return torch.einsum("tn,tnd->td", p, V)                              # mixes the raw candidates


# --------------------------------------------------------------------------------------------------- model (SPEC 8)
class Model:
    def __init__(self, ckpt_dir: str, mla_eps: float = 1e-6):
        self.cfg = Config(os.path.join(ckpt_dir, "config.json"))
        self.cfg.mla_eps = mla_eps
        self.W = Weights(ckpt_dir, self.cfg)

    def new_cache(self):
        return [KDAState(self.cfg) if self.cfg.is_kda[i] else MLAState(self.cfg) for i in range(self.cfg.num_layers)]

    def forward(self, tokens, cache):
        """tokens: list of ids (T >= 1) appended after whatever the cache holds.
        Returns logits [T, vocab] and hidden [L+1, T, d]: hidden[0] = the embedding output, hidden[i+1] = the
        `partial` accumulator at the end of layer i (== the residual stream for plain pre-norm models)."""
        cfg, W = self.cfg, self.W
        h = W("embed_tokens.weight")[torch.tensor(tokens, dtype=torch.long)]
        hidden = [h]
        blocks = []
        partial = h
        for i in range(cfg.num_layers):
            L = f"layers.{i}."
            mixer = kda_layer if cfg.is_kda[i] else mla_layer
            if cfg.block is None:                                        # plain pre-norm
                partial = partial + mixer(cfg, W, i, rms_norm(partial, W(L + "input_layernorm.weight"), cfg.eps), cache[i])
                partial = partial + ffn(cfg, W, i, rms_norm(partial, W(L + "post_attention_layernorm.weight"), cfg.eps))
            else:                                                        # Block Attention Residuals
                hh = (attn_res(partial, blocks, W(L + "self_attention_res_proj.weight"),
                               W(L + "self_attention_res_norm.weight"), cfg.eps) if blocks else partial)
                if i % cfg.block == 0:
                    blocks.append(partial)                               # layer 0 seals the embedding
                    partial = None
                a = mixer(cfg, W, i, rms_norm(hh, W(L + "input_layernorm.weight"), cfg.eps), cache[i])
                partial = a if partial is None else partial + a
                hh = attn_res(partial, blocks, W(L + "mlp_res_proj.weight"), W(L + "mlp_res_norm.weight"), cfg.eps)
                partial = partial + ffn(cfg, W, i, rms_norm(hh, W(L + "post_attention_layernorm.weight"), cfg.eps))
            hidden.append(partial)
        if cfg.block is not None:
            h = attn_res(partial, blocks, W("output_attn_res_proj.weight"), W("output_attn_res_norm.weight"), cfg.eps)
        else:
            h = partial
        logits = linear(rms_norm(h, W("norm.weight"), cfg.eps), W.lm_head())
        return logits, torch.stack(hidden)


# ---------------------------------------------------------------------------------------------------------- driver
def rel_errors(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(max|a-b| / max|b|, ||a-b|| / ||b||) with b the reference."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max()), float(np.linalg.norm(a - b) / np.linalg.norm(b))


def self_check(model: Model, prompt: list[int]) -> float:
    """prefill(T) == prefill(T-n) + n single-token decode steps (caches written by prefill)."""
    full, _ = model.forward(prompt, model.new_cache())
    n = min(5, len(prompt) - 1)
    cache = model.new_cache()
    part, _ = model.forward(prompt[:len(prompt) - n], cache)
    rows = [part]
    for t in prompt[len(prompt) - n:]:
        r, _ = model.forward([t], cache)
        rows.append(r)
    return rel_errors(torch.cat(rows).numpy(), full.numpy())[0]


def kda_recurrent(q, k, v, g, beta, S):
    """The naive recurrence of SPEC 5 on prepared inputs: q (scaled), k [T, H, K], v [T, H, V], g [T, H, K] (log
    space), beta [T, H], S [H, K, V]. The same loop as kda_layer, exposed for the chunk-form check."""
    o = torch.empty(v.shape, dtype=DT)
    for t in range(q.shape[0]):
        S = torch.exp(g[t]).unsqueeze(-1) * S
        e = v[t] - torch.einsum("hkv,hk->hv", S, k[t])
        S = S + beta[t].view(-1, 1, 1) * k[t].unsqueeze(-1) * e.unsqueeze(1)
        o[t] = torch.einsum("hkv,hk->hv", S, q[t])
    return o, S


def kda_chunked(q, k, v, g, beta, S, C):
    """SPEC 5.1 chunkwise form, written from its formulas (per head, per chunk of C tokens)."""
    T, H, K = q.shape
    o = torch.empty(v.shape, dtype=DT)
    S = S.clone()
    for c0 in range(0, T, C):
        c1 = min(c0 + C, T)
        n = c1 - c0
        for h in range(H):
            Q, Kc, V, b = q[c0:c1, h], k[c0:c1, h], v[c0:c1, h], beta[c0:c1, h]
            G = torch.cumsum(g[c0:c1, h], 0)                              # [n, K]
            D = torch.exp(G.unsqueeze(1) - G.unsqueeze(0))                # [i, j, K] = exp(G_i - G_j)
            Akk = b.view(n, 1) * torch.einsum("id,jd,ijd->ij", Kc, Kc, D)
            Akk = torch.tril(Akk, -1)                                     # strictly lower
            Aqk = torch.tril(torch.einsum("id,jd,ijd->ij", Q, Kc, D))     # lower incl. diagonal
            Tm = torch.linalg.inv(torch.eye(n, dtype=DT) + Akk)
            U = Tm @ (b.view(n, 1) * (V - (Kc * torch.exp(G)) @ S[h]))
            o[c0:c1, h] = (Q * torch.exp(G)) @ S[h] + Aqk @ U
            S[h] = torch.exp(G[-1]).view(K, 1) * S[h] + (Kc * torch.exp(G[-1] - G)).T @ U
    return o, S


def check_chunk_form() -> float:
    """Naive recurrence vs the SPEC 5.1 chunk form on random inputs (bounded and softplus gates, T not a multiple of
    the chunk, nonzero initial state). Returns the worst relative error."""
    gen = torch.Generator().manual_seed(0)
    worst = 0.0
    for gate in ("bounded", "softplus"):
        for T, C in ((70, 64), (37, 16)):
            H, K = 2, 16
            r = lambda *sh: torch.randn(*sh, generator=gen, dtype=DT)  # noqa: E731
            q = l2norm(r(T, H, K)) * K ** -0.5
            k = l2norm(r(T, H, K))
            v = r(T, H, K)
            pre = r(T, H, K) * 3
            g = -5 * torch.sigmoid(pre) if gate == "bounded" else -torch.nn.functional.softplus(pre) * 0.5
            beta = torch.sigmoid(r(T, H))
            S0 = r(H, K, K) * 0.1
            o1, s1 = kda_recurrent(q, k, v, g, beta, S0)
            o2, s2 = kda_chunked(q, k, v, g, beta, S0, C)
            worst = max(worst, rel_errors(o2.numpy(), o1.numpy())[0], rel_errors(s2.numpy(), s1.numpy())[0])
    return worst


def check_absorbed_mla(model: "Model", prompt: list[int]) -> float:
    """SPEC 6 absorbed decode (scores over kv_lora + rope dims, W_kvb folded into q and the output) vs the explicit
    form, on the first MLA layer with the prompt's normed embeddings as input. Returns the relative error."""
    cfg, W = model.cfg, model.W
    i = cfg.is_kda.index(False)
    a = f"layers.{i}.self_attn."
    x = rms_norm(W("embed_tokens.weight")[torch.tensor(prompt)], W(f"layers.{i}.input_layernorm.weight"), cfg.eps)
    st = MLAState(cfg)
    ref = mla_layer(cfg, W, i, x, st)[-1]                                # explicit, last position
    H, dn, dr, dv, R = cfg.mla_heads, cfg.nope, cfg.rope, cfg.v_dim, cfg.kv_lora
    xl = x[-1:]
    if cfg.q_lora is not None:
        q = linear(rms_norm(linear(xl, W(a + "q_a_proj.weight")), W(a + "q_a_layernorm.weight"), cfg.mla_eps),
                   W(a + "q_b_proj.weight"))
    else:
        q = linear(xl, W(a + "q_proj.weight"))
    q = q.view(H, dn + dr)
    wkv = W(a + "kv_b_proj.weight").view(H, dn + dv, R)
    q_lat = torch.einsum("hn,hnr->hr", q[:, :dn], wkv[:, :dn])           # fold W_kvb's key part into q
    s = (torch.einsum("hr,tr->ht", q_lat, st.latent[:, :R]) + q[:, dn:] @ st.latent[:, R:].T) * (dn + dr) ** -0.5
    p = torch.softmax(s, -1)
    o = torch.einsum("ht,tr,hvr->hv", p, st.latent[:, :R], wkv[:, dn:]).reshape(1, H * dv)  # value part after
    if cfg.mla_gate:
        o = o * torch.sigmoid(linear(xl, W(a + "g_proj.weight")))
    out = linear(o, W(a + "o_proj.weight"))[0]
    return rel_errors(out.numpy(), ref.numpy())[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="existing checkpoint directory (instead of --config)")
    ap.add_argument("--config", help="named config for `kimi random-model` (k3-tiny, kimi-linear-tiny)")
    ap.add_argument("--kimi", default="build/release/kimi", help="the kimi CLI (random-model)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--experts", default="auto", help="auto|mxfp4|bf16 (random-model --experts)")
    ap.add_argument("--mla-eps", type=float, default=1e-6, help="eps of q_a_layernorm / kv_a_layernorm (SPEC 3)")
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"],
                    help="compute dtype; float32 is a diagnostic of rounding sensitivity, never for a fixture")
    ap.add_argument("--out", help="write the fixture here")
    ap.add_argument("--compare", help="compare against this fixture (e.g. the transformers one) and report errors")
    ap.add_argument("--self-check", action="store_true", help="check prefill(T) == prefill(T-n) + n decode steps")
    args = ap.parse_args()
    torch.set_num_threads(1)
    global DT
    DT = getattr(torch, args.dtype)
    assert not (args.out and DT != torch.float64), "fixtures are written in float64 only"

    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            ckpt, gen_cmd, config_name = args.model, None, args.config or os.path.basename(os.path.normpath(args.model))
        else:
            assert args.config, "--model or --config"
            ckpt = os.path.join(tmp, args.config)
            gen_cmd = fc.run_random_model(args.kimi, args.config, ckpt, args.seed, args.experts)
            config_name = args.config
        model = Model(ckpt, args.mla_eps)
        cfg = model.cfg
        print(f"checkpoint {ckpt}: {cfg.num_layers} layers, kinds "
              + "".join("K" if k else "M" for k in cfg.is_kda) + f", switches {cfg.switches()}")
        experts_kind = "mxfp4" if any(k.endswith(".weight_packed") for k in model.W.t) else "bf16"

        prompts = fc.make_prompts(cfg.vocab_size)
        tensors, margins = {}, []

        def prefill(prompt):
            cache = model.new_cache()
            logits, hidden = model.forward(prompt, cache)
            return logits.numpy(), hidden.numpy(), cache

        def decode(tok, cache):
            logits, _ = model.forward([tok], cache)
            return logits[0].numpy(), cache

        for p, prompt in enumerate(prompts):
            arrs, m = fc.greedy_protocol(prefill, decode, prompt)
            for k, v in arrs.items():
                tensors[f"p{p}.{k}"] = v
            margins.append(m)
            print(f"p{p}: T={len(prompt)} tokens={arrs['tokens'].tolist()} min greedy gap "
                  f"{min(g for g, _ in m):.4g} (min gap/std {min(r for _, r in m):.4g})")
        # SPEC 8: blocks are empty at layer 0, so layer 0's self_attention_res_{norm,proj} are never read.
        print(f"smallest router gap (K-th minus (K+1)-th biased score, any token, any MoE layer): "
              f"{STATS.get('min_router_gap', float('nan')):.4g}")
        unused = sorted(n for n in set(model.W.t) - model.W.used if ".layers.0.self_attention_res_" not in n)
        assert not unused, f"checkpoint tensors the reference never read: {unused[:5]}"

        if args.self_check:
            print(f"self-check: SPEC 5.1 chunk form vs naive recurrence max rel err {check_chunk_form():.3g}")
            print(f"self-check: SPEC 6 absorbed MLA decode vs explicit max rel err {check_absorbed_mla(model, prompts[2]):.3g}")
            for p, prompt in enumerate(prompts):
                if len(prompt) > 1:
                    print(f"self-check p{p}: prefill(T) vs prefill(T-n)+decode max rel err {self_check(model, prompt):.3g}")

        if args.compare:
            ref, meta = fc.read_fixture(args.compare)
            print(f"compare against {args.compare} ({meta.get('reference')})")
            sums = fc.checkpoint_checksums(ckpt)
            theirs = json.loads(meta["checksums"])
            assert sums == theirs, "checkpoint checksums differ: not the same weights"
            worst = {}
            for name in sorted(ref):
                kind = name.split(".", 1)[1]
                if kind in ("prompt", "tokens"):
                    same = np.array_equal(ref[name], tensors[name])
                    print(f"  {name:22s} {'identical' if same else 'DIFFERENT'} {tensors[name].tolist() if not same else ''}")
                    worst[kind] = worst.get(kind, True) and same
                    continue
                mx, nr = rel_errors(tensors[name], ref[name])
                print(f"  {name:22s} max|d|/max|ref| {mx:.3g}   ||d||/||ref|| {nr:.3g}")
                if kind == "hidden":
                    for l in range(ref[name].shape[0]):
                        lm, ln = rel_errors(tensors[name][l], ref[name][l])
                        print(f"      hidden[{l}] {lm:.3g} {ln:.3g}")
                w = worst.get(kind, (0.0, 0.0))
                worst[kind] = (max(w[0], mx), max(w[1], nr))
            print("worst:", json.dumps(worst))

        if args.out:
            cmdline = "scripts/reference/k3_reference.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
            meta = {
                "config": config_name,
                "seed": str(args.seed),
                "experts": experts_kind,
                "generator": cmdline + ("" if gen_cmd is None else "  [checkpoint: " + fc.describe_random_model(gen_cmd) + "]"),
                "reference": "scripts/reference/k3_reference.py fp64 (naive KDA recurrence, explicit MLA over the latent "
                             f"cache, mla eps {args.mla_eps:g}); torch {torch.__version__}",
                "num_prompts": str(len(prompts)),
                "decode_steps": str(fc.DECODE_STEPS),
                "min_greedy_gap": repr(min(g for m in margins for g, _ in m)),
                "min_router_gap": repr(STATS.get("min_router_gap")),
                "checksums": json.dumps(fc.checkpoint_checksums(ckpt)),
            }
            fc.write_fixture(args.out, tensors, meta)
            print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
