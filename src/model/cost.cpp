// Implementation of kimi/model/cost.h: the ops of one forward step (the formulas are in the header).
#include "kimi/model/cost.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kimi/error.h"

namespace kimi::model {

WeightFormat default_weight_format(const Config& c) { return {DType::bf16, c.k3_wrapper && c.num_experts > 0}; }

double expert_weight_bytes(const WeightFormat& f) {
  return f.mxfp4_experts ? 0.5 + 1.0 / 32 : double(dtype_size(f.dense));  // nibble + scale byte per 32
}

double expected_distinct_experts(int64_t num_experts, int64_t top_k, int64_t tokens) {
  if (num_experts < 1) throw Error("expected_distinct_experts: argument 'num_experts': expected >= 1, got " + std::to_string(num_experts));
  if (top_k < 1 || top_k > num_experts)
    throw Error("expected_distinct_experts: argument 'top_k': expected a value in [1, " + std::to_string(num_experts) +
                "], got " + std::to_string(top_k));
  if (tokens < 0) throw Error("expected_distinct_experts: argument 'tokens': expected >= 0, got " + std::to_string(tokens));
  const double E = double(num_experts);
  return E * (1.0 - std::pow(1.0 - double(top_k) / E, double(tokens)));
}

namespace {

constexpr double kF32 = 4;
constexpr int64_t kChunk = 64;  // KDA chunk length of the prefill FLOP count (FLA's)

// Collects the ops of one step; each helper is one family of the header's table.
class Builder {
 public:
  Builder(const Config& c, const Workload& w, const WeightFormat& f)
      : c_(c), N_(double(w.batch)), T_(double(w.new_tokens_per_seq)), ctx_(double(w.context)), M_(N_ * T_),
        d_(double(c.hidden_size)), a_(dtype_size(w.activations)), cb_(dtype_size(w.activations)),
        w_(dtype_size(f.dense)), e_(expert_weight_bytes(f)) {
    out_.workload = w;
    out_.weights = f;
  }

  ForwardCost build() {
    embed();
    for (int64_t i = 0; i < c_.num_hidden_layers; ++i) layer(i);
    head();
    for (const OpCost& o : out_.ops) {
      out_.bytes_weights += o.bytes_weights;
      out_.bytes_activations += o.bytes_activations;
      out_.bytes_cache += o.bytes_cache;
      out_.flops += o.flops;
    }
    return std::move(out_);
  }

 private:
  // `resident` is the bytes of the op's weights as stored, when more than it reads (experts, the embedding table).
  OpCost& add(const char* kind, const char* op, int64_t layer, double weights, double acts, double cache, double flops,
              double resident = -1) {
    out_.weights_resident += resident < 0 ? weights : resident;
    return out_.ops.emplace_back(OpCost{kind, op, layer, weights, acts, cache, flops});
  }
  void gemm(const char* kind, const char* op, int64_t layer, double rows, double out, double in) {
    add(kind, op, layer, out * in * w_, rows * (in + out) * a_, 0, 2 * rows * out * in);
  }
  void rms_norm(const char* kind, const char* op, int64_t layer, double rows, double width) {
    add(kind, op, layer, width * w_, 2 * rows * width * a_, 0, 4 * rows * width);
  }
  void residual_add(const char* kind, int64_t layer) { add(kind, "residual_add", layer, 0, 3 * M_ * d_ * a_, 0, M_ * d_); }

  void embed() {
    const double rows = std::min(M_, double(c_.vocab_size));
    add("embed", "embed_tokens", -1, rows * d_ * w_, M_ * d_ * a_ + M_ * 4 /* int32 ids */, 0, 0,
        double(c_.vocab_size) * d_ * w_);
  }

  // AttnRes (K3): blocks sealed before layer i: layers j < i with j % Bk == 0 (SPEC 8).
  int64_t blocks_before(int64_t i) const { return i == 0 ? 0 : (i - 1) / *c_.attn_res_block_size + 1; }
  void attn_res(const char* op, int64_t layer, int64_t blocks, double rows) {
    const double n = double(blocks + 1);  // candidates: the blocks and the partial sum
    add("attn_res", op, layer, 2 * d_ * w_, (n + 1) * rows * d_ * a_, 0, 7 * n * rows * d_);
  }

