// kimi/model/cost_ep.h: the cost model of one step under expert parallelism (EP) over N ranks (one GPU
// each), from the single-device model (kimi/model/cost.h) and the dispatch / combine volumes.
// `kimi plan --ep` prints it; docs/model/cost_model.md has the tables.
//
// Layout (issue 26, MoonEP, SPEC 9): attention, shared experts, dense FFNs, embedding and head are data
// parallel (replicated weights; every rank runs its own B_r sequences); the E routed experts are dealt over
// the N ranks (floor/ceil: ceil(E/N) on the fullest rank) plus R redundant replica slots (ceil(R/N) each).
// Per MoE layer:
//   all-gather of per-expert counts: each rank receives the E int64 counts of the N-1 others;
//   dispatch: each of the rank's M_r = B_r*T tokens sends its k rows of the routed input z (width Dl: the
//     latent, routed_expert_hidden_size, K3 section 7; else hidden) to its experts' ranks, `rows` dtype;
//   combine: the k expert outputs come back (same width and dtype): the same volume.
// Perfect balance (the planner's promise): every rank computes exactly P/N = M_r*k pairs (P = N*M_r*k), so
// its routed FLOPs and activation bytes equal the single-device model's at batch B_r.
// Uniform routing: a fraction (N-1)/N of the rows leaves the rank. Ranks fill nodes of G GPUs; the worst
// rank sits in the smallest node, of g = min(G, N) ranks, or N mod G when the last node is partial; of the
// rows that leave, (g-1)/(N-1) stay on NVLink and (N-g)/(N-1) cross IB. With row = Dl * dtype bytes:
//   all-gather  NVLink (g-1)*E*8           IB (N-g)*E*8
//   dispatch    NVLink M_r*k*row*(g-1)/N   IB M_r*k*row*(N-g)/N      combine: the same as dispatch
// Links are full duplex (bandwidths per direction per GPU) and NVLink and IB run side by side: a collective
// takes max(NVLink bytes / NVLink bw, IB bytes / IB bw).
// Routed weights read per rank and MoE layer: its touched slots. An expert escapes all N*M_r tokens of the
// step with probability (1 - k/E)^(N*M_r) (as cost.h), so
//   U_r = slots_r * (1 - (1 - k/E)^(N*M_r)),   slots_r = ceil(E/N) + ceil(R/N)
// (replicas are touched as their originals are; hot experts make U_r a floor). Everything else is the
// single-device model at batch B_r; N = 1 is exactly forward_cost's step, with no communication.
// Time (Chip roofline, predict()): compute = sum over the rank's ops of max(bytes/HBM, FLOPs/peak);
//   no overlap:   step = compute + sum over MoE layers of (all-gather + dispatch + combine);
//   full overlap: per MoE layer the communication hides behind the layer's ops other than the routed experts
//                 (mixer, norms, router, latent projections, shared expert: two-batch overlap):
//                 step = compute + sum over MoE layers of max(0, comm - those ops' time).
// Memory per rank: replicated non-routed weights + slots_r experts per MoE layer; caches of its sequences.
// Not counted: link latency, launch and synchronisation costs, the static dispatch buffers, load imbalance.
#pragma once

#include <cstdint>
#include <vector>

#include "kimi/model/cost.h"

namespace kimi::model {

struct Links {
  double nvlink_bytes_per_s = 450e9;  // per GPU per direction in a node (H200 NVLink 4: 900 GB/s both ways)
  double ib_bytes_per_s = 50e9;       // per GPU per direction between nodes (InfiniBand NDR 400 Gb/s)
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
  ForwardCost rank;             // one rank's step: routed-expert weight bytes of its touched slots only
  int64_t rank_layers = 0;      // decoder layers
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
  double hideable = 0;  // of which the ops other than the routed experts (overlap hides comm behind them)
  double comm = 0;     // all-gather + dispatch + combine (0 outside MoE layers)
  double overlap = 0;  // compute + max(0, comm - hideable)
};

struct EpPrediction {
  double compute_seconds = 0;    // roofline over the rank's ops
  double allgather_seconds = 0;  // summed over MoE layers
  double dispatch_seconds = 0, combine_seconds = 0;
  // Per MoE layer: the bytes of its all-gather + dispatch + combine on each link over that link's bandwidth.
  double nvlink_seconds = 0, ib_seconds = 0;
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
