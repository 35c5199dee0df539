"""fp64 references written plainly from SPEC.md (NumPy, loops where they read better), independent of kimi.cpp.

Every function takes NumPy arrays (already rounded to the storage dtype by the caller) and returns float64."""
import numpy as np


def f64(x):
    return np.asarray(x, dtype=np.float64)


def rel_err(got, ref):
    """||got - ref|| / ||ref|| (Frobenius), NaN-safe: NaN or Inf in got gives inf."""
    got, ref = f64(got), f64(ref)
    if not np.all(np.isfinite(got)):
        return np.inf
    den = np.linalg.norm(ref)
    num = np.linalg.norm(got - ref)
    return num / den if den > 0 else num


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    return np.logaddexp(0.0, x)


def silu(x):
    return x * sigmoid(x)


# --- KDA (SPEC 5) ---------------------------------------------------------------------------------

def kda_gate(f, A_log, dt_bias, lower_bound=None):
    """g from the raw gate input f [..., H, K]: softplus (lower_bound None) or bounded form."""
    f = f64(f)
    H, K = f.shape[-2:]
    x = f + f64(dt_bias).reshape(H, K)
    a = np.exp(f64(A_log).reshape(H))[:, None]
    if lower_bound is None:
        return -a * softplus(x)
    return lower_bound * sigmoid(a * x)


def kda(q, k, v, g, beta, scale=None, initial_state=None, l2norm=False, cu_seqlens=None, state_v_first=False):
    """The naive recurrence (SPEC 5): q, k [B, T, H, K]; v [B, T, H, V]; g [B, T, H, K] log decay; beta [B, T, H].
    Returns (o [B, T, H, V], final states [N, H, K, V] (or [N, H, V, K]))."""
    q, k, v, g, beta = (f64(x) for x in (q, k, v, g, beta))
    B, T, H, K = q.shape
    V = v.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    if l2norm:
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6)
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    if cu_seqlens is None:
        seqs = [(b, 0, T) for b in range(B)]
    else:
        cu = [int(c) for c in cu_seqlens]
        seqs = [(0, cu[n], cu[n + 1] - cu[n]) for n in range(len(cu) - 1)]
    o = np.zeros((B, T, H, V))
    finals = []
    for n, (b, t0, L) in enumerate(seqs):
        S = np.zeros((H, K, V))
        if initial_state is not None:
            s0 = f64(initial_state[n])
            S = s0.transpose(0, 2, 1).copy() if state_v_first else s0.copy()
        for t in range(t0, t0 + L):
            for h in range(H):
                S[h] *= np.exp(g[b, t, h])[:, None]                 # decay first
                e = v[b, t, h] - S[h].T @ k[b, t, h]                # prediction from the decayed state
                S[h] += beta[b, t, h] * np.outer(k[b, t, h], e)
                o[b, t, h] = S[h].T @ (scale * q[b, t, h])          # read-out from the updated state
        finals.append(S.transpose(0, 2, 1) if state_v_first else S)
    return o, np.stack(finals)


# --- norms (SPEC 3) ---------------------------------------------------------------------------------

def rms_norm(x, w, eps, round_to=None):
    """w * round(x / sqrt(mean(x^2) + eps)); round_to rounds the normalized value to the input dtype."""
    x = f64(x)
    n = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    if round_to is not None:
        n = f64(round_to(n))
    return f64(w) * n


def gated_rms_norm(o, z, w, eps):
    y = rms_norm(o, w, eps)
    return y if z is None else y * sigmoid(f64(z))


def l2_norm(x, eps=1e-6):
    x = f64(x)
    return x / np.sqrt((x * x).sum(-1, keepdims=True) + eps)


# --- short conv (SPEC 4) ------------------------------------------------------------------------------

def short_conv(x, w, cache=None, silu_act=True):
    """One sequence: x [T, C]; w [C, W]; cache [C, W-1] (oldest first) or None. Returns (y [T, C], cache [C, W-1])."""
    x, w = f64(x), f64(w)
    T, C = x.shape
    W = w.shape[-1]
    past = np.zeros((W - 1, C)) if cache is None else f64(cache).T
    full = np.concatenate([past, x], 0)                             # [W-1+T, C]
    y = np.zeros((T, C))
    for t in range(T):
        y[t] = (full[t:t + W] * w.T).sum(0)                          # w[:, W-1] meets the current token
    if silu_act:
        y = silu(y)
    return y, full[len(full) - (W - 1):].T


# --- linear, MXFP4 (SPEC 10) ------------------------------------------------------------------------

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)


def mxfp4_dequant(packed, scale):
    packed, scale = np.asarray(packed, np.uint8), np.asarray(scale, np.uint8)
    O, half = packed.shape
    codes = np.empty((O, half * 2), np.uint8)
    codes[:, 0::2] = packed & 0xF                                   # low nibble: even column
    codes[:, 1::2] = packed >> 4
    mag = E2M1[codes & 7] * np.where(codes & 8, -1.0, 1.0)
    e = np.repeat(scale.astype(np.float64), 32, axis=1)
    return mag * np.exp2(e - 127)


