// tools/kimi/generate_ep.h: `kimi generate --ep N` (docs/ep.md): generation with the MoE layers as expert-parallel
// steps over N CPU ranks started by `mpirun -np N`. Every rank loads the same checkpoint and parses the same flags;
// prompt i is generated on rank i mod N (ranks step in lockstep, a rank without prompts idles); the results are
// summed into every rank (all_reduce_sum of a [prompts, max_tokens + 2] table), so rank 0 prints the same report as
// a single-process run, plus the EP lines: pairs per rank, the imbalance before / after planning, moved pairs and
// replica shares, and rank 0's time per phase. The --ep flag, the transport and the errors: ep_cli.h.
// --ep-placement round-robin | profile (--ep-profile FILE, --ep-replicas R) chooses the experts' holders;
// --ep-resident all | held: every rank keeps every expert (the any-rank plan) or only the experts it holds (the
// holders-only plan, dist/planner.h); the report prints each rank's resident routed-expert weight bytes.
#pragma once

#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/comm.h"
#include "dist/model.h"
#include "kimi/model/generate.h"
#include "kimi/model_cmds.h"

namespace kimi::cli {

// The --ep-* flags' values and combinations (before the transport starts); throws kimi::Error naming the flag.
void check_ep_flags(const GenerateCmdOptions& opt);
// The placement the flags ask for (reads --ep-profile: E numbers >= 0). Throws kimi::Error naming the flag.
dist::Placement ep_placement(const GenerateCmdOptions& opt, int ranks, int experts);

struct EpRun {
  model::GenerateResult result;  // every prompt's tokens (on every rank); token counts summed over ranks
  dist::EpTotals totals;         // this rank's EpModel totals
  std::string placement;         // "round-robin" or "profile + R replicas"
  bool held_only = false;        // --ep-resident held
  std::vector<int64_t> resident_bytes, resident_experts;  // [N] routed-expert weight bytes, experts per MoE layer
  std::vector<int64_t> model_bytes;  // [N] routed-expert bytes each rank's Model bound from the checkpoint
};
// placement: ep_placement(flags, ...); with --ep-resident held the model may bind only this rank's experts.
EpRun generate_ep(dist::Comm& comm, const model::Model& model, std::span<const std::vector<int32_t>> prompts,
                  const model::GenerateOptions& opt, const Context& ctx, const GenerateCmdOptions& flags,
                  const dist::Placement& placement);

void print_ep_report(std::FILE* out, const dist::Comm& comm, const EpRun& run);
nlohmann::json ep_json(const dist::Comm& comm, const EpRun& run);

}  // namespace kimi::cli
