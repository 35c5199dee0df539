// tools/kimi/generate_ep.h: `kimi generate --ep N` (docs/ep.md): generation with the MoE layers as expert-parallel
// steps over N CPU ranks started by `mpirun -np N`. Every rank loads the same checkpoint and parses the same flags;
// prompt i is generated on rank i mod N (ranks step in lockstep, a rank without prompts idles); the results are
// summed into every rank (all_reduce_sum of a [prompts, max_tokens + 2] table), so rank 0 prints the same report as
// a single-process run, plus the EP lines: pairs per rank, the imbalance before / after planning, moved pairs and
// replica shares, and rank 0's time per phase. The --ep flag, the transport and the errors: ep_cli.h.
#pragma once

#include <cstdio>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/comm.h"
#include "dist/model.h"
#include "kimi/model/generate.h"

namespace kimi::cli {

struct EpRun {
  model::GenerateResult result;  // every prompt's tokens (on every rank); token counts summed over ranks
  dist::EpTotals totals;         // this rank's EpModel totals
};
EpRun generate_ep(dist::Comm& comm, const model::Model& model, std::span<const std::vector<int32_t>> prompts,
                  const model::GenerateOptions& opt, const Context& ctx);

void print_ep_report(std::FILE* out, const dist::Comm& comm, const dist::EpTotals& t);
nlohmann::json ep_json(const dist::Comm& comm, const dist::EpTotals& t);

}  // namespace kimi::cli
