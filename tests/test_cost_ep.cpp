// kimi/model/cost_ep.h: the expert-parallel step against byte counts worked by hand on a tiny config, N = 1
// against the one-device model, monotonic properties on K3 (more link bandwidth is never slower), and
// argument errors.
#include <gtest/gtest.h>

#include <cmath>

#include "cost_testutil.h"
#include "expect_error.h"
#include "kimi/model/cost_ep.h"

namespace kimi::model {
namespace {

// test_cost.cpp's tiny config (cost_testutil.h): layer 0 = KDA + dense FFN, layer 1 = MLA + MoE; d 64 (no latent:
// rows are 64 wide), 8 experts top-2 of moe_intermediate 32, 1 shared.
Config tiny() { return kimi::testutil::tiny_cost_config(); }

const WeightFormat kBf16{DType::bf16, false};
const Workload kDecode3{3, 1, 10, DType::bf16};  // 3 sequences per rank, 10 tokens cached

double op_weights(const ForwardCost& f, const std::string& name) {
  for (const OpCost& o : f.ops)
    if (o.op == name) return o.bytes_weights;
  ADD_FAILURE() << "no op " << name;
  return 0;
}

TEST(CostEp, VolumesByHand) {
  // N = 4 ranks in nodes of 2: the worst rank has 1 NVLink peer and 2 IB peers. M_r = 3 tokens x k = 2 rows
  // of 64 bf16 = 128 bytes: 6 rows, 3/4 leave; NVLink 6*128*1/4 = 192 bytes, IB 6*128*2/4 = 384 bytes.
  const EpCost c = ep_cost(tiny(), {4, kDecode3, 0, DType::bf16}, kBf16, {100, 10, 2});
  EXPECT_EQ(c.moe_layers, 1);
  EXPECT_EQ(c.expert_slots, 2);
  EXPECT_EQ(c.node_gpus, 2);
  EXPECT_DOUBLE_EQ(c.pairs_per_rank, 6);
  EXPECT_DOUBLE_EQ(c.comm.dispatch_nvlink, 192);
  EXPECT_DOUBLE_EQ(c.comm.dispatch_ib, 384);
  EXPECT_DOUBLE_EQ(c.comm.combine_nvlink, 192);
  EXPECT_DOUBLE_EQ(c.comm.combine_ib, 384);
  EXPECT_DOUBLE_EQ(c.comm.allgather_nvlink, 1 * 8 * 8);  // one peer's 8 int64 counts
  EXPECT_DOUBLE_EQ(c.comm.allgather_ib, 2 * 8 * 8);
  // 12 tokens in the step: each slot is touched with probability 1 - (6/8)^12.
  const double touched = 2 * (1 - std::pow(0.75, 12));
  EXPECT_DOUBLE_EQ(c.touched_slots, touched);
  EXPECT_DOUBLE_EQ(op_weights(c.rank, "experts_gate_up"), touched * 2 * 32 * 64 * 2);
  EXPECT_DOUBLE_EQ(op_weights(c.rank, "experts_down"), touched * 64 * 32 * 2);
  // Stored: the one-device weights less 6 of the 8 experts (3 * 32 * 64 bf16 each).
  const ForwardCost one = forward_cost(tiny(), kDecode3, kBf16);
  EXPECT_DOUBLE_EQ(c.weights_resident, one.weights_resident - 6 * 3 * 32 * 64 * 2);
  EXPECT_DOUBLE_EQ(c.cache, 3 * one.cache_per_seq);
  // Perfect balance: the rank computes M_r * k pairs, so its FLOPs are the one-device step's at batch B_r.
  EXPECT_DOUBLE_EQ(c.rank.flops, one.flops);
  EXPECT_DOUBLE_EQ(c.rank.bytes_activations, one.bytes_activations);

  // Times: NVLink 100 B/s, IB 10 B/s side by side: dispatch = combine = max(1.92, 38.4), all-gather
  // max(0.64, 12.8).
  const Chip chip{"t", 1e12, 1e15, 0, ""};
  const EpPrediction p = predict_ep(c, chip, {100, 10, 2});
  const Prediction base = predict(c.rank, chip);
  EXPECT_DOUBLE_EQ(p.compute_seconds, base.seconds);
  EXPECT_DOUBLE_EQ(p.dispatch_seconds, 38.4);
  EXPECT_DOUBLE_EQ(p.combine_seconds, 38.4);
  EXPECT_DOUBLE_EQ(p.allgather_seconds, 12.8);
  EXPECT_DOUBLE_EQ(p.nvlink_seconds, (64 + 192 + 192) / 100.0);
  EXPECT_DOUBLE_EQ(p.ib_seconds, (128 + 384 + 384) / 10.0);
  EXPECT_DOUBLE_EQ(p.step_seconds, base.seconds + 89.6);
  // Overlap hides at most the MoE layer's other ops (far below 89.6 s here).
  double other = 0;
  for (size_t i = 0; i < c.rank.ops.size(); ++i) {
    const OpCost& o = c.rank.ops[i];
    if (o.layer == 1 && o.op.rfind("experts_", 0) != 0) other += base.ops[i].seconds;
  }
  EXPECT_GT(other, 0);
  EXPECT_DOUBLE_EQ(p.step_overlap_seconds, base.seconds + 89.6 - other);
  ASSERT_EQ(p.layers.size(), 2u);
  EXPECT_DOUBLE_EQ(p.layers[0].comm, 0);  // the KDA + dense FFN layer
  EXPECT_DOUBLE_EQ(p.layers[0].overlap, p.layers[0].compute);
  EXPECT_DOUBLE_EQ(p.layers[1].comm, 89.6);
  EXPECT_DOUBLE_EQ(p.layers[1].hideable, other);
  EXPECT_DOUBLE_EQ(p.layers[1].overlap, p.layers[1].compute + 89.6 - other);
  EXPECT_LT(p.layers[0].compute + p.layers[1].compute,
            base.seconds);  // embed and head are outside the layers
  EXPECT_DOUBLE_EQ(p.tokens_per_s_per_gpu, 3 / p.step_seconds);
  EXPECT_DOUBLE_EQ(p.tokens_per_s_total, 4 * 3 / p.step_seconds);
}

TEST(CostEp, UnevenNodesAndReplicas) {
  // N = 3 in nodes of 2: the last node holds one rank, whose rows all cross IB: 6*128*2/3 = 512 bytes.
  // Experts dealt 3/3/2: the fullest rank holds 3; 5 replicas over 3 ranks add ceil(5/3) = 2.
  const EpCost c = ep_cost(tiny(), {3, kDecode3, 5, DType::bf16}, kBf16, {100, 10, 2});
  EXPECT_EQ(c.node_gpus, 1);
  EXPECT_EQ(c.expert_slots, 5);
  EXPECT_DOUBLE_EQ(c.comm.dispatch_nvlink, 0);
  EXPECT_DOUBLE_EQ(c.comm.dispatch_ib, 512);
  EXPECT_DOUBLE_EQ(c.comm.allgather_ib, 2 * 8 * 8);
  // One node of 8 holds all 4 ranks: nothing crosses IB.
  const EpCost d = ep_cost(tiny(), {4, kDecode3, 0, DType::bf16}, kBf16, {});
  EXPECT_EQ(d.node_gpus, 4);
  EXPECT_DOUBLE_EQ(d.comm.dispatch_ib, 0);
  EXPECT_DOUBLE_EQ(d.comm.dispatch_nvlink, 6 * 128 * 3 / 4.0);
  // f32 rows double the volume.
  const EpCost f = ep_cost(tiny(), {4, kDecode3, 0, DType::f32}, kBf16, {});
  EXPECT_DOUBLE_EQ(f.comm.dispatch_nvlink, 2 * d.comm.dispatch_nvlink);
}

TEST(CostEp, OneRankIsTheOneDeviceStep) {
  const Config k3 = load_config(std::string(KIMI_FIXTURES_DIR) + "/../../configs/k3.json");
  const WeightFormat f = default_weight_format(k3);
  for (const Workload& w : {Workload{64, 1, 8192, DType::bf16}, Workload{1, 512, 0, DType::bf16}}) {
    const ForwardCost one = forward_cost(k3, w, f);
    const EpCost c = ep_cost(k3, {1, w, 0, DType::bf16}, f, {});
    EXPECT_DOUBLE_EQ(c.rank.bytes(), one.bytes());
    EXPECT_DOUBLE_EQ(c.rank.flops, one.flops);
    EXPECT_DOUBLE_EQ(c.weights_resident, one.weights_resident);
    EXPECT_DOUBLE_EQ(c.touched_slots, one.touched_experts);
    EXPECT_DOUBLE_EQ(c.comm.nvlink() + c.comm.ib(), 0);
    const EpPrediction p = predict_ep(c, named_chip("h200"), {});
    EXPECT_DOUBLE_EQ(p.step_seconds, predict(one, named_chip("h200")).seconds);
    EXPECT_DOUBLE_EQ(p.step_overlap_seconds, p.step_seconds);
  }
}

TEST(CostEp, MoreBandwidthIsNeverSlower) {
  const Config k3 = load_config(std::string(KIMI_FIXTURES_DIR) + "/../../configs/k3.json");
  const WeightFormat f = default_weight_format(k3);
  const Chip& h200 = named_chip("h200");
  for (int64_t n : {8, 16, 32, 64, 100}) {
    const EpCost c = ep_cost(k3, {n, {64, 1, 8192, DType::bf16}, 0, DType::bf16}, f, {});
    double last = INFINITY, last_nv = INFINITY;
    for (double ib : {5e9, 25e9, 50e9, 100e9, 400e9, 4000e9}) {
      const EpPrediction p = predict_ep(c, h200, {450e9, ib, 8});
      EXPECT_LE(p.step_seconds, last) << "N " << n << " ib " << ib;
      EXPECT_LE(p.step_overlap_seconds, p.step_seconds);
      EXPECT_GE(p.step_overlap_seconds, p.compute_seconds);
      last = p.step_seconds;
    }
    for (double nv : {50e9, 200e9, 450e9, 900e9}) {
      const EpPrediction p = predict_ep(c, h200, {nv, 50e9, 8});
      EXPECT_LE(p.step_seconds, last_nv) << "N " << n << " nvlink " << nv;
      last_nv = p.step_seconds;
    }
    if (n > 8) {
      EXPECT_GT(c.comm.ib(), 0);
    }
  }
  // More ranks: fewer stored weights per GPU.
  double last_w = INFINITY;
  for (int64_t n : {1, 16, 32, 64, 896}) {
    const EpCost c = ep_cost(k3, {n, {64, 1, 8192, DType::bf16}, 0, DType::bf16}, f, {});
    EXPECT_LT(c.weights_resident, last_w);
    last_w = c.weights_resident;
  }
}

TEST(CostEp, Errors) {
  const Config c = tiny();
  EXPECT_KIMI_ERROR(ep_cost(c, {0, kDecode3, 0, DType::bf16}, kBf16, {}), "argument 'ranks'", "[1, 8]",
                    "got 0");
  EXPECT_KIMI_ERROR(ep_cost(c, {9, kDecode3, 0, DType::bf16}, kBf16, {}), "argument 'ranks'", "[1, 8]",
                    "got 9");
  EXPECT_KIMI_ERROR(ep_cost(c, {2, kDecode3, -1, DType::bf16}, kBf16, {}), "'redundant_experts'", ">= 0",
                    "got -1");
  EXPECT_KIMI_ERROR(ep_cost(c, {2, kDecode3, 0, DType::i32}, kBf16, {}), "'rows'", "bf16");
  EXPECT_KIMI_ERROR(ep_cost(c, {2, kDecode3, 0, DType::bf16}, kBf16, {1, 1, 0}), "'links.gpus_per_node'",
                    "got 0");
  EXPECT_KIMI_ERROR(ep_cost(c, {2, {0, 1, 0, DType::bf16}, 0, DType::bf16}, kBf16, {}), "workload.batch");
  Config dense = c;
  dense.num_experts = 0;
  EXPECT_KIMI_ERROR(ep_cost(dense, {1, kDecode3, 0, DType::bf16}, kBf16, {}), "'config.num_experts'",
                    "routed experts");
  const EpCost ok = ep_cost(c, {2, kDecode3, 0, DType::bf16}, kBf16, {});
  const Chip& h200 = named_chip("h200");
  EXPECT_KIMI_ERROR(predict_ep(ok, h200, {0, 50e9, 8}), "'links.nvlink_bytes_per_s'", "> 0", "got 0");
  EXPECT_KIMI_ERROR(predict_ep(ok, h200, {450e9, -1, 8}), "'links.ib_bytes_per_s'", "got -1");
}

}  // namespace
}  // namespace kimi::model
