// dist/moe_cuda.cu: the CUDA EP latent MoE step (the steps, buffers and the one host sync: moe_cuda.h).
#include "dist/moe_cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/grid.cuh"
#include "cuda/linear/linear.h"
#include "cuda/moe/experts.h"
#include "dist/device_layout.h"
#include "dist/layout.h"
#include "dist/laps.h"
#include "dist/plan_cuda.h"
#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/ops/gather.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/moe.h"
#include "kimi/ops/norm.h"

namespace kimi::dist {

namespace {

constexpr int kThreads = 256;

// count[ids[i]] += 1 for the T*K local slots (count zeroed first).
__global__ void count_experts_kernel(const int32_t* __restrict__ ids, int64_t slots, int32_t* __restrict__ count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < slots) atomicAdd(&count[ids[i]], 1);
}

// y[t, c] = sum_{r < K} w[slot[t*K + r]] * back[row, c], r ascending, where row = row_of[slot[t*K + r]] (by_slot:
// the device plan's slot -> send row) or row_of[t*K + r] (the host plan's combine rows): token t's slots sorted by
// expert, the CPU step's and the CPU latent_moe's summation order; fp32.
__global__ void combine_by_slot_kernel(const float* __restrict__ back, const int32_t* __restrict__ row_of,
                                       bool by_slot, const int32_t* __restrict__ slot, const float* __restrict__ w,
                                       int k, int64_t tokens, int64_t dl, float* __restrict__ y) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * dl) return;
  const int64_t t = i / dl, c = i % dl;
  float acc = 0.f;
  for (int r = 0; r < k; ++r) {
    const int32_t sl = slot[t * k + r];
    acc += w[sl] * back[int64_t(row_of[by_slot ? sl : t * k + r]) * dl + c];
  }
  y[i] = acc;
}

// send[send_row[i], :] = z[i / K, :] for the T*K slots (the device plan's dispatch: rows into fixed peer slots).
__global__ void dispatch_rows_kernel(const float* __restrict__ z, const int32_t* __restrict__ send_row, int k,
                                     int64_t slots, int64_t dl, float* __restrict__ send) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= slots * dl) return;
  const int64_t slot = i / dl, c = i % dl;
  send[int64_t(send_row[slot]) * dl + c] = z[(slot / k) * dl + c];
}

__device__ inline void store_row_value(float* p, float v) { *p = v; }
__device__ inline void store_row_value(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// out[j, :] = recv[from[j], :] (rounded to O) for the grouped rows j < off[R] (the load, read on the device).
template <class O>
__global__ void group_rows_kernel(const float* __restrict__ recv, const int32_t* __restrict__ from,
                                  const int32_t* __restrict__ load, int64_t cap, int64_t dl, O* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= cap * dl || i / dl >= *load) return;
  store_row_value(out + i, recv[int64_t(from[i / dl]) * dl + i % dl]);
}

// recv[from[j], :] = ye[j, :] for j < off[R]: the expert outputs back into the received rows' places.
__global__ void ungroup_rows_kernel(const float* __restrict__ ye, const int32_t* __restrict__ from,
                                    const int32_t* __restrict__ load, int64_t cap, int64_t dl,
                                    float* __restrict__ recv) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= cap * dl || i / dl >= *load) return;
  recv[int64_t(from[i / dl]) * dl + i % dl] = ye[i];
}

struct PinnedFree {
  void operator()(void* p) const { (void)cudaFreeHost(p); }
};
using Pinned = std::unique_ptr<void, PinnedFree>;

Pinned pinned(size_t bytes) {
  void* p = nullptr;
  KIMI_CUDA_CHECK(cudaMallocHost(&p, std::max<size_t>(bytes, 1)));
  return Pinned(p);
}

// Throws unless t (when present) lives on `dev`.
void check_on(const TensorView& t, const std::string& name, Device dev, const Comm& comm) {
  if (t.present() && !(t.device == dev))
    throw Error("dist::EpMoe: argument '" + name + "': expected a CUDA tensor on " + to_string(dev) +
                " (the comm '" + comm.name() + "' keeps its buffers in device memory; the weights' device), got " +
                to_string(t.device));
}

void check_weight(const Weight& w, const std::string& name, Device dev, const Comm& comm) {
  check_on(w.w, name + ".w", dev, comm);
  check_on(w.scale, name + ".scale", dev, comm);
}

