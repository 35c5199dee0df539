"""MoE pieces (SPEC 7, include/kimi/ops/moe.h): the sigmoid router, Quantile Balancing, GLU activations (SiLU,
SiTU), the dense MLP and the latent MoE block. Weights are dense arrays or MXFP4 (packed, scale) pairs."""
from __future__ import annotations

from .. import _C, _tensors
from .linear import split_weight

__all__ = ["moe_router", "moe_quantile_balance", "glu", "silu_glu", "situ_glu", "mlp", "latent_moe"]


def moe_router(logits, top_k: int, bias=None, renormalize: bool = True, scaling: float = 1.0):
    """s = sigmoid(logits); ids = top-k of (s + bias) (ties: lower index first); weights = s[ids] (unbiased),
    renormalized to sum 1 (+1e-20) when ``renormalize``, then times ``scaling``. logits [T, E]; bias f32 [E].
    Returns (ids int32 [T, top_k] by descending biased score, weights float32 [T, top_k])."""
    T = logits.shape[0]
    ids = _tensors.empty(logits, (T, top_k), "int32")
    weights = _tensors.empty(logits, (T, top_k), "float32")
    _C.moe_router(logits, bias, int(top_k), bool(renormalize), float(scaling), ids, weights,
                  _tensors.stream(logits))
    return ids, weights


def moe_quantile_balance(scores, bias, top_k: int):
    """Quantile Balancing bias update on a batch (training-time, no auxiliary loss): each expert's bias moves by
    the (1 - K/E) quantile of its score margins, then is centred. scores f32 [T, E] (sigmoid probabilities);
    bias f32 [E] updated in place and returned."""
    _C.moe_quantile_balance(scores, bias, int(top_k), _tensors.stream(scores))
    return bias


def glu(gate, up, act: str = "silu", situ_beta: float = 4.0, situ_linear_beta: float = 25.0, out=None):
    """h = act(gate) * up'. act 'silu': SiLU(gate) * up. act 'situ' (K3's SiTU-GLU):
    (beta * tanh(gate / beta) * sigmoid(gate)) * (lbeta * tanh(up / lbeta)), lbeta <= 0: up unchanged.
    gate, up [..., I]; returns h like gate (or ``out``, which may be gate or up)."""
    h = _tensors.empty(gate, gate.shape) if out is None else out
    _C.glu(gate, up, act, float(situ_beta), float(situ_linear_beta), h, _tensors.stream(gate))
    return h


def silu_glu(gate, up, out=None):
    """SiLU(gate) * up."""
    return glu(gate, up, "silu", out=out)


def situ_glu(gate, up, beta: float = 4.0, linear_beta: float = 25.0, out=None):
    """SiTU-GLU (K3): beta * tanh(gate / beta) * sigmoid(gate) * linear_beta * tanh(up / linear_beta)."""
    return glu(gate, up, "situ", beta, linear_beta, out=out)


def _mlp_arrays(gate, up, down):
    g, gs = split_weight(gate)
    u, us = split_weight(up)
    d, ds = split_weight(down)
    return [g, gs, u, us, d, ds]


def mlp(x, gate, up, down, act: str = "silu", situ_beta: float = 4.0, situ_linear_beta: float = 25.0, out=None,
        accumulate: bool = False):
    """y = down(act(gate x) * up x) (gate/up products and the activation stay fp32). x [T, d]; gate, up [I, d];
    down [d, I] (dense or MXFP4 pairs). Returns y [T, d] like x (``accumulate``: y += ... into ``out``)."""
    if out is None:
        if accumulate:
            raise ValueError("mlp: accumulate=True needs out=")
        out = _tensors.empty(x, x.shape)
    _C.mlp(x, _mlp_arrays(gate, up, down), act, float(situ_beta), float(situ_linear_beta), out,
           1.0 if accumulate else 0.0, _tensors.stream(x))
    return out


def latent_moe(x, router, experts, top_k: int, router_bias=None, latent_down=None, latent_norm=None, latent_up=None,
               shared=None, renormalize: bool = True, scaling: float = 1.0, act: str = "silu",
               situ_beta: float = 4.0, situ_linear_beta: float = 25.0, norm_eps: float = 1e-5,
               return_routing: bool = False):
    """The (latent) MoE block of SPEC 7:
    out = latent_up(RMSNorm(sum_k w_k Expert_{ids_k}(latent_down x))) + Shared(x)
    (Kimi-Linear: no latent_down / latent_norm / latent_up, experts on x directly).

    x [T, d]; router [E, d]; router_bias f32 [E]; latent_down [Dl, d]; latent_norm [Dl]; latent_up [d, Dl];
    experts: E tuples (gate [I, Dl], up [I, Dl], down [Dl, I]); shared: one (gate, up, down) on x or None.
    Every weight dense or an MXFP4 (packed, scale) pair. Returns out [T, d] like x, or (out, ids int32 [T, K],
    weights float32 [T, K]) with ``return_routing``. On CUDA, decode shapes (T * top_k <= 16 E) never wait on the
    host and can be captured in a CUDA graph when each projection's experts are evenly strided in memory (e.g.
    ``w1[e]`` slices of one [E, I, Dl] tensor); experts in separate tensors take a per-call pointer upload, which
    refuses graph capture (docs/ops/moe.md)."""
    T = x.shape[0]
    out = _tensors.empty(x, x.shape)
    ids = _tensors.empty(x, (T, top_k), "int32") if return_routing else None
    weights = _tensors.empty(x, (T, top_k), "float32") if return_routing else None
    r, rs = split_weight(router)
    ld, lds = split_weight(latent_down) if latent_down is not None else (None, None)
    lu, lus = split_weight(latent_up) if latent_up is not None else (None, None)
    ex = [_mlp_arrays(*e) for e in experts]
    sh = _mlp_arrays(*shared) if shared is not None else None
    _C.latent_moe(x, r, rs, router_bias, ld, lds, latent_norm, lu, lus, ex, sh, int(top_k), bool(renormalize),
                  float(scaling), act, float(situ_beta), float(situ_linear_beta), float(norm_eps), out, ids, weights,
                  _tensors.stream(x))
    return (out, ids, weights) if return_routing else out
