// dist/moe.h: the latent MoE block (SPEC 7, kimi::latent_moe) under expert parallelism.
// Two forms behind one class: host-memory comms (loopback, MPI) run the CPU step below on host tensors; a
// device-memory comm (NCCL) runs the CUDA step on CUDA tensors and weights (dist/moe_cuda.h: the same plan and
// layouts; any_rank computes them on the device, with no host sync; holders_only on the host after one small D2H
// copy and stream sync per step).
//
// Every rank runs data-parallel on its own T_r <= S tokens x [T_r, d]; one step is (docs/ep.md):
//   1. route locally: logits = x W_r^T, (ids, w) = moe_router(logits)         ids/w [T_r, K]
//   2. z = W_ld x (latent) or x                                               z [T_r, Dl] f32
//   3. all_gather the per-expert counts [E] -> [N, E]; plan_step (same plan on every rank)
//   4. dispatch: send rows z[slot / K] in the dispatch layout; all_to_all_v   send/recv [S*K, Dl] f32 (static)
//   5. group received rows by local expert (grouped [load, Dl]); Expert_e over each group
//   6. combine: the outputs travel back (all_to_all_v with the counts swapped) to their source slots
//   7. y[t] = sum_k w_tk out_tk, summed in ascending expert order (latent_moe's order), RMSNorm_latent, W_lu,
//      + Shared(x) (local), rounded once to out's dtype.
// The row buffers are allocated once at construction ([S*K, Dl] f32 x 4: send, receive, grouped, back) and never
// grow; a step also allocates its plan and layouts (O(N*E + S*K)) and its local temporaries (O(T*(E + Dl + d))).
// Equality with the single-process latent_moe over the concatenated tokens: the same f32 operations per row
// (tests/dist: within 1e-6 in fp32).
// Weights (the plan policy, dist/planner.h):
//   any_rank      every rank keeps all E experts (any rank may compute any expert's share); only the experts in
//                 placement.held_by(rank) + this step's replica shares are read. Receive buffers [S*K, Dl].
//   holders_only  this rank keeps only placement.held_by(rank) (w.experts[e] may be absent for the others: they are
//                 never read nor kept); the plan computes each expert on its holders only (max load = the
//                 restricted optimum L*). Receive buffers [min(N*S*K, N*S*|held|), Dl]: a rank's load is at most
//                 the pairs of its experts, each expert at most one pair per token of every rank (c_e <= N*S).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "dist/planner.h"
#include "kimi/ops/moe.h"

namespace kimi::dist {

class EpMoeCudaStep;  // moe_cuda.h

struct EpStepStats {
  std::vector<int64_t> home_load, load;  // [N] pairs homed / computed per rank this step
  int64_t total_pairs = 0, moved_pairs = 0, moved_segments = 0;
  // This rank's wall time (seconds) in: routing + latent, counts + plan + layouts, dispatch (pack + all_to_all_v),
  // experts (grouping + MLPs), combine (all_to_all_v + weighted sum), tail (norm, up-projection, shared expert).
  double route_s = 0, plan_s = 0, dispatch_s = 0, expert_s = 0, combine_s = 0, tail_s = 0;
};

class EpMoe {
 public:
  // Collective. Validates the weights (as latent_moe does) and that every rank was given the same
  // configuration (widths, experts, top_k, router / activation parameters, eps, S, placement): a mismatch throws
  // kimi::Error on every rank, naming the field and the ranks' values. placement.ranks must equal comm.size().
  // policy: every rank must pass the same (compared with the configuration). A device-memory comm (NCCL) needs every
  // weight on one CUDA device (the comm's), and allocates the CUDA step's static buffers (moe_cuda.h) here.
  EpMoe(Comm& comm, Placement placement, const LatentMoeWeights& w, const RouterParams& router,
        const GluParams& act, float norm_eps, int64_t max_tokens, PlanPolicy policy = PlanPolicy::any_rank);
  ~EpMoe();

  // Collective. x [T, d] (T <= max_tokens, f32/bf16/f16), out [T, d] (may alias x); ids / weights optional
  // outputs i32 / f32 [T, K] (the local routing). Host tensors with a host-memory comm; CUDA tensors on the
  // weights' device with a device-memory comm (enqueued on comm.cuda_stream(): ctx.cuda_stream must be null or that
  // stream; the results are ready for later work on it). A tensor on the other side is an error naming it.
  // Argument errors are thrown on the offending rank alone, before any collective: the other ranks then wait in
  // the step's first collective, so the caller ends the job (Comm::abort) on any error.
  // ctx: the CPU threads of the local operators (the model's Context).
  void forward(TensorView x, TensorView out, TensorView ids = {}, TensorView weights = {},
               EpStepStats* stats = nullptr, const Context& ctx = {});

  int64_t max_tokens() const { return s_; }
  int64_t width() const { return dl_; }
  int64_t hidden() const { return d_; }
  PlanPolicy policy() const { return policy_; }
  // The experts this rank keeps (ascending) and their weight bytes (w, and MXFP4 scales, of gate / up / down).
  const std::vector<int32_t>& resident_experts() const { return resident_; }
  int64_t resident_expert_bytes() const { return resident_bytes_; }

 private:
  Comm& comm_;
  Placement placement_;
  LatentMoeWeights w_;
  RouterParams router_;
  GluParams act_;
  float eps_;
  int64_t s_, d_, dl_;
  int e_, k_;
  PlanPolicy policy_;
  std::vector<MlpWeights> experts_;  // [E]; absent for experts this rank does not keep
  std::vector<int32_t> resident_;
  int64_t resident_bytes_ = 0, recv_cap_ = 0;
  std::vector<float> send_;                   // static [S*K, Dl] f32
  std::vector<float> recv_, grouped_, back_;  // static [recv_cap, Dl], [recv_cap, Dl], [max(recv_cap, S*K), Dl]
  std::unique_ptr<EpMoeCudaStep> cuda_;       // the CUDA step (device-memory comm), else null
};

// The fields EpMoe compares across ranks (name, value), in order; exposed for the tests.
std::vector<std::pair<std::string, int64_t>> ep_config_fields(const Placement& placement, const LatentMoeWeights& w,
                                                              const RouterParams& router, const GluParams& act,
                                                              float norm_eps, int64_t max_tokens,
                                                              PlanPolicy policy = PlanPolicy::any_rank);

// Bytes of one expert's weights (w and scales of gate, up, down; 0 when absent).
int64_t expert_bytes(const MlpWeights& w);

}  // namespace kimi::dist
