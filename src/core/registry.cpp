// The operator table (src/core/registry.h).
#include "core/registry.h"

namespace kimi {

namespace {
#ifdef KIMI_WITH_CUDA
constexpr bool kCuda = true;
#else
constexpr bool kCuda = false;
#endif

constexpr OpInfo kOps[] = {
    {"rms_norm", "norm", kCuda},
    {"add_rms_norm", "norm", kCuda},
    {"gated_rms_norm", "norm", kCuda},
    {"l2_norm", "norm", kCuda},
    {"linear", "linear", kCuda},
    {"mxfp4_dequant", "mxfp4", kCuda},
    {"mxfp4_quant", "mxfp4", kCuda},
    {"short_conv_fwd", "conv", kCuda},
    {"short_conv_update", "conv", kCuda},
    {"kda_gate", "kda", kCuda},
    {"kda_beta", "kda", kCuda},
    {"kda_recurrent_fwd", "kda", kCuda},
    {"kda_chunk_fwd", "kda", kCuda},
    {"kda_decode_step", "kda", kCuda},
    {"mla_prefill", "mla", kCuda},
    {"mla_cache_write", "mla", kCuda},
    {"mla_decode", "mla", kCuda},
    {"moe_router", "moe", kCuda},
    {"moe_quantile_balance", "moe", false},
    {"glu", "moe", kCuda},
    {"mlp", "moe", kCuda},
    {"latent_moe", "moe", kCuda},
    {"attn_res", "attn_res", kCuda},
    {"gather_rows", "gather", kCuda},
};
}  // namespace

std::span<const OpInfo> op_table() { return kOps; }

}  // namespace kimi