// One step's all-to-all counts (host, rows) and device layout tables, from either plan.
struct Tables {
  std::span<const int64_t> send_counts, send_displs, recv_counts, recv_displs;  // [N]
  const int32_t* dispatch = nullptr;      // device plan: slot -> send row [T*K]; host plan: send row -> token
  const int32_t* grouped_from = nullptr;  // grouped row -> received row
  const int32_t* off = nullptr;           // [R + 1] local expert offsets; off[R] = the load
  const int32_t* comb_row = nullptr;      // back rows: by slot (by_slot) or by t*K + r
  bool by_slot = false;
  const int32_t* comb_slot = nullptr;     // [T*K] token t's slots by ascending expert
  int64_t rows = 0;                       // grouped rows bound: the load (host plan) or recv_cap (device plan)
  int64_t known_load = -1;                // the load when the host knows it, else -1
};

class EpMoeCuda final : public EpMoeCudaStep {
 public:
  explicit EpMoeCuda(const EpCudaConfig& c)
      : comm_(*c.comm), pl_(*c.placement), w_(*c.w), resident_(c.resident.begin(), c.resident.end()),
        router_(c.router), act_(c.act), eps_(c.eps), s_(c.s), d_(c.d), dl_(c.dl), recv_cap_(c.recv_cap), e_(c.e),
        k_(c.k), policy_(c.policy), dev_(c.w->router.w.device) {
    const Comm& cm = comm_;
    check_weight(w_.router, "w.router", dev_, cm);
    check_on(w_.router_bias, "w.router_bias", dev_, cm);
    check_weight(w_.latent_down, "w.latent_down", dev_, cm);
    check_weight(w_.latent_up, "w.latent_up", dev_, cm);
    check_on(w_.latent_norm, "w.latent_norm", dev_, cm);
    if (w_.shared) {
      check_weight(w_.shared->gate, "w.shared.gate", dev_, cm);
      check_weight(w_.shared->up, "w.shared.up", dev_, cm);
      check_weight(w_.shared->down, "w.shared.down", dev_, cm);
    }
    local_of_.assign(size_t(e_), -1);
    for (size_t i = 0; i < resident_.size(); ++i) {
      const int32_t e = resident_[i];
      const std::string name = "w.experts[" + std::to_string(e) + "]";
      const MlpWeights& x = c.experts[size_t(e)];
      check_weight(x.gate, name + ".gate", dev_, cm);
      check_weight(x.up, name + ".up", dev_, cm);
      check_weight(x.down, name + ".down", dev_, cm);
      local_.push_back(x);
      local_of_[size_t(e)] = int32_t(i);
    }
    layout_ = cuda::expert_layout(local_);  // one width and format per projection (errors name the local index)
    const int64_t n = comm_.size(), sk = s_ * k_, r = int64_t(resident_.size());
    // The device plan (any_rank): every peer gets a fixed slot of C = S*K rows (send / receive / back [N*C, Dl]);
    // the host plan (holders_only): exact-size blocks in [S*K, Dl] / [recv_cap, Dl] (moe_cuda.h).
    device_plan_ = policy_ == PlanPolicy::any_rank;
    const cuda::DeviceGuard guard(dev_.index);
    const int64_t rows = device_plan_ ? n * sk : recv_cap_;
    const auto f32 = [&](int64_t rs, int64_t cols) { return Tensor::uninitialized(DType::f32, {rs, cols}, dev_); };
    logits_ = f32(s_, e_);
    wts_ = f32(s_, k_);
    meta_ = Tensor::uninitialized(DType::i32, {n * e_ + sk}, dev_);
    count_ = Tensor::uninitialized(DType::i32, {int64_t(e_)}, dev_);
    z_ = f32(s_, dl_);
    send_ = f32(device_plan_ ? n * sk : sk, dl_);
    recv_ = f32(rows, dl_);
    ye_ = f32(recv_cap_, dl_);
    zg_ = f32(recv_cap_, dl_);  // bf16 or f32 grouped rows (the wgmma / gemm paths)
    back_ = f32(device_plan_ ? n * sk : sk, dl_);
    y_ = f32(s_, dl_);
    yn_ = f32(s_, dl_);
    res_ = f32(s_, d_);
    if (device_plan_) {
      plan_ = std::make_unique<DevicePlan>(pl_, comm_.rank(), resident_, s_, k_, sk, recv_cap_, dev_);
      for (int64_t p = 0; p < n; ++p) {
        fixed_counts_.push_back(sk);
        fixed_displs_.push_back(p * sk);
      }
      // Rows of a peer slot past its count travel too (fixed-size sends); zeroed once so that they are defined.
      KIMI_CUDA_CHECK(cudaMemset(send_.data(), 0, size_t(n * sk * dl_) * 4));
      KIMI_CUDA_CHECK(cudaMemset(recv_.data(), 0, size_t(n * sk * dl_) * 4));
      stats_h_ = pinned(size_t(2 * n + dplan::kStats) * 8);
      KIMI_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads and memsets above, before the comm's stream reads them
    } else {
      lay_cap_ = 3 * sk + 2 * recv_cap_ + r + 1;
      lay_ = Tensor::uninitialized(DType::i32, {lay_cap_}, dev_);
      meta_h_ = pinned(size_t(n * e_ + sk) * 4);
      lay_h_ = pinned(size_t(lay_cap_) * 4);
    }
  }

