// dist/moe_cuda.h: the CUDA form of the EP latent MoE step (dist::EpMoe over a device-memory Comm: NCCL).
//
// Built only in a CUDA build with the NCCL transport (KIMI_EP_NCCL, src/dist/moe_cuda.cu); EpMoe (moe.h) makes one
// when its comm's memory() is device and forwards every step to it. Same steps, plan and layouts as the CPU step
// (moe.h, docs/ep.md); every tensor lives on the comm's GPU and every launch and collective is enqueued on
// comm.cuda_stream() (S = max_tokens, K = top_k, N = ranks, R = this rank's resident experts, C = S*K):
//   1. logits = x W_r^T (f32 [T, E]); moe_router -> ids i32 [T, K] (into the meta buffer), w f32 [T, K]
//   2. z = x W_ld^T, or f32(x)                                                        z f32 [S, Dl] (static)
//   3. per-expert counts on the device (count i32 [E]); all_gather through the Comm -> meta[0, N*E); then the plan
//      any_rank (the device plan, dist/plan_cuda.h): plan_step's plan and this rank's layouts computed on the GPU
//        from the gathered counts by every rank identically; NO host synchronisation: the step can be captured in a
//        CUDA graph (unless the experts take the cuBLAS path or need per-call weight tables, below). The
//        all-to-alls use fixed peer slots: C rows to and from every peer (the counts on the host are constants;
//        rows past a slot's real count travel unread). Tables: slot -> send row, grouped row -> received row,
//        local expert offsets [R + 1] (off[R] = the load, read by the kernels on the device), combine slots.
//      holders_only (its flows stay on the host): ONE async D2H copy of meta = [gathered counts N*E | local ids
//        T*K] (i32, pinned) and ONE stream synchronisation per step; plan_step, dispatch_layout, receive_layout on
//        the host (the CPU step's code); the packed tables (dist/device_layout.h) back in ONE async H2D copy;
//        exact-size all-to-all blocks.
//   4. dispatch: send row of each slot <- z[token] (the device plan: dispatch_rows_kernel; the host plan:
//      gather_rows by send row -> token); all_to_all_v
//   5. the grouped rows of the local experts, expert i owning rows [off[i], off[i+1]) (received rows in
//      grouped_from order), through the expert kernels of cuda latent_moe (src/cuda/moe/experts.h), the path from
//      expert_path(T, rows, x dtype, resident experts) (rows: the load on the host plan, T*K as the balanced load's
//      estimate on the device plan; the kernels get the buffer's rows as the bound and the real offsets on the
//      device): grouped FFMA (reads recv through grouped_from, no copy; also where latent_moe would take the
//      touched path), tensor-core grouped GEMM (experts_wgmma: recv gathered into bf16 zg), cuBLAS per expert
//      (experts_gemm: its own offsets copy to the host, a sync: prefill shapes of f32 / f16 x only; not
//      capturable). ye f32 grouped order -> recv order (ungroup_rows_kernel: rows < off[R])
//   6. combine: all_to_all_v back (counts swapped) into back (send-row order)
//   7. y[t] = sum over t's slots in ascending expert order of w * back[row] (combine_by_slot_kernel, f32, the CPU
//      step's order); RMSNorm_latent, W_lu, + Shared(x) (the model's CUDA ops); out = round(res) once.
// Static device buffers (allocated once here, never per step): logits f32 [S, E], w f32 [S*K], meta i32
// [N*E + S*K], count i32 [E], z f32 [S, Dl], ye / zg f32 [recv_cap, Dl], y / yn f32 [S, Dl], res f32 [S, d]; and
//   any_rank:     send / recv / back f32 [N*C, Dl] (the fixed slots), the device plan's tables (plan_cuda.h:
//                 O(N*E + H + S*K) i32 / i64), pinned host stats [2N + 6] i64
//   holders_only: send / back f32 [S*K, Dl], recv f32 [recv_cap, Dl], layouts i32 [3*S*K + 2*recv_cap + R + 1] and
//                 pinned host meta and layouts of the same sizes.
// recv_cap as the CPU step (moe.h): S*K (any_rank), min(N*S*K, N*S*R) (holders_only). The expert kernels and cuBLAS
// take their own stream-ordered pool scratch (src/cuda/scratch.cuh), as in latent_moe (capturable: graph memory
// nodes). EpStepStats of the device plan are copied back after the step: passing stats synchronises the stream
// (and throws if the device plan flagged a bound, which the any-rank plan cannot violate: device_plan.h).
#pragma once

#include <memory>

#include "dist/moe.h"

namespace kimi::dist {

// What EpMoe validated and derived (moe.cpp), handed to the CUDA step.
struct EpCudaConfig {
  Comm* comm = nullptr;
  const Placement* placement = nullptr;
  const LatentMoeWeights* w = nullptr;      // experts not read (experts below)
  std::span<const MlpWeights> experts;      // [E]; absent for the experts this rank does not keep
  std::span<const int32_t> resident;        // ascending
  RouterParams router;
  GluParams act;
  float eps = 0.f;
  int64_t s = 0, d = 0, dl = 0, recv_cap = 0;
  int e = 0, k = 0;
  PlanPolicy policy = PlanPolicy::any_rank;
};

class EpMoeCudaStep {
 public:
  virtual ~EpMoeCudaStep() = default;
  // x, out: CUDA [T, d] on the weights' device; ids / weights optional CUDA outputs i32 / f32 [T, K].
  virtual void forward(TensorView x, TensorView out, TensorView ids, TensorView weights, EpStepStats* stats,
                       const Context& ctx) = 0;
};

// Checks that every weight lives on one CUDA device (naming the weight otherwise) and allocates the static
// buffers. Throws kimi::Error in a build without the NCCL transport.
std::unique_ptr<EpMoeCudaStep> make_ep_moe_cuda(const EpCudaConfig& c);

// all_gather of host data (send [bytes], recv [N * bytes]) through a device-memory comm whose GPU is `device`
// (staged through device memory; returns when recv is written). The constructor's configuration check.
void all_gather_host_through_device(Comm& comm, int device, const void* send, size_t bytes, void* recv);

}  // namespace kimi::dist
