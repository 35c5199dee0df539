"""kimi.cpp's operators for Python: every function takes PyTorch / NumPy / DLPack arrays on the CPU or a CUDA
device, allocates its outputs like its inputs (or writes ``out=``), runs on the caller's current stream and
raises kimi_cpp.Error (a ValueError naming the argument, expected vs actual) on bad input.

Which backends run which operator: ``kimi_cpp.op_supported(name, 'cuda')`` (the CPU runs all of them).
"""
from . import attn_res as _attn_res_mod
from . import conv, kda, linear, mla, moe, norm
from .attn_res import attn_res
from .conv import short_conv_fwd, short_conv_update
from .kda import chunk_kda, fused_recurrent_kda, kda_beta, kda_gate
from .linear import linear as linear_fwd
from .linear import gather_rows, mxfp4_dequant, mxfp4_quant
from .mla import mla_cache_write, mla_decode, mla_prefill
from .moe import glu, latent_moe, mlp, moe_quantile_balance, moe_router, silu_glu, situ_glu
from .norm import add_rms_norm, gated_rms_norm, l2_norm, rms_norm

del _attn_res_mod

__all__ = [
    "add_rms_norm", "attn_res", "chunk_kda", "fused_recurrent_kda", "gated_rms_norm", "gather_rows", "glu", "kda_beta", "kda_gate",
    "l2_norm", "latent_moe", "linear_fwd", "mla_cache_write", "mla_decode", "mla_prefill", "mlp",
    "moe_quantile_balance", "moe_router", "mxfp4_dequant", "mxfp4_quant", "rms_norm", "short_conv_fwd",
    "short_conv_update", "silu_glu", "situ_glu",
    "conv", "kda", "linear", "mla", "moe", "norm",
]