  void forward(TensorView x, TensorView out, TensorView ids_out, TensorView weights_out, EpStepStats* stats,
               const Context& ctx) override {
    const std::string fn = "dist::EpMoe::forward";
    if (x.ndim != 2 || x.size(1) != d_ || x.size(0) > s_)
      throw Error(fn + ": argument 'x': expected [T, " + std::to_string(d_) + "] with T <= max_tokens (" +
                  std::to_string(s_) + "), got " + x.shape_string());
    if (out.ndim != 2 || out.size(0) != x.size(0) || out.size(1) != d_)
      throw Error(fn + ": argument 'out': expected " + x.shape_string() + " (like x), got " + out.shape_string());
    const int64_t t = x.size(0), slots = t * k_;
    const std::string where = " (the comm '" + comm_.name() + "' keeps its buffers in device memory), got ";
    for (const auto& [v, name] : {std::pair{&x, "x"}, std::pair{&out, "out"}, std::pair{&ids_out, "ids"},
                                  std::pair{&weights_out, "weights"}})
      if (v->present() && !(v->device == dev_))
        throw Error(fn + ": argument '" + name + "': expected a CUDA tensor on " + to_string(dev_) + where +
                    to_string(v->device));
    for (const auto& [v, name, dt] : {std::tuple{&ids_out, "ids", DType::i32}, std::tuple{&weights_out, "weights",
                                                                                          DType::f32}})
      if (v->present() && (v->ndim != 2 || v->size(0) != t || v->size(1) != k_ || v->dtype != dt ||
                           v->stride(1) != 1))
        throw Error(fn + ": argument '" + name + "': expected " + std::string(dtype_name(dt)) + " [" +
                    std::to_string(t) + ", " + std::to_string(k_) + "] with unit column stride, got " +
                    std::string(dtype_name(v->dtype)) + " " + v->shape_string());
    const cudaStream_t st = static_cast<cudaStream_t>(comm_.cuda_stream());
    if (ctx.cuda_stream && ctx.cuda_stream != comm_.cuda_stream())
      throw Error(fn + ": argument 'ctx': expected no stream or the comm's stream (the step is enqueued on "
                  "comm.cuda_stream(); make the NCCL comm on the model's stream), got another stream");
    const cuda::DeviceGuard guard(dev_.index);
    const Context cx{comm_.cuda_stream(), ctx.cpu_threads};
    const int n = comm_.size(), me = comm_.rank();
    const int64_t ne = int64_t(n) * e_;
    int32_t* meta = meta_.data_as<int32_t>();  // [N*E gathered counts | T*K ids]
    int32_t* ids = meta + ne;
    const auto f32 = [&](const Tensor& b, int64_t rows, int64_t cols) {
      return TensorView(b.data(), DType::f32, {rows, cols}, dev_);
    };
    const auto i32 = [&](const int32_t* p, int64_t rows) {
      return TensorView(const_cast<int32_t*>(p), DType::i32, {rows}, dev_);
    };

    Laps laps;
    EpStepStats st_local;
    // 1-2. Routing and the latent.
    if (t > 0) {
      linear(x, w_.router, f32(logits_, t, e_), 0.f, cx);
      moe_router(f32(logits_, t, e_), w_.router_bias, router_, TensorView(ids, DType::i32, {t, k_}, dev_),
                 f32(wts_, t, k_), cx);
      if (w_.latent_down.w.present())
        linear(x, w_.latent_down, f32(z_, t, dl_), 0.f, cx);
      else
        cuda::convert_rows(x.data, x.dtype, t > 1 ? x.stride(0) : d_, z_.data(), DType::f32, dl_, t, d_, cx);
    }
    st_local.route_s = laps.lap();

    // 3. Counts (device) -> all_gather -> the plan and layouts: on the device (any_rank), or on the host after the
    //    ONE host sync (holders_only) and uploaded in ONE copy.
    KIMI_CUDA_CHECK(cudaMemsetAsync(count_.data(), 0, size_t(e_) * 4, st));
    if (slots > 0) {
      count_experts_kernel<<<cuda::grid_1d(slots, kThreads, "dist::EpMoe"), kThreads, 0, st>>>(
          ids, slots, count_.data_as<int32_t>());
      KIMI_CUDA_CHECK(cudaGetLastError());
    }
    comm_.all_gather(count_.data(), size_t(e_) * 4, meta);
    Tables tb;
    std::optional<StepPlan> plan;
    if (device_plan_) {
      plan_->enqueue(meta, ids, t, comm_.cuda_stream());
      tb = Tables{fixed_counts_, fixed_displs_, fixed_counts_, fixed_displs_, plan_->send_row(),
                  plan_->grouped_from(), plan_->offsets(), plan_->send_row(), true, plan_->comb_slot(), recv_cap_,
                  -1};
    } else {
      plan = plan_on_host(meta, t, tb);
    }
    const int32_t* d_load = tb.off + resident_.size();  // off[R] = this rank's load, on the device
    st_local.plan_s = laps.lap();

    // 4. Dispatch the latent rows.
    if (slots > 0) {
      if (device_plan_)
        dispatch_rows_kernel<<<cuda::grid_1d(slots * dl_, kThreads, "dist::EpMoe"), kThreads, 0, st>>>(
            z_.data_as<float>(), tb.dispatch, k_, slots, dl_, send_.data_as<float>());
      else
        gather_rows(f32(z_, t, dl_), i32(tb.dispatch, slots), f32(send_, slots, dl_), cx);
      KIMI_CUDA_CHECK(cudaGetLastError());
    }
    comm_.all_to_all_v(send_.data(), tb.send_counts, tb.send_displs, recv_.data(), tb.recv_counts, tb.recv_displs,
                       size_t(dl_) * 4);
    st_local.dispatch_s = laps.lap();

    // 5. The local experts over their grouped rows (tb.rows of them at most; off[R] on the device); outputs back
    //    into the received rows' places.
    if (!resident_.empty() && tb.known_load != 0) {
      const int64_t cap = tb.rows;
      const cuda::ExpertRows rows{tb.off, tb.grouped_from, cap, std::min<int64_t>(cap, int64_t(n) * s_)};
      // The path from this rank's own pairs (T*K: the balanced load's estimate) when the load is on the device.
      const int64_t est = tb.known_load >= 0 ? tb.known_load : std::max<int64_t>(t, 1) * k_;
      const cuda::ExpertPath path = cuda::expert_path(std::max<int64_t>(t, 1), est, x.dtype, local_);
      const unsigned grid = cuda::grid_1d(cap * dl_, kThreads, "dist::EpMoe");
      if (path == cuda::ExpertPath::wgmma || path == cuda::ExpertPath::gemm) {
        const DType zt = x.dtype == DType::bf16 ? DType::bf16 : DType::f32;  // latent_moe's operand dtype
        if (zt == DType::bf16)  // zg[j] = recv[grouped_from[j]]
          group_rows_kernel<<<grid, kThreads, 0, st>>>(recv_.data_as<float>(), tb.grouped_from, d_load, cap, dl_,
                                                      static_cast<__nv_bfloat16*>(zg_.data()));
        else
          group_rows_kernel<<<grid, kThreads, 0, st>>>(recv_.data_as<float>(), tb.grouped_from, d_load, cap, dl_,
                                                      zg_.data_as<float>());
        KIMI_CUDA_CHECK(cudaGetLastError());
        if (path == cuda::ExpertPath::wgmma)
          cuda::experts_wgmma(zg_.data(), dl_, local_, layout_, rows, act_, ye_.data(), DType::f32, st);
        else  // NOTE: cuBLAS takes its shapes from the host: experts_gemm reads the offsets back (a stream sync)
          cuda::experts_gemm(zg_.data(), zt, dl_, local_, rows, act_, ye_.data_as<float>(), cx);
      } else {  // grouped FFMA (also for latent_moe's touched decode path): z read through grouped_from
        cuda::experts_grouped(recv_.data_as<float>(), dl_, local_, layout_, rows, act_, ye_.data_as<float>(), st);
      }
      ungroup_rows_kernel<<<grid, kThreads, 0, st>>>(ye_.data_as<float>(), tb.grouped_from, d_load, cap, dl_,
                                                    recv_.data_as<float>());
      KIMI_CUDA_CHECK(cudaGetLastError());
    }
    st_local.expert_s = laps.lap();

    // 6. Combine: the outputs back to their sources (counts swapped), summed per token by ascending expert.
    comm_.all_to_all_v(recv_.data(), tb.recv_counts, tb.recv_displs, back_.data(), tb.send_counts, tb.send_displs,
                       size_t(dl_) * 4);
    if (t > 0) {
      combine_by_slot_kernel<<<cuda::grid_1d(t * dl_, kThreads, "dist::EpMoe"), kThreads, 0, st>>>(
          back_.data_as<float>(), tb.comb_row, tb.by_slot, tb.comb_slot, wts_.data_as<float>(), k_, t, dl_,
          y_.data_as<float>());
      KIMI_CUDA_CHECK(cudaGetLastError());
    }
    st_local.combine_s = laps.lap();

    // 7. RMSNorm_latent, W_lu, + Shared(x), the one rounding into out.
    if (t > 0) {
      TensorView yl = f32(y_, t, dl_);
      if (w_.latent_norm.present()) {
        rms_norm(yl, w_.latent_norm, eps_, f32(yn_, t, dl_), cx);
        yl = f32(yn_, t, dl_);
      }
      TensorView res = yl;  // [T, d]
      if (w_.latent_down.w.present()) {
        res = f32(res_, t, d_);
        linear(yl, w_.latent_up, res, 0.f, cx);
      }
      if (w_.shared) mlp(x, *w_.shared, act_, res, 1.f, cx);
      if (ids_out.present())
        KIMI_CUDA_CHECK(cudaMemcpy2DAsync(ids_out.data, size_t(t > 1 ? ids_out.stride(0) : k_) * 4, ids,
                                          size_t(k_) * 4, size_t(k_) * 4, size_t(t), cudaMemcpyDeviceToDevice, st));
      if (weights_out.present())
        KIMI_CUDA_CHECK(cudaMemcpy2DAsync(weights_out.data, size_t(t > 1 ? weights_out.stride(0) : k_) * 4,
                                          wts_.data(), size_t(k_) * 4, size_t(k_) * 4, size_t(t),
                                          cudaMemcpyDeviceToDevice, st));
      cuda::convert_rows(res.data, DType::f32, d_, out.data, out.dtype, t > 1 ? out.stride(0) : d_, t, d_, cx);
    }
    st_local.tail_s = laps.lap();
    if (!stats) return;
    if (plan) {
      st_local.home_load = plan->home_load;
      st_local.load = plan->load;
      st_local.total_pairs = plan->total_pairs;
      st_local.moved_pairs = plan->moved_pairs;
      st_local.moved_segments = plan->moved_segments;
    } else {  // NOTE: the stats of the device plan are read back: asking for them synchronises the stream
      auto* h = static_cast<int64_t*>(stats_h_.get());
      const size_t nb = size_t(n) * 8;
      KIMI_CUDA_CHECK(cudaMemcpyAsync(h, plan_->home_load(), nb, cudaMemcpyDeviceToHost, st));
      KIMI_CUDA_CHECK(cudaMemcpyAsync(h + n, plan_->load(), nb, cudaMemcpyDeviceToHost, st));
      KIMI_CUDA_CHECK(cudaMemcpyAsync(h + 2 * n, plan_->stats(), size_t(dplan::kStats) * 8, cudaMemcpyDeviceToHost,
                                      st));
      comm_.synchronize();
      const int64_t* ps = h + 2 * n;
      if (ps[dplan::kError] != 0)
        throw Error(fn + ": internal: the device plan flagged error bits " + std::to_string(ps[dplan::kError]) +
                    " on rank " + std::to_string(me) + " (1: a peer slot over S*K rows, 2: a load over the grouped "
                    "buffer, 4: a share of an expert this rank does not keep, 8: the walk; device_plan.h)");
      st_local.home_load.assign(h, h + n);
      st_local.load.assign(h + n, h + 2 * n);
      st_local.total_pairs = ps[dplan::kTotal];
      st_local.moved_pairs = ps[dplan::kMoved];
      st_local.moved_segments = ps[dplan::kMovedSegments];
    }
    *stats = std::move(st_local);
  }

