// Implementation of kimi/model/cost_ep.h: one rank's step under expert parallelism (the formulas are in the
// header).
#include "kimi/model/cost_ep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "kimi/error.h"

namespace kimi::model {
namespace {

bool is_routed_expert_op(const std::string& op) {
  return op == "experts_gate_up" || op == "experts_glu" || op == "experts_down";
}

std::string num(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%g", v);
  return s;
}

}  // namespace

EpCost ep_cost(const Config& c, const EpWorkload& w, const WeightFormat& f, const Links& links) {
  auto fail = [](const std::string& field, const std::string& expected, const std::string& got) {
    throw Error("ep_cost: argument '" + field + "': expected " + expected + ", got " + got);
  };
  if (c.num_experts < 1) fail("config.num_experts", ">= 1 (expert parallelism needs routed experts)", "0");
  const int64_t E = c.num_experts, N = w.ranks;
  if (N < 1 || N > E)
    fail("ranks", "an integer in [1, " + std::to_string(E) + "] (the routed experts)", std::to_string(N));
  if (w.redundant_experts < 0) fail("redundant_experts", ">= 0", std::to_string(w.redundant_experts));
  if (!is_float(w.rows)) fail("rows", "f32, bf16 or f16", std::string(dtype_name(w.rows)));
  if (links.gpus_per_node < 1) fail("links.gpus_per_node", ">= 1", std::to_string(links.gpus_per_node));

  EpCost out;
  out.workload = w;
  out.rank = forward_cost(c, w.per_rank, f);  // validates the per-rank workload and the weight format
  ForwardCost& r = out.rank;

  const double k = double(c.num_experts_per_token), I = double(c.moe_intermediate_size);
  const double dl = double(c.routed_expert_hidden_size.value_or(c.hidden_size));
  const double e = expert_weight_bytes(f), per_expert = 3 * I * dl * e;  // gate, up [I, dl] and down [dl, I]
  const double Mr = double(r.tokens());
  out.expert_slots = (E + N - 1) / N + (w.redundant_experts + N - 1) / N;
  out.pairs_per_rank = Mr * k;
  out.touched_slots = double(out.expert_slots) * (1 - std::pow(1 - k / double(E), double(N) * Mr));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) out.moe_layers += c.is_moe_layer(i) ? 1 : 0;
  out.rank_layers = c.num_hidden_layers;

  // The rank's routed-expert weights: its touched slots, not the step's touched experts.
  r.bytes_weights = 0;
  for (OpCost& o : r.ops) {
    if (o.op == "experts_gate_up") o.bytes_weights = out.touched_slots * 2 * I * dl * e;
    if (o.op == "experts_down") o.bytes_weights = out.touched_slots * dl * I * e;
    r.bytes_weights += o.bytes_weights;
  }
  r.touched_experts = out.touched_slots;
  r.touched_expert_fraction = out.touched_slots / double(out.expert_slots);
  out.weights_resident =
      r.weights_resident - double(out.moe_layers) * (double(E) - double(out.expert_slots)) * per_expert;
  r.weights_resident = out.weights_resident;
  out.cache = double(w.per_rank.batch) * r.cache_per_seq;

  // Communication of the worst rank: the one in the smallest node.
  const int64_t G = links.gpus_per_node;
  const int64_t g = N <= G ? N : (N % G == 0 ? G : N % G);
  out.node_gpus = g;
  const double row = dl * double(dtype_size(w.rows)), Nd = double(N);
  EpComm& m = out.comm;
  m.allgather_nvlink = double(g - 1) * double(E) * 8;
  m.allgather_ib = double(N - g) * double(E) * 8;
  m.dispatch_nvlink = m.combine_nvlink = Mr * k * row * double(g - 1) / Nd;
  m.dispatch_ib = m.combine_ib = Mr * k * row * double(N - g) / Nd;
  return out;
}

EpPrediction predict_ep(const EpCost& cost, const Chip& chip, const Links& links) {
  for (const auto& [field, v] : {std::pair{"nvlink_bytes_per_s", links.nvlink_bytes_per_s},
                                 std::pair{"ib_bytes_per_s", links.ib_bytes_per_s}})
    if (!(v > 0) || !std::isfinite(v))
      throw Error(std::string("predict_ep: argument 'links.") + field + "': expected > 0 (finite), got " +
                  num(v));
  const Prediction p = predict(cost.rank, chip);
  const EpComm& m = cost.comm;
  auto link_time = [&](double nv, double ib) {
    return std::max(nv / links.nvlink_bytes_per_s, ib / links.ib_bytes_per_s);
  };
  const double ag = link_time(m.allgather_nvlink, m.allgather_ib);
  const double dispatch = link_time(m.dispatch_nvlink, m.dispatch_ib);
  const double combine = link_time(m.combine_nvlink, m.combine_ib);
  const double per_layer = ag + dispatch + combine;
  const double L = double(cost.moe_layers);

  EpPrediction out;
  out.compute_seconds = p.seconds;
  out.allgather_seconds = L * ag;
  out.dispatch_seconds = L * dispatch;
  out.combine_seconds = L * combine;
  out.nvlink_seconds = m.nvlink() / links.nvlink_bytes_per_s;
  out.ib_seconds = m.ib() / links.ib_bytes_per_s;
  out.step_seconds = p.seconds + L * per_layer;

  // Overlap: per MoE layer, the time of its ops other than the routed experts hides the communication.
  const ForwardCost& r = cost.rank;
  out.layers.resize(size_t(cost.rank_layers));
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const OpCost& o = r.ops[i];
    if (o.layer < 0) continue;
    EpLayerTime& t = out.layers[size_t(o.layer)];
    t.compute += p.ops[i].seconds;
    if (is_routed_expert_op(o.op)) {
      t.comm = per_layer;
    } else {
      t.hideable += p.ops[i].seconds;
    }
  }
  out.step_overlap_seconds = p.seconds;
  for (EpLayerTime& t : out.layers) {
    t.overlap = t.compute + std::max(0.0, t.comm - t.hideable);
    out.step_overlap_seconds += t.overlap - t.compute;
  }

  const double tokens = double(r.tokens()), ranks = double(cost.workload.ranks);
  out.tokens_per_s_per_gpu = tokens / out.step_seconds;
  out.tokens_per_s_overlap_per_gpu = tokens / out.step_overlap_seconds;
  out.tokens_per_s_total = ranks * out.tokens_per_s_per_gpu;
  out.tokens_per_s_overlap_total = ranks * out.tokens_per_s_overlap_per_gpu;
  return out;
}

}  // namespace kimi::model