  void layer(int64_t i) {
    bool sealed = false;  // AttnRes: the partial sum starts over at this layer (no residual add after the mixer)
    if (c_.attn_res_block_size) {
      const int64_t n = blocks_before(i);
      if (n > 0) {
        attn_res("attn_res_mixer", i, n, M_);
      } else {
        out_.weights_resident += 2 * d_ * w_;  // stored but unused: no block is sealed before layer 0's mixer
      }
      if (i % *c_.attn_res_block_size == 0) {
        sealed = true;
        add("attn_res", "seal_block", i, 0, 2 * M_ * d_ * a_, 0, 0);
      }
    }
    const char* mk = c_.is_kda_layer(i) ? "kda" : "mla";
    rms_norm(mk, "attn_norm", i, M_, d_);
    if (c_.is_kda_layer(i)) {
      kda(i);
    } else {
      mla(i);
    }
    if (!sealed) residual_add(mk, i);
    if (c_.attn_res_block_size) attn_res("attn_res_ffn", i, blocks_before(i) + (sealed ? 1 : 0), M_);
    if (c_.is_moe_layer(i)) {
      moe(i);
    } else {
      dense_ffn(i);
    }
  }

  void kda(int64_t i) {
    const double H = double(c_.kda_num_heads), K = double(c_.kda_head_dim), V = K, P = H * K, W = double(c_.conv_kernel);
    const bool has_state = ctx_ > 0;
    for (const char* p : {"q_proj", "k_proj", "v_proj"}) gemm("kda", p, i, M_, P, d_);
    const double conv_cache = N_ * 3 * P * (W - 1) * cb_;
    add("kda", "short_conv", i, 3 * P * W * kF32, 2 * 3 * M_ * P * a_, conv_cache * (has_state ? 2 : 1),
        3 * M_ * P * 2 * W);
    gemm("kda", "f_a_proj", i, M_, K, d_);
    gemm("kda", "f_b_proj", i, M_, P, K);
    add("kda", "gate", i, (H + P) * kF32 /* A_log, dt_bias */, M_ * P * (a_ + kF32), 0, 4 * M_ * P);
    gemm("kda", "b_proj", i, M_, H, d_);
    const double state = N_ * H * K * V * kF32;
    const double acts = M_ * P * 3 * a_ + M_ * P * kF32 + M_ * H * kF32 + M_ * H * V * a_;  // q k v, g, beta, o
    if (T_ == 1) {
      add("kda", "kda_recurrent", i, 0, acts, state * (has_state ? 2 : 1), M_ * H * 7 * K * V);
    } else {
      const double C = std::min(double(kChunk), T_);
      const double per_token = 6 * C * K + 4 * C * V + C * C / 3 + 6 * K * V + K * V / C;
      add("kda", "kda_chunk", i, 0, acts, state * (has_state ? 2 : 1), M_ * H * per_token);
    }
    if (c_.kda_full_rank_gate) {
      gemm("kda", "g_proj", i, M_, P, d_);
    } else {
      gemm("kda", "g_a_proj", i, M_, K, d_);
      gemm("kda", "g_b_proj", i, M_, P, K);
    }
    add("kda", "gated_norm", i, K * kF32 /* o_norm */, 3 * M_ * P * a_, 0, 6 * M_ * P);
    gemm("kda", "o_proj", i, M_, d_, P);
    out_.cache_per_seq += H * K * V * kF32 + 3 * P * (W - 1) * cb_;
    // K3 checkpoints store A_log as fp32[max(H, 128)] with a zero tail (schema.h), never read.
    if (c_.k3_wrapper) out_.weights_resident += double(std::max<int64_t>(c_.kda_num_heads, 128) - c_.kda_num_heads) * kF32;
  }