 private:
  // The holders-only plan: ONE D2H copy of [gathered counts | local ids] and ONE stream sync, plan_step and the
  // layouts on the host (the CPU step's code), ONE upload of the packed tables (device_layout.h).
  StepPlan plan_on_host(const int32_t* meta, int64_t t, Tables& tb) {
    const cudaStream_t st = static_cast<cudaStream_t>(comm_.cuda_stream());
    const int64_t ne = int64_t(comm_.size()) * e_, slots = t * k_;
    const auto* mh = static_cast<const int32_t*>(meta_h_.get());
    KIMI_CUDA_CHECK(cudaMemcpyAsync(meta_h_.get(), meta, size_t(ne + slots) * 4, cudaMemcpyDeviceToHost, st));
    comm_.synchronize();  // NOTE: the holders-only step's host sync (moe_cuda.h): its plan's flows run on the host
    const std::vector<int64_t> counts(mh, mh + ne);
    const std::span<const int32_t> ids_h(mh + ne, size_t(slots));
    StepPlan plan = plan_step(pl_, counts, policy_);
    host_dl_ = dispatch_layout(plan, comm_.rank(), ids_h, k_, s_ * k_);
    host_rl_ = receive_layout(plan, comm_.rank(), recv_cap_);
    const int64_t load = int64_t(host_rl_.grouped_from.size()), r_count = int64_t(resident_.size());
    const DeviceLayoutOffsets lo =
        pack_device_layout(host_dl_, host_rl_, ids_h, k_, local_of_, r_count, comm_.rank(),
                           std::span<int32_t>(static_cast<int32_t*>(lay_h_.get()), size_t(lay_cap_)));
    const int32_t* lay = lay_.data_as<int32_t>();
    KIMI_CUDA_CHECK(cudaMemcpyAsync(lay_.data(), lay_h_.get(), size_t(lo.size) * 4, cudaMemcpyHostToDevice, st));
    tb = Tables{host_dl_.send_counts, host_dl_.send_displs, host_rl_.recv_counts, host_rl_.recv_displs,
                lay + lo.send_tok, lay + lo.grouped_from, lay + lo.off, lay + lo.comb_row, false,
                lay + lo.comb_slot, load, load};
    return plan;
  }

