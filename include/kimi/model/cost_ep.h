// kimi/model/cost_ep.h: the cost model of one step under expert parallelism (EP) over N ranks (one GPU each),
// from the single-device model (kimi/model/cost.h) and the dispatch / combine volumes. `kimi plan --ep`
// prints it.
//
// Layout (issue 26, MoonEP, SPEC 9): attention, shared experts, dense FFNs, embedding and head are data
// parallel (replicated weights; every rank runs its own B_r sequences); the E routed experts are dealt over
// the N ranks (floor/ceil: ceil(E/N) on the fullest rank) plus R redundant replica slots (ceil(R/N) per
// rank). Per MoE layer:
//   all-gather of per-expert counts: every rank sends its E int64 counts to the N-1 others: (N-1)*E*8 bytes
//   in; dispatch: each of the rank's M_r = B_r*T tokens sends its k rows of the routed input z (the latent,
//   width
//     Dl = routed_expert_hidden_size, K3 section 7; else hidden) to the ranks of its experts, rows of
//     `row_bytes` (bf16: 2 bytes per element); combine returns the k expert outputs (same width, same dtype):
//     the same volume.
// Perfect balance (the planner's promise): every rank computes exactly P/N = M_r*k pairs (P = N*M_r*k), so
// the routed FLOPs and activation bytes per rank equal the single-device model's at batch B_r. Uniform
// routing: a fraction (N-1)/N of the rows leaves the rank; ranks fill nodes of G GPUs (the last node may hold
// fewer, g_min); the worst rank, in the smallest node, sends (g_min-1)/(N-1) of them over NVLink and
// (N-g_min)/(N-1) over IB:
//   rows_out = M_r*k*(N-1)/N; nvlink bytes = M_r*k*row*(g-1)/N; ib bytes = M_r*k*row*(N-g)/N   (g = g_min)
// Links are full duplex (bandwidths per direction per GPU) and NVLink and IB run side by side, so a
// collective takes max(nvlink bytes / nvlink bw, ib bytes / ib bw). Weights read per rank and MoE layer: the
// routed experts its tokens' pairs touch among its slots. Under uniform routing an expert escapes all M =
// N*M_r tokens of the step with probability (1 - k/E)^M (as cost.h), so
//   touched per rank U_r = slots_r * (1 - (1 - k/E)^(N*M_r)),  slots_r = ceil(E/N) + ceil(R/N)
// (replicas are touched as their originals are; hot experts make that a floor). Everything else is the
// single-device model at batch B_r. N = 1: exactly forward_cost's step and no communication.
// Time (Chip roofline, predict()): compute per layer = sum over its ops of max(bytes/HBM, FLOPs/peak);
//   no overlap:   step = compute + sum over MoE layers of (all-gather + dispatch + combine);
//   full overlap: per MoE layer, communication hides behind the layer's ops other than the routed experts
//                 (mixer, norms, router, shared expert: two-batch overlap): + max(0, comm - other ops' time).
// Memory per rank: replicated non-routed weights + slots_r experts per MoE layer; cache of its B_r sequences.
// Not counted: link latency, launch and synchronisation costs, the static dispatch buffers, load imbalance.
#pragma once

#include <cstdint>
#include <vector>

#include "kimi/model/cost.h"

namespace kimi::model {

struct Links {
  double nvlink_bytes_per_s =
      450e9;                     // per GPU per direction inside a node (H200 NVLink 4: 900 GB/s both ways)
  double ib_bytes_per_s = 50e9;  // per GPU per direction between nodes (InfiniBand NDR 400 Gb/s per GPU)
  int64_t gpus_per_node = 8;
};

struct EpWorkload {
  int64_t ranks = 1;              // N
  Workload per_rank;              // B_r sequences of T new tokens each, on every rank
  int64_t redundant_experts = 0;  // R replica slots over all ranks
  DType rows = DType::bf16;       // dispatch / combine rows
};

// Per rank per MoE layer (the worst rank: the fullest expert slots, the smallest node).
struct EpComm {
  double allgather_nvlink = 0, allgather_ib = 0;  // bytes received
  double dispatch_nvlink = 0, dispatch_ib = 0;    // bytes sent (and, by symmetry, received)
  double combine_nvlink = 0, combine_ib = 0;
  double nvlink() const { return allgather_nvlink + dispatch_nvlink + combine_nvlink; }
  double ib() const { return allgather_ib + dispatch_ib + combine_ib; }
};

struct EpCost {
  EpWorkload workload;
  ForwardCost rank;         // one rank's step: routed-expert weight bytes of its touched slots only
  int64_t rank_layers = 0;  // decoder layers
  int64_t moe_layers = 0;
  int64_t expert_slots = 0;     // routed experts held by the fullest rank: ceil(E/N) + ceil(R/N)
  double pairs_per_rank = 0;    // M_r * k
  double touched_slots = 0;     // U_r
  int64_t node_gpus = 0;        // g: ranks in the worst rank's node
  EpComm comm;                  // per MoE layer
  double weights_resident = 0;  // bytes of weights one rank stores
  double cache = 0;             // bytes of its sequences' caches after the step
  int64_t tokens_per_rank() const { return rank.tokens(); }
};

// Throws kimi::Error naming the argument: ranks in [1, E] (a config with routed experts), redundant >= 0,
// float rows, gpus_per_node >= 1, bandwidths checked by predict_ep; the per-rank workload as forward_cost.
EpCost ep_cost(const Config& c, const EpWorkload& w, const WeightFormat& f, const Links& links);

// One decoder layer's time on the rank (seconds).
struct EpLayerTime {
  double compute = 0;  // its ops' roofline
  double hideable =
      0;  // of which the ops other than the routed experts (what overlap hides communication behind)
  double comm = 0;     // all-gather + dispatch + combine (0 outside MoE layers)
  double overlap = 0;  // compute + max(0, comm - hideable)
};

struct EpPrediction {
  double compute_seconds = 0;    // roofline over the rank's ops
  double allgather_seconds = 0;  // summed over MoE layers
  double dispatch_seconds = 0, combine_seconds = 0;
  double nvlink_seconds = 0,
         ib_seconds = 0;            // per MoE layer, one all-gather + dispatch + combine on each link
  double step_seconds = 0;          // no overlap
  double step_overlap_seconds = 0;  // communication hidden behind the non-routed ops of the layer
  double tokens_per_s_per_gpu = 0;  // tokens per rank / step_seconds
  double tokens_per_s_overlap_per_gpu = 0;
  double tokens_per_s_total = 0, tokens_per_s_overlap_total = 0;
  std::vector<EpLayerTime> layers;  // decoder layers 0..L-1 (embed and head: compute_seconds less their sum)
};
// kimi::Error when a link bandwidth is not > 0 (and as predict() for the chip).
EpPrediction predict_ep(const EpCost& cost, const Chip& chip, const Links& links);

}  // namespace kimi::model