# --- MoE (SPEC 7) -------------------------------------------------------------------------------------

def router(logits, top_k, bias=None, renormalize=True, scaling=1.0):
    s = sigmoid(f64(logits))
    biased = s + (0 if bias is None else f64(bias))
    T = s.shape[0]
    ids = np.zeros((T, top_k), np.int64)
    w = np.zeros((T, top_k))
    for t in range(T):
        order = sorted(range(s.shape[1]), key=lambda j: (-biased[t, j], j))[:top_k]   # ties: lower index first
        ids[t] = order
        w[t] = s[t, order]
        if renormalize:
            w[t] /= w[t].sum() + 1e-20
    return ids, w * scaling


def quantile_balance(scores, bias, top_k):
    s, b = f64(scores), f64(bias).copy()
    T, E = s.shape
    biased = s + b
    c = np.sort(biased, axis=1)[:, E - top_k - 1]                   # the (K+1)-th largest per token
    m = biased - c[:, None]
    q = top_k * T / E
    h = min(max(T - q - 0.5, 0.0), T - 1.0)
    lo = int(np.floor(h))
    delta = np.zeros(E)
    for j in range(E):
        mj = np.sort(m[:, j])
        hi = min(lo + 1, T - 1)
        delta[j] = mj[lo] + (h - lo) * (mj[hi] - mj[lo])
    b -= delta
    return b - b.mean()


def glu(gate, up, act="silu", beta=4.0, lbeta=25.0):
    gate, up = f64(gate), f64(up)
    if act == "silu":
        return silu(gate) * up
    a = beta * np.tanh(gate / beta) * sigmoid(gate)
    return a * (lbeta * np.tanh(up / lbeta) if lbeta > 0 else up)


def mlp(x, wg, wu, wd, act="silu", beta=4.0, lbeta=25.0):
    x = f64(x)
    return glu(x @ f64(wg).T, x @ f64(wu).T, act, beta, lbeta) @ f64(wd).T


def latent_moe(x, wr, experts, top_k, bias=None, down=None, norm=None, up=None, shared=None, renormalize=True,
               scaling=1.0, act="silu", eps=1e-5):
    x = f64(x)
    ids, w = router(x @ f64(wr).T, top_k, bias, renormalize, scaling)
    lat = x @ f64(down).T if down is not None else x
    acc = np.zeros_like(lat)
    for t in range(x.shape[0]):
        for j in range(top_k):
            g, u, d = experts[ids[t, j]]
            acc[t] += w[t, j] * mlp(lat[t:t + 1], g, u, d, act)[0]
    if norm is not None:
        acc = rms_norm(acc, norm, eps)
    out = acc @ f64(up).T if up is not None else acc
    if shared is not None:
        out = out + mlp(x, *shared, act)
    return out, ids, w


# --- AttnRes (SPEC 8) ---------------------------------------------------------------------------------

def attn_res(partial, blocks, proj_w, norm_w, eps):
    V = np.stack([f64(b) for b in blocks] + [f64(partial)], 0)     # [n+1, T, d]
    kn = V / np.sqrt((V * V).mean(-1, keepdims=True) + eps)
    s = (kn * (f64(norm_w) * f64(proj_w))).sum(-1)                   # [n+1, T]
    p = np.exp(s - s.max(0))
    p /= p.sum(0)
    return (p[..., None] * V).sum(0)


# --- MLA (SPEC 6) ---------------------------------------------------------------------------------------

def mla_attend(q, c, kpe, w_kvb, scale=None, gate=None):
    """One sequence, causal, explicit form. q [T, H, Dn+P]; c [L, R]; kpe [L, P]; the query at row t attends to
    rows [0, L - T + t]. w_kvb [H*(Dn+Dv), R]. Returns o [T, H, Dv]."""
    q, c, kpe, w = f64(q), f64(c), f64(kpe), f64(w_kvb)
    T, H, Dq = q.shape
    L, P = kpe.shape
    Dn = Dq - P
    Dv = w.shape[0] // H - Dn
    scale = Dq ** -0.5 if scale is None else scale
    o = np.zeros((T, H, Dv))
    for h in range(H):
        wh = w[h * (Dn + Dv):(h + 1) * (Dn + Dv)]
        kn, vv = c @ wh[:Dn].T, c @ wh[Dn:].T                        # [L, Dn], [L, Dv]
        keys = np.concatenate([kn, kpe], 1)
        for t in range(T):
            n = L - T + t + 1
            s = keys[:n] @ q[t, h] * scale
            a = np.exp(s - s.max())
            a /= a.sum()
            o[t, h] = a @ vv[:n]
    if gate is not None:
        o *= sigmoid(f64(gate).reshape(T, H, Dv))
    return o
