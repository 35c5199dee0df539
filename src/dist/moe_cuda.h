// dist/moe_cuda.h: the CUDA form of the EP latent MoE step (dist::EpMoe over a device-memory Comm: NCCL).
//
// Built only in a CUDA build with the NCCL transport (KIMI_EP_NCCL, src/dist/moe_cuda.cu); EpMoe (moe.h) makes one
// when its comm's memory() is device and forwards every step to it. Same steps, plan and layouts as the CPU step
// (moe.h, docs/ep.md); every tensor lives on the comm's GPU and every launch and collective is enqueued on
// comm.cuda_stream() (S = max_tokens, K = top_k, N = ranks, R = this rank's resident experts):
//   1. logits = x W_r^T (f32 [T, E]); moe_router -> ids i32 [T, K] (into the meta buffer), w f32 [T, K]
//   2. z = x W_ld^T, or f32(x)                                                        z f32 [S, Dl] (static)
//   3. per-expert counts on the device (count i32 [E]); all_gather through the Comm -> meta[0, N*E)
//      HOST SYNC: ONE async D2H copy of meta = [gathered counts N*E | local ids T*K] (i32, pinned) and ONE stream
//      synchronisation per step: the plan and the layouts are computed on the host (plan_step, dispatch_layout,
//      receive_layout: the same code as the CPU step). The plan on the device is a later step.
//      The layouts go back in ONE async H2D copy from a pinned buffer (i32, dist/device_layout.h): send row ->
//      token, grouped row -> received row, received row -> grouped row, local expert offsets [R + 1], combine rows
//      and slots.
//   4. dispatch: send[i] = z[token of send row i] (gather_rows); all_to_all_v           send f32 [S*K, Dl]
//   5. the grouped rows of the local experts, expert i owning rows [off[i], off[i+1]) (received rows in
//      grouped_from order), through the expert kernels of cuda latent_moe (src/cuda/moe/experts.h), the path from
//      expert_path(T, load, x dtype, resident experts): grouped FFMA (reads recv through grouped_from, no copy;
//      also where latent_moe would take the touched path), tensor-core grouped GEMM (experts_wgmma: recv gathered
//      into bf16 zg), cuBLAS per expert (experts_gemm: its own offsets copy to the host, a second sync, prefill
//      shapes of f32 / f16 x only). ye f32 [load, Dl] grouped order -> recv order (gather_rows by the inverse)
//   6. combine: all_to_all_v back (counts swapped) into back f32 [S*K, Dl] (send-row order)
//   7. y[t] = sum over t's slots in ascending expert order of w * back[row] (combine_by_slot_kernel, f32, the CPU
//      step's order); RMSNorm_latent, W_lu, + Shared(x) (the model's CUDA ops); out = round(res) once.
// Static device buffers (allocated once here, never per step): logits f32 [S, E], w f32 [S*K], meta i32
// [N*E + S*K], count i32 [E], z f32 [S, Dl], send f32 [S*K, Dl], recv / ye / zg f32 [recv_cap, Dl], back f32
// [S*K, Dl], y / yn f32 [S, Dl], res f32 [S, d], layouts i32 [3*S*K + 2*recv_cap + R + 1]; pinned host meta and
// layouts of the same sizes. recv_cap as the CPU step (moe.h): S*K (any_rank), min(N*S*K, N*S*R) (holders_only).
// The expert kernels and cuBLAS take their own stream-ordered pool scratch (src/cuda/scratch.cuh), as in latent_moe.
// Not capturable in a CUDA graph (the host sync above).
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
