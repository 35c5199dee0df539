// tools/kimi/bench_ep.h: `kimi bench --ep N` (docs/ep.md): every bench row run by N CPU ranks under
// `mpirun -np N` with the MoE layers as expert-parallel steps (dist::EpModel, as `kimi generate --ep`).
//
// -b is the batch PER RANK: each rank runs the row on b sequences of its own (seeded tokens that differ per rank;
// rank 0's are the single-process run's), all ranks step in lockstep, so the job runs N*b sequences. A repetition's
// time is the slowest rank's (an all-gather of every rank's times, max), so tokens/s of the job = N*b*n / that
// median and tokens/s per rank = b*n / it. Per row, summed over its timed runs (not the warm-ups, nor a tgN row's
// untimed --context prefill) and over every MoE layer step:
//   pairs per rank     token-expert pairs each rank computed after planning (the plan is global: rank 0 knows all)
//   imbalance          slowest rank / mean, per MoE layer step, averaged over the steps: before planning (each
//                      expert's pairs on its home rank) and after (floor/ceil(P/N): 1 when P/N is whole, as here,
//                      where every rank has the same number of tokens)
//   moved, shares      pairs computed off their home rank and the replica shares that carried them
//   phase times        route / plan (with the counts all-gather) / dispatch / experts / combine / tail of
//                      dist::EpStepStats: rank 0's and the max over ranks (all-gathered per row)
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/comm.h"
#include "dist/model.h"

namespace kimi::cli {

inline constexpr std::array<const char*, 6> kEpPhases = {"route", "plan", "dispatch", "experts", "combine", "tail"};

struct BenchEpRow {
  dist::EpTotals totals;                   // this rank's EpModel totals over the row's timed runs
  std::array<double, 6> max_seconds = {};  // each phase's seconds (kEpPhases order): the max over ranks
  int64_t runs = 0;                        // timed runs (repetitions)
  double steps_per_run = 1;                // forwards per run

  std::array<double, 6> seconds() const;  // this rank's (rank 0 reports), kEpPhases order
  double imbalance_before() const;
  double imbalance_after() const;
};

// Adds `now - before` (two totals() of one EpModel) to `into`.
void add_since(dist::EpTotals& into, const dist::EpTotals& now, const dist::EpTotals& before);

// Collective: the elementwise max over ranks of v (the same length on every rank), by an all-gather.
std::vector<double> max_over_ranks(dist::Comm& comm, std::span<const double> v);

// The per-row EP table: (test, batch per rank, numbers) per row.
struct EpTableRow {
  std::string test;
  int64_t batch = 0;
  const BenchEpRow* ep = nullptr;
};
std::string ep_table(const std::vector<EpTableRow>& rows);

// A row's "ep" JSON object; job_tokens_per_s: the whole job's tokens/s.
nlohmann::json ep_row_json(const BenchEpRow& r, int ranks, double job_tokens_per_s);
// The CSV columns --ep adds (header, and one row's fields), starting with a comma.
std::string ep_csv_header();
std::string ep_csv_fields(const BenchEpRow& r, int ranks, double job_tokens_per_s);

}  // namespace kimi::cli