  void mla(int64_t i) {
    const double H = double(c_.num_attention_heads), nope = double(c_.qk_nope_head_dim),
                 rope = double(c_.qk_rope_head_dim), qk = nope + rope, v = double(c_.v_head_dim),
                 r = double(c_.kv_lora_rank);
    if (c_.q_lora_rank) {
      const double ql = double(*c_.q_lora_rank);
      gemm("mla", "q_a_proj", i, M_, ql, d_);
      rms_norm("mla", "q_a_norm", i, M_, ql);
      gemm("mla", "q_b_proj", i, M_, H * qk, ql);
    } else {
      gemm("mla", "q_proj", i, M_, H * qk, d_);
    }
    gemm("mla", "kv_a_proj", i, M_, r + rope, d_);
    rms_norm("mla", "kv_a_norm", i, M_, r);
    add("mla", "latent_cache_write", i, 0, M_ * (r + rope) * a_, M_ * (r + rope) * cb_, 0);
    const double cache_read = N_ * ctx_ * (r + rope) * cb_;
    if (T_ > 1) {
      const double rows = N_ * (ctx_ + T_);  // every latent of the sequences, expanded per head
      add("mla", "kv_b_proj", i, H * (nope + v) * r * w_, M_ * r * a_ + rows * H * (nope + v) * a_, cache_read,
          2 * rows * H * (nope + v) * r);
      const double pairs = N_ * (T_ * ctx_ + T_ * (T_ + 1) / 2);
      add("mla", "attention", i, 0, (M_ * H * qk + rows * (H * (nope + v) + rope) + M_ * H * v) * a_, 0,
          2 * pairs * H * (qk + v) + 5 * pairs * H);
    } else {
      const double positions = ctx_ + 1;
      add("mla", "q_absorb", i, H * nope * r * w_, M_ * H * (nope + r) * a_, 0, 2 * M_ * H * nope * r);
      add("mla", "attention", i, 0, (M_ * H * (r + rope) + M_ * (r + rope) + M_ * H * r) * a_, cache_read,
          2 * M_ * H * positions * (2 * r + rope) + 5 * M_ * H * positions);
      add("mla", "v_absorb", i, H * v * r * w_, M_ * H * (r + v) * a_, 0, 2 * M_ * H * v * r);
    }
    if (c_.mla_use_output_gate) {
      gemm("mla", "g_proj", i, M_, H * v, d_);
      add("mla", "gate_mul", i, 0, 3 * M_ * H * v * a_, 0, 5 * M_ * H * v);
    }
    gemm("mla", "o_proj", i, M_, d_, H * v);
    out_.cache_per_seq += (ctx_ + T_) * (r + rope) * cb_;
  }

  // GLU on [rows, width]: reads gate and up, writes h.
  void glu(const char* kind, const char* op, int64_t layer, double rows, double width) {
    add(kind, op, layer, 0, 3 * rows * width * a_, 0, 8 * rows * width);
  }

  void dense_ffn(int64_t i) {
    const double I = double(c_.intermediate_size);
    rms_norm("dense_ffn", "ffn_norm", i, M_, d_);
    gemm("dense_ffn", "gate_proj", i, M_, I, d_);
    gemm("dense_ffn", "up_proj", i, M_, I, d_);
    glu("dense_ffn", "glu", i, M_, I);
    gemm("dense_ffn", "down_proj", i, M_, d_, I);
    residual_add("dense_ffn", i);
  }

  void moe(int64_t i) {
    const double E = double(c_.num_experts), k = double(c_.num_experts_per_token), I = double(c_.moe_intermediate_size);
    const double dl = double(c_.routed_expert_hidden_size.value_or(c_.hidden_size));
    const double S = M_ * k;  // token-slots
    const double U = expected_distinct_experts(c_.num_experts, c_.num_experts_per_token, int64_t(M_));
    out_.touched_experts = U;
    out_.touched_expert_fraction = U / E;
    rms_norm("moe", "ffn_norm", i, M_, d_);
    add("moe", "router", i, E * d_ * w_ + E * kF32 /* correction bias */, M_ * d_ * a_ + M_ * k * 8 /* ids, weights */,
        0, 2 * M_ * E * d_);
    if (c_.routed_expert_hidden_size) gemm("moe", "latent_down", i, M_, dl, d_);
    add("moe", "experts_gate_up", i, U * 2 * I * dl * e_, S * (dl + 2 * I) * a_, 0, 2 * S * 2 * I * dl,
        E * 2 * I * dl * e_);
    glu("moe", "experts_glu", i, S, I);
    add("moe", "experts_down", i, U * dl * I * e_, S * (I + dl) * a_, 0, 2 * S * dl * I, E * dl * I * e_);
    add("moe", "combine", i, 0, (S + M_) * dl * a_, 0, 2 * S * dl);
    if (c_.routed_expert_hidden_size) {
      if (c_.latent_moe_use_norm) rms_norm("moe", "latent_norm", i, M_, dl);
      gemm("moe", "latent_up", i, M_, d_, dl);
    }
    if (c_.num_shared_experts > 0) {
      const double si = double(c_.num_shared_experts) * I;
      gemm("moe", "shared_gate_up", i, M_, 2 * si, d_);
      glu("moe", "shared_glu", i, M_, si);
      gemm("moe", "shared_down", i, M_, d_, si);
    }
    residual_add("moe", i);
  }