  Comm& comm_;
  Placement pl_;
  LatentMoeWeights w_;  // experts: local_ instead
  std::vector<int32_t> resident_, local_of_;  // local_of_ [E]: index into resident_, or -1
  std::vector<MlpWeights> local_;             // [R] the resident experts, ascending
  RouterParams router_;
  GluParams act_;
  float eps_;
  int64_t s_, d_, dl_, recv_cap_, lay_cap_ = 0;
  int e_, k_;
  PlanPolicy policy_;
  Device dev_;
  cuda::ExpertLayout layout_;
  Tensor logits_, wts_, meta_, count_, z_, send_, recv_, ye_, zg_, back_, y_, yn_, res_, lay_;
  Pinned meta_h_, lay_h_, stats_h_;
  bool device_plan_ = false;
  std::unique_ptr<DevicePlan> plan_;                  // any_rank
  std::vector<int64_t> fixed_counts_, fixed_displs_;  // [N] C and p*C: the fixed peer slots
  DispatchLayout host_dl_;                            // holders_only: this step's layouts (the spans in Tables)
  ReceiveLayout host_rl_;
};

}  // namespace

std::unique_ptr<EpMoeCudaStep> make_ep_moe_cuda(const EpCudaConfig& c) { return std::make_unique<EpMoeCuda>(c); }

void all_gather_host_through_device(Comm& comm, int device, const void* send, size_t bytes, void* recv) {
  const cuda::DeviceGuard guard(device);
  const Device dev = Device::cuda(device);
  const auto n = size_t(comm.size());
  Tensor buf = Tensor::uninitialized(DType::u8, {int64_t((n + 1) * bytes)}, dev);  // [send | N * recv]
  auto* p = static_cast<char*>(buf.data());
  const cudaStream_t st = static_cast<cudaStream_t>(comm.cuda_stream());
  KIMI_CUDA_CHECK(cudaMemcpyAsync(p, send, bytes, cudaMemcpyHostToDevice, st));
  comm.all_gather(p, bytes, p + bytes);
  KIMI_CUDA_CHECK(cudaMemcpyAsync(recv, p + bytes, n * bytes, cudaMemcpyDeviceToHost, st));
  comm.synchronize();
}

}  // namespace kimi::dist
