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
    {"add_rms_norm", "norm", false},
    {"gated_rms_norm", "norm", kCuda},
    {"l2_norm", "norm", false},
    {"linear", "linear", false},
    {"mxfp4_dequant", "mxfp4", false},
    {"mxfp4_quant", "mxfp4", false},
    {"short_conv_fwd", "conv", kCuda},
    {"short_conv_update", "conv", kCuda},
    {"kda_gate", "kda", false},
    {"kda_beta", "kda", false},
    {"kda_recurrent_fwd", "kda", kCuda},
    {"kda_chunk_fwd", "kda", kCuda},
    {"kda_decode_step", "kda", kCuda},
    {"mla_prefill", "mla", false},
    {"mla_cache_write", "mla", false},
    {"mla_decode", "mla", false},
    {"moe_router", "moe", false},
    {"moe_quantile_balance", "moe", false},
    {"glu", "moe", false},
    {"mlp", "moe", false},
    {"latent_moe", "moe", false},
    {"attn_res", "attn_res", false},
    {"gather_rows", "gather", kCuda},
};
}  // namespace

std::span<const OpInfo> op_table() { return kOps; }

}  // namespace kimi