  void head() {
    // One row per sequence needs logits (its last token).
    if (c_.attn_res_block_size) attn_res("attn_res_output", -1, blocks_before(c_.num_hidden_layers), N_);
    rms_norm("head", "final_norm", -1, N_, d_);
    gemm("head", "lm_head", -1, N_, double(c_.vocab_size), d_);
  }

  const Config& c_;
  double N_, T_, ctx_, M_, d_;
  double a_, cb_, w_, e_;  // bytes per activation, per MLA latent / conv cache element (the same dtype), per dense
                           // weight, per routed-expert weight
  ForwardCost out_;
};

}  // namespace

ForwardCost forward_cost(const Config& c, const Workload& w, const WeightFormat& f) {
  auto fail = [](const std::string& field, const std::string& expected, const std::string& got) {
    throw Error("forward_cost: argument '" + field + "': expected " + expected + ", got " + got);
  };
  if (w.batch < 1) fail("workload.batch", ">= 1", std::to_string(w.batch));
  if (w.new_tokens_per_seq < 1) fail("workload.new_tokens_per_seq", ">= 1", std::to_string(w.new_tokens_per_seq));
  if (w.context < 0) fail("workload.context", ">= 0", std::to_string(w.context));
  if (!is_float(w.activations)) fail("workload.activations", "f32, bf16 or f16", std::string(dtype_name(w.activations)));
  if (!is_float(f.dense)) fail("weights.dense", "f32, bf16 or f16", std::string(dtype_name(f.dense)));
  if (f.mxfp4_experts) {
    if (c.num_experts == 0) fail("weights.mxfp4_experts", "false for a config without routed experts", "true");
    const int64_t dl = c.routed_expert_hidden_size.value_or(c.hidden_size);
    if (dl % 32 != 0 || c.moe_intermediate_size % 32 != 0)
      fail("weights.mxfp4_experts", "expert widths divisible by 32 (MXFP4 scales 32 weights)",
           "latent " + std::to_string(dl) + " and moe_intermediate_size " + std::to_string(c.moe_intermediate_size));
  }
  return Builder(c, w, f).build();
}

namespace {
// H200: the copy bandwidth and bf16 GEMM rate measured on this project's H200 (BENCH.md, 2026-11-29; the
// datasheet says 4.8 TB/s and 989 TFLOP/s). H100 SXM: datasheet. B200: DGX B200 datasheet divided by its 8 GPUs
// (1440 GB, 64 TB/s, 72 PFLOP/s FP8 with sparsity: 2.25 PFLOP/s dense bf16 each).
const Chip kChips[] = {
    {"h200", 4.25e12, 691e12, 141e9, "measured on an H200 (BENCH.md): device copy 4.25 TB/s, bf16 GEMM 691 TFLOP/s"},
    {"h100", 3.35e12, 989e12, 80e9, "H100 SXM datasheet: 3.35 TB/s, 989 TFLOP/s dense bf16"},
    {"b200", 8.0e12, 2250e12, 180e9, "DGX B200 datasheet per GPU: 8 TB/s, 2250 TFLOP/s dense bf16"},
};
}  // namespace

std::span<const Chip> named_chips() { return kChips; }

const Chip& named_chip(std::string_view name) {
  for (const Chip& c : kChips)
    if (c.name == name) return c;
  throw Error("named_chip: expected h200, h100 or b200, got '" + std::string(name) + "'");
}

Prediction predict(const ForwardCost& cost, const Chip& chip) {
  auto check = [&](const char* field, double v) {
    if (v > 0 && std::isfinite(v)) return;
    char got[32];
    std::snprintf(got, sizeof got, "%g", v);
    throw Error("predict: chip '" + chip.name + "': expected " + field + " > 0 (finite), got " + got);
  };
  check("hbm_bytes_per_s", chip.hbm_bytes_per_s);
  check("bf16_flops_per_s", chip.bf16_flops_per_s);
  Prediction p;
  p.chip = chip;
  for (const OpCost& o : cost.ops) {
    const double mem = o.bytes() / chip.hbm_bytes_per_s, comp = o.flops / chip.bf16_flops_per_s;
    p.ops.push_back({std::max(mem, comp), comp > mem});
    p.seconds += std::max(mem, comp);
    p.memory_seconds += mem;
    p.compute_seconds += comp;
  }
  p.steps_per_s = p.seconds > 0 ? 1 / p.seconds : 0;
  p.tokens_per_s = double(cost.tokens()) * p.steps_per_s;
  return p;
}

double bandwidth_for(const ForwardCost& cost, double steps_per_s) { return cost.bytes() * steps_per_s; }

}  // namespace kimi::model
