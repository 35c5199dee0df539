// dist/plan_cuda.h: the any-rank step plan and this rank's fixed-slot layouts computed on the GPU (the functions and
// tables: dist/device_plan.h), so that the CUDA EP step (moe_cuda.h) has no host synchronisation and can be captured
// in a CUDA graph. Built with the NCCL transport only (src/dist/plan_cuda.cu).
//
// enqueue(counts, ids, T, stream) launches, in stream order, from the all-gathered counts i32 [N, E] and this rank's
// ids i32 [T, K] (both device memory):
//   plan_expert (E threads) -> plan_serial (1 thread) -> send_block (N threads) -> slot numbers (one warp, slot
//   order: __match_any_sync per 32 slots over per-expert counters) -> send_row (T*K threads) -> expert_rows (E) ->
//   source_rows (N) -> expert_offsets (1) -> grouped_rows (N*E) -> combine_order (T)
// Eleven launches and one memset; nothing read on the host, nothing allocated: every table is a static device
// buffer made at construction (sizes: device_plan.h, with T <= S). stats() etc. stay on the device; the caller
// copies them when it wants them (EpStepStats).
#pragma once

#include <cstdint>
#include <span>

#include "dist/device_plan.h"
#include "dist/planner.h"
#include "kimi/tensor.h"

namespace kimi::dist {

class DevicePlan {
 public:
  // placement: the step's (ranks = N); resident: this rank's experts (ascending; any_rank: all); s = max tokens,
  // k = top_k, cap = rows per peer slot (S*K), recv_cap = grouped rows (S*K). Allocates on `dev`.
  DevicePlan(const Placement& placement, int rank, std::span<const int32_t> resident, int64_t s, int k,
             int64_t cap, int64_t recv_cap, Device dev);

  // Enqueues the plan and the layouts on `stream` (cudaStream_t) for T <= S tokens.
  void enqueue(const int32_t* counts, const int32_t* ids, int64_t t, void* stream);

  const int32_t* send_row() const { return local_.send_row; }          // [T*K]
  const int32_t* comb_slot() const { return local_.comb_slot; }        // [T*K]
  const int32_t* grouped_from() const { return local_.grouped_from; }  // [recv_cap] (rows < off[R] written)
  const int32_t* offsets() const { return local_.off; }                // [R + 1]
  const int64_t* home_load() const { return global_.home_load; }       // [N]
  const int64_t* load() const { return global_.load; }                 // [N]
  const int64_t* stats() const { return global_.stats; }               // [dplan::kStats]

 private:
  dplan::Dims dims_;
  Tensor buf32_, buf64_;  // every i32 / i64 array of global_ and local_, carved in order
  dplan::Global global_{};
  dplan::Local local_{};
  int32_t* seen_ = nullptr;  // [E] the slot numbers' counters
};

}  // namespace kimi::dist
