// dist/model.h: a CPU Model's MoE layers under expert parallelism, through ForwardOptions::moe.
//
// Every rank loads the same model (all experts resident, or with holders_only only its own experts: Model's
// keep_experts filter), runs the attention / KDA / dense layers and the shared experts on its own sequences (data
// parallel), and each MoE layer's routed experts as one EpMoe step (dist/moe.h) over all ranks. Every rank must call forward with the hook for every step, in lockstep (a rank with fewer
// sequences still calls; each step's per-rank tokens <= max_tokens). The constructor is collective: it compares a
// hash of the model configuration (config_to_json) across ranks and throws on every rank when they differ, then
// builds one EpMoe per MoE layer (which compares the MoE fields and the placement).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "dist/moe.h"
#include "kimi/model/generate.h"
#include "kimi/model/model.h"

namespace kimi::dist {

// Sums over every MoE layer step since construction (this rank's view; the plan's numbers are global).
struct EpTotals {
  int64_t layer_steps = 0, pairs = 0, moved_pairs = 0, moved_segments = 0;
  double home_imbalance = 0, planned_imbalance = 0;  // sums of max / mean load over the steps with pairs
  int64_t steps_with_pairs = 0;
  std::vector<int64_t> rank_pairs;  // [N] pairs each rank computed
  double route_s = 0, plan_s = 0, dispatch_s = 0, expert_s = 0, combine_s = 0, tail_s = 0;  // this rank
};

class EpModel {
 public:
  // placement: round-robin over comm.size() ranks when absent. ctx: the CPU threads of the EP steps' local
  // operators (give the one the model's forward / generate gets). policy: any_rank (every expert kept on every
  // rank) or holders_only (each rank keeps and computes only placement.held_by(rank); the model's other experts are
  // never read, and may be absent from it).
  EpModel(Comm& comm, const model::Model& model, int64_t max_tokens, const Placement* placement = nullptr,
          const Context& ctx = {}, PlanPolicy policy = PlanPolicy::any_rank);

  // For ForwardOptions::moe: runs MoE layer `layer` (x [T, d] -> y f32 [T, d]) as an EP step.
  std::function<void(int64_t layer, TensorView x, TensorView y)> hook();
  // Collective: a step in which this rank has no tokens (every MoE layer with T = 0, in layer order), so that the
  // ranks that still have sequences can run theirs (e.g. a rank whose sequences all finished generating).
  void idle_step();
  // generate() under EP: moe = hook(), any_active = an all-reduce of the ranks still generating, idle = idle_step.
  model::GenerateLockstep lockstep();
  // generate()'s lockstep on a rank without prompts: one idle step for the prefill, then one per step while any
  // rank still generates.
  void generate_idle();
  // The last step's statistics of each layer (empty for dense layers).
  const std::vector<EpStepStats>& last_stats() const { return stats_; }
  const EpTotals& totals() const { return totals_; }
  // This rank's kept routed-expert weights over every MoE layer: bytes, and experts per layer.
  int64_t resident_expert_bytes() const;
  int64_t resident_experts_per_layer() const;
  const Placement& placement() const { return placement_; }

 private:
  bool any_active(bool local);
  Comm& comm_;
  Context ctx_;
  Placement placement_;
  std::vector<std::unique_ptr<EpMoe>> layers_;  // [num_hidden_layers], null for dense layers
  void add(const EpStepStats& s);
  std::vector<EpStepStats> stats_;
  EpTotals totals_;
};

// FNV-1a of config_to_json(c): equal on ranks that loaded the same configuration.
uint64_t config_hash(const model::Config& c);

}  // namespace kimi::dist
