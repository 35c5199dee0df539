// kimi/model/cost.h: forward_cost against numbers computed by hand for a tiny config, the distinct-experts formula
// at known points, MXFP4 bytes, and the weights of the real configs (configs/*.json) against an independent count
// of the checkpoint schema's tensors.
#include <gtest/gtest.h>

#include <cmath>

#include "cost_testutil.h"
#include "expect_error.h"
#include "kimi/model/cost.h"
#include "kimi/model/schema.h"

namespace kimi::model {
namespace {

Config tiny() { return kimi::testutil::tiny_cost_config(); }

const OpCost& op(const ForwardCost& f, int64_t layer, const std::string& name) {
  for (const OpCost& o : f.ops)
    if (o.layer == layer && o.op == name) return o;
  ADD_FAILURE() << "no op " << name << " in layer " << layer;
  static const OpCost none;
  return none;
}

// configs/ at the repository root, beside tests/.
Config from_file(const std::string& name) { return load_config(std::string(KIMI_FIXTURES_DIR) + "/../../configs/" + name); }

// Bytes of the weights as a checkpoint of the schema stores them, counted tensor by tensor: bf16 weights 2 bytes,
// fp32 parameters 4, MXFP4 packed and scale tensors 1 byte per element. Routed experts count `expert_share` of their
// bytes, the embedding table `embed_rows` rows (all of them when < 0).
double schema_bytes(const Config& c, bool mxfp4, double expert_share, int64_t embed_rows) {
  double total = 0;
  for (const TensorSpec& t : checkpoint_schema(c, {mxfp4})) {
    double n = 1;
    for (int64_t s : t.shape) n *= double(s);
    const double per = t.role == TensorRole::weight ? 2 : t.role == TensorRole::fp32_param ? 4 : 1;
    double bytes = n * per;
    if (t.routed_expert) bytes *= expert_share;
    if (t.name.find("embed_tokens") != std::string::npos && embed_rows >= 0) bytes = double(embed_rows) * double(c.hidden_size) * 2;
    total += bytes;
  }
  return total;
}

TEST(Cost, OneGemmBytesAndFlops) {
  const ForwardCost f = forward_cost(tiny(), {3, 1, 0, DType::bf16});
  const OpCost& q = op(f, 0, "q_proj");  // [3, 64] x [32, 64]^T
  EXPECT_EQ(q.layer_kind, "kda");
  EXPECT_DOUBLE_EQ(q.bytes_weights, 32 * 64 * 2);
  EXPECT_DOUBLE_EQ(q.bytes_activations, 3 * (64 + 32) * 2);
  EXPECT_DOUBLE_EQ(q.bytes_cache, 0);
  EXPECT_DOUBLE_EQ(q.flops, 2 * 3 * 32 * 64);
  // f32 activations double the activation bytes only.
  const ForwardCost f32 = forward_cost(tiny(), {3, 1, 0, DType::f32});  // named: op() returns a reference into it
  const OpCost& q32 = op(f32, 0, "q_proj");
  EXPECT_DOUBLE_EQ(q32.bytes_activations, 3 * (64 + 32) * 4);
  EXPECT_DOUBLE_EQ(q32.bytes_weights, q.bytes_weights);
  // The dense FFN of layer 0 and the head: lm_head reads [100, 64] for one row per sequence.
  EXPECT_DOUBLE_EQ(op(f, 0, "down_proj").flops, 2 * 3 * 64 * 32);
  const OpCost& head = op(f, -1, "lm_head");
  EXPECT_EQ(head.layer_kind, "head");
  EXPECT_DOUBLE_EQ(head.bytes_weights, 100 * 64 * 2);
  EXPECT_DOUBLE_EQ(op(forward_cost(tiny(), {3, 7, 0, DType::bf16}), -1, "lm_head").flops, 2 * 3 * 100 * 64);
  // The embedding reads the rows it gathers: 3 tokens, or the whole table of 100 rows for 3 x 50 tokens.
  EXPECT_DOUBLE_EQ(op(f, -1, "embed_tokens").bytes_weights, 3 * 64 * 2);
  EXPECT_DOUBLE_EQ(op(forward_cost(tiny(), {3, 50, 0, DType::bf16}), -1, "embed_tokens").bytes_weights, 100 * 64 * 2);
}

TEST(Cost, KdaStateAndConvCache) {
  // Decode, 3 sequences with context: state [2, 16, 16] f32 read and written per sequence, conv caches
  // 3 * P * (W - 1) bf16 read and written.
  const ForwardCost f = forward_cost(tiny(), {3, 1, 5, DType::bf16});
  const OpCost& core = op(f, 0, "kda_recurrent");
  EXPECT_DOUBLE_EQ(core.bytes_cache, 2 * 3 * (2 * 16 * 16 * 4));
  EXPECT_DOUBLE_EQ(core.flops, 3 * 2 * 7 * 16 * 16);
  EXPECT_DOUBLE_EQ(op(f, 0, "short_conv").bytes_cache, 2 * 3 * (3 * 32 * 3 * 2));
  // A new sequence (context 0) only writes them.
  const ForwardCost fresh = forward_cost(tiny(), {3, 1, 0, DType::bf16});
  EXPECT_DOUBLE_EQ(op(fresh, 0, "kda_recurrent").bytes_cache, 3 * (2 * 16 * 16 * 4));
  EXPECT_DOUBLE_EQ(op(fresh, 0, "short_conv").bytes_cache, 3 * (3 * 32 * 3 * 2));
  // Prefill of 64 tokens: the chunk form, C = 64, per token and head 6CK + 4CV + C^2/3 + 6KV + KV/C.
  const ForwardCost p = forward_cost(tiny(), {1, 64, 0, DType::bf16});
  const double per_token = 6 * 64 * 16 + 4 * 64 * 16 + 64.0 * 64 / 3 + 6 * 16 * 16 + 16.0 * 16 / 64;
  EXPECT_DOUBLE_EQ(op(p, 0, "kda_chunk").flops, 64 * 2 * per_token);
  // The cache one sequence holds: state + conv caches (KDA) + 65 latent rows of 16 + 4 (MLA).
  EXPECT_DOUBLE_EQ(p.cache_per_seq, 2 * 16 * 16 * 4 + 3 * 32 * 3 * 2 + 64 * (16 + 4) * 2);
}

TEST(Cost, MlaLatentCacheAndAttention) {
  // Decode, 2 sequences of context 10: the context's latent rows [16 | 4] bf16 are read, each new row written.
  const ForwardCost d = forward_cost(tiny(), {2, 1, 10, DType::bf16});
  const OpCost& att = op(d, 1, "attention");
  EXPECT_EQ(att.layer_kind, "mla");
  EXPECT_DOUBLE_EQ(att.bytes_cache, 2 * 10 * (16 + 4) * 2);
  EXPECT_DOUBLE_EQ(op(d, 1, "latent_cache_write").bytes_cache, 2 * (16 + 4) * 2);
  // Absorbed: scores over [16 | 4] and the latent sum over 16, for 11 positions, per head.
  EXPECT_DOUBLE_EQ(att.flops, 2.0 * 2 * 2 * 11 * (2 * 16 + 4) + 5.0 * 2 * 2 * 11);
  EXPECT_DOUBLE_EQ(op(d, 1, "q_absorb").bytes_weights, 2 * 8 * 16 * 2);  // kv_b's key part
  EXPECT_DOUBLE_EQ(op(d, 1, "v_absorb").bytes_weights, 2 * 8 * 16 * 2);  // its value part
  // Prefill of 4 tokens: 10 causal pairs per head, q.k over 12 and a.v over 8.
  const ForwardCost p = forward_cost(tiny(), {1, 4, 0, DType::bf16});
  EXPECT_DOUBLE_EQ(op(p, 1, "attention").flops, 2.0 * 10 * 2 * (12 + 8) + 5.0 * 10 * 2);
  EXPECT_DOUBLE_EQ(op(p, 1, "kv_b_proj").bytes_weights, 2 * (8 + 8) * 16 * 2);
}

TEST(Cost, DistinctExpertsUnderUniformRouting) {
  EXPECT_DOUBLE_EQ(expected_distinct_experts(256, 8, 0), 0);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(256, 8, 1), 8);  // one token: exactly its k
  EXPECT_NEAR(expected_distinct_experts(256, 8, 2), 256 * (1 - (31.0 / 32) * (31.0 / 32)), 1e-9);  // 15.75
  EXPECT_NEAR(expected_distinct_experts(256, 8, 2), 15.75, 1e-12);
  EXPECT_NEAR(expected_distinct_experts(256, 8, 32), 163.3, 0.05);  // the batch-32 decode
  EXPECT_DOUBLE_EQ(expected_distinct_experts(16, 16, 3), 16);       // k = E: every expert
  EXPECT_NEAR(expected_distinct_experts(896, 16, 100000), 896, 1e-9);
  EXPECT_KIMI_ERROR(expected_distinct_experts(8, 9, 1), "expected_distinct_experts: argument 'top_k'",
                    "expected a value in [1, 8], got 9");
  EXPECT_KIMI_ERROR(expected_distinct_experts(8, 2, -1), "argument 'tokens': expected >= 0, got -1");
  // The MoE layer reads the touched experts' weights and computes on every token-slot.
  const ForwardCost f = forward_cost(tiny(), {2, 1, 0, DType::bf16});
  const double U = 8 * (1 - 0.75 * 0.75);
  EXPECT_DOUBLE_EQ(f.touched_experts, U);
  EXPECT_DOUBLE_EQ(f.touched_expert_fraction, U / 8);
  const OpCost& gu = op(f, 1, "experts_gate_up");
  EXPECT_EQ(gu.layer_kind, "moe");
  EXPECT_DOUBLE_EQ(gu.bytes_weights, U * 2 * 32 * 64 * 2);
  EXPECT_DOUBLE_EQ(gu.flops, 2.0 * (2 * 2) * (2 * 32) * 64);
  EXPECT_DOUBLE_EQ(op(f, 1, "shared_gate_up").bytes_weights, 2 * 32 * 64 * 2);  // the shared expert, always
}

TEST(Cost, Mxfp4ExpertBytes) {
  EXPECT_DOUBLE_EQ(expert_weight_bytes({DType::bf16, true}), 4.25 / 8);
  EXPECT_DOUBLE_EQ(expert_weight_bytes({DType::bf16, false}), 2);
  const ForwardCost f = forward_cost(tiny(), {1, 1, 0, DType::bf16}, {DType::bf16, true});
  // One token: its 2 experts; w1 and w3 [32, 64] as nibbles + one scale byte per 32 weights.
  EXPECT_DOUBLE_EQ(op(f, 1, "experts_gate_up").bytes_weights, 2 * 2 * (32 * 64 / 2 + 32 * 64 / 32));
  EXPECT_DOUBLE_EQ(op(f, 1, "experts_down").bytes_weights, 2 * (64 * 32 / 2 + 64 * 32 / 32));
  EXPECT_DOUBLE_EQ(op(f, 1, "q_proj").bytes_weights, 2 * 12 * 64 * 2);  // the rest stays bf16
  // The K3 layout stores experts as MXFP4 by default, Kimi-Linear as bf16.
  EXPECT_TRUE(default_weight_format(named_config("k3-tiny")).mxfp4_experts);
  EXPECT_FALSE(default_weight_format(named_config("kimi-linear-tiny")).mxfp4_experts);
}

TEST(Cost, StoredWeightsAreTheSchemasBytes) {
  for (const char* name : {"k3-tiny", "kimi-linear-tiny", "k3-slice"}) {
    const Config c = named_config(name);
    for (bool mxfp4 : {false, true}) {
      const ForwardCost f = forward_cost(c, {1, 1, 0, DType::bf16}, {DType::bf16, mxfp4});
      EXPECT_DOUBLE_EQ(f.weights_resident, schema_bytes(c, mxfp4, 1, -1)) << name << (mxfp4 ? " mxfp4" : " bf16");
    }
  }
  const Config kl = from_file("kimi-linear-48b-a3b.json");
  const double kl_bytes = forward_cost(kl, {1, 1, 0, DType::bf16}).weights_resident;
  EXPECT_DOUBLE_EQ(kl_bytes, schema_bytes(kl, false, 1, -1));
  EXPECT_NEAR(kl_bytes / 1e9, 98.3, 0.1);  // "~98 GB bf16" (issue 23): 49.1 B parameters
  const Config k3 = from_file("k3.json");
  const double k3_bytes = forward_cost(k3, {1, 1, 0, DType::bf16}).weights_resident;
  EXPECT_DOUBLE_EQ(k3_bytes, schema_bytes(k3, true, 1, -1));
  EXPECT_NEAR(k3_bytes / 1e12, 1.56, 0.005);  // "Full K3 is 1.56 TB on disk" (SPEC 1)
}

// Decode at batch 1 reads every weight of the step once: everything but the routed experts, k of E experts per
// MoE layer, one embedding row, the whole lm_head.
TEST(Cost, KimiLinearSliceActiveWeightsPerDecodeToken) {
  const Config c = from_file("kimi-linear-48b-slice.json");
  const ForwardCost f = forward_cost(c, {1, 1, 0, DType::bf16});
  EXPECT_DOUBLE_EQ(f.touched_experts, 8);
  EXPECT_DOUBLE_EQ(f.bytes_weights, schema_bytes(c, false, 8.0 / 256, 1));
  // Issue 23: "1.56 GB of active bf16 weights per step" = 782 M active parameters without the embedding (BENCH.md)
  // in bf16, plus the fp32 parameters' other two bytes and one embedding row.
  EXPECT_NEAR(f.bytes_weights / 1e9, 1.564, 0.001);
  // Batch 32: the expected distinct experts (163.3 of 256) per MoE layer, 32 embedding rows, the rest once.
  const ForwardCost b32 = forward_cost(c, {32, 1, 128, DType::bf16});
  const double U = 256 * (1 - std::pow(1 - 8.0 / 256, 32));
  EXPECT_DOUBLE_EQ(b32.touched_experts, U);
  EXPECT_NEAR(b32.bytes_weights, schema_bytes(c, false, U / 256, 32), 1e-12 * b32.bytes_weights);  // summation order
  // The full model: 27 layers.
  const ForwardCost full = forward_cost(from_file("kimi-linear-48b-a3b.json"), {1, 1, 0, DType::bf16});
  EXPECT_DOUBLE_EQ(full.bytes_weights, schema_bytes(from_file("kimi-linear-48b-a3b.json"), false, 8.0 / 256, 1));
}

TEST(Cost, AttnResCandidates) {
  // k3-tiny: block 4, 9 layers: blocks sealed at layers 0, 4, 8; the output mixes 3 blocks + the partial sum.
  const Config c = named_config("k3-tiny");
  const ForwardCost f = forward_cost(c, {2, 1, 0, DType::bf16});
  EXPECT_DOUBLE_EQ(op(f, -1, "attn_res_output").flops, 7.0 * 4 * 2 * 256);
  EXPECT_DOUBLE_EQ(op(f, 0, "attn_res_ffn").flops, 7.0 * 2 * 2 * 256);    // the embedding's block + the mixer
  EXPECT_DOUBLE_EQ(op(f, 5, "attn_res_mixer").flops, 7.0 * 3 * 2 * 256);  // blocks of layers 0 and 4
  // K3: 9 candidates at the output (SPEC 8).
  const ForwardCost k3 = forward_cost(from_file("k3.json"), {1, 1, 0, DType::bf16});
  EXPECT_DOUBLE_EQ(op(k3, -1, "attn_res_output").flops, 7.0 * 9 * 7168);
}

TEST(Cost, TotalsAreTheSumOfOps) {
  const ForwardCost f = forward_cost(named_config("k3-tiny"), {4, 33, 100, DType::bf16});
  double w = 0, a = 0, cache = 0, fl = 0;
  for (const OpCost& o : f.ops) {
    w += o.bytes_weights;
    a += o.bytes_activations;
    cache += o.bytes_cache;
    fl += o.flops;
  }
  EXPECT_DOUBLE_EQ(f.bytes_weights, w);
  EXPECT_DOUBLE_EQ(f.bytes_activations, a);
  EXPECT_DOUBLE_EQ(f.bytes_cache, cache);
  EXPECT_DOUBLE_EQ(f.flops, fl);
  EXPECT_EQ(f.tokens(), 4 * 33);
}

TEST(Cost, RooflinePrediction) {
  ForwardCost f;
  f.workload = {4, 1, 0, DType::bf16};
  f.ops = {{"kda", "a", 0, 1e9, 0, 0, 1e9}, {"moe", "b", 0, 0, 5e5, 5e5, 1e13}};
  const Chip chip{"test", 1e12, 1e15, 0, ""};
  const Prediction p = predict(f, chip);
  ASSERT_EQ(p.ops.size(), 2u);
  EXPECT_DOUBLE_EQ(p.ops[0].seconds, 1e-3);  // 1 GB at 1 TB/s
  EXPECT_FALSE(p.ops[0].compute_bound);
  EXPECT_DOUBLE_EQ(p.ops[1].seconds, 1e-2);  // 10 TFLOP at 1 PFLOP/s
  EXPECT_TRUE(p.ops[1].compute_bound);
  EXPECT_DOUBLE_EQ(p.seconds, 1.1e-2);
  EXPECT_DOUBLE_EQ(p.memory_seconds, 1e-3 + 1e-6);
  EXPECT_DOUBLE_EQ(p.compute_seconds, 1e-6 + 1e-2);
  EXPECT_DOUBLE_EQ(p.steps_per_s, 1 / 1.1e-2);
  EXPECT_DOUBLE_EQ(p.tokens_per_s, 4 / 1.1e-2);
  f.bytes_weights = 2e9;
  EXPECT_DOUBLE_EQ(bandwidth_for(f, 50), 1e11);  // 2 GB per step x 50 steps/s
}

TEST(Cost, Chips) {
  const Chip& h200 = named_chip("h200");
  EXPECT_DOUBLE_EQ(h200.hbm_bytes_per_s, 4.25e12);  // BENCH.md: measured copy bandwidth
  EXPECT_DOUBLE_EQ(h200.bf16_flops_per_s, 691e12);  // BENCH.md: measured bf16 GEMM
  EXPECT_EQ(named_chips().size(), 3u);
  EXPECT_EQ(testutil::error_message_of([] { named_chip("a100"); }),
            "named_chip: expected h200, h100 or b200, got 'a100'");
  EXPECT_EQ(testutil::error_message_of([] { predict(ForwardCost{}, Chip{"zero", 0, 1e15, 0, ""}); }),
            "predict: chip 'zero': expected hbm_bytes_per_s > 0 (finite), got 0");
}

TEST(Cost, BadWorkloads) {
  const Config c = tiny();
  EXPECT_EQ(testutil::error_message_of([&] { forward_cost(c, {0, 1, 0, DType::bf16}); }),
            "forward_cost: argument 'workload.batch': expected >= 1, got 0");
  EXPECT_EQ(testutil::error_message_of([&] { forward_cost(c, {1, 0, 0, DType::bf16}); }),
            "forward_cost: argument 'workload.new_tokens_per_seq': expected >= 1, got 0");
  EXPECT_EQ(testutil::error_message_of([&] { forward_cost(c, {1, 1, -1, DType::bf16}); }),
            "forward_cost: argument 'workload.context': expected >= 0, got -1");
  EXPECT_EQ(testutil::error_message_of([&] { forward_cost(c, {1, 1, 0, DType::i32}); }),
            "forward_cost: argument 'workload.activations': expected f32, bf16 or f16, got i32");
  Config odd = tiny();
  odd.moe_intermediate_size = 48;
  EXPECT_EQ(testutil::error_message_of([&] { forward_cost(odd, {1, 1, 0, DType::bf16}, {DType::bf16, true}); }),
            "forward_cost: argument 'weights.mxfp4_experts': expected expert widths divisible by 32 (MXFP4 scales 32 "
            "weights), got latent 64 and moe_intermediate_size 48");
}

}  // namespace
}  // namespace kimi::model
