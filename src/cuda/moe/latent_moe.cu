// Launcher of cuda::latent_moe (kimi/ops/moe.h, SPEC 7): the latent MoE block on the device.
//   1. logits = x W_r^T (f32 [T, E]); router_kernel -> ids i32 [T, K], w f32 [T, K]
//   2. z = x W_ld^T (f32 [T, Dl]), or z = f32(x) without the latent projections (Dl = d)
//   3. group the T*K slots by expert: count_kernel; ONE device -> host copy of the E counts (a stream
//      sync: the per-expert GEMM shapes are chosen on the host); place_kernel; gather_kernel -> zg [T*K, Dl]
//   4. per expert with rows: G = zg_e W1^T, U = zg_e W3^T (f32 [T*K, I]); one glu over all rows (G = act(G) * U);
//      per expert: Ye_e = G_e W2^T (f32 [T*K, Dl])       -- cuda::linear: GEMV for <= 16 rows, else cuBLAS
//   5. y[t] = sum_j w[t, j] Ye[row of slot (t, j)] (combine_kernel, f32 [T, Dl]); RMSNorm_latent (f32)
//   6. res = y W_lu^T (f32 [T, d]) (or y), res += Shared(x) (cuda::mlp, beta 1); out = round(res)
// Everything between x and out is f32; out is written once at the end, so it may alias x.
// NOTE: the counts copy makes this launcher refuse CUDA graph capture; per-expert launches cost
// ~5 launches per active expert (a grouped GEMM would remove both; docs/ops/moe.md).
#include <optional>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/grid.cuh"
#include "cuda/linear/linear.h"
#include "cuda/moe/group.cuh"
#include "cuda/moe/moe.h"
#include "cuda/norm/norm.h"
#include "cuda/scratch.cuh"

namespace kimi::cuda {

namespace {
constexpr int kThreads = 256;

// A 1-D or 2-D float view (any strides) into dst as td, rows ldd apart.
void convert_view(const TensorView& src, void* dst, DType td, int64_t ldd, const Context& ctx) {
  const int64_t rows = src.size(0), cols = src.ndim > 1 ? src.size(1) : 1;
  const int64_t lds = src.ndim > 1 ? (rows > 1 ? src.stride(0) : cols) : src.stride(0);
  cuda::convert_rows(src.data, src.dtype, lds, dst, td, ldd, rows, cols, ctx);
}

void copy_out(const Scratch& src, int64_t rows, int64_t k, const TensorView& dst, cudaStream_t s) {
  if (!dst.present()) return;
  copy_rows_kernel<<<grid_1d(rows * k, kThreads, "latent_moe"), kThreads, 0, s>>>(
      src.get<uint32_t>(), rows, k, static_cast<uint32_t*>(dst.data), rows > 1 ? dst.stride(0) : k);
  KIMI_CUDA_CHECK(cudaGetLastError());
}
}  // namespace

void latent_moe(TensorView x, const LatentMoeWeights& w, const RouterParams& router, const GluParams& act,
                float norm_eps, TensorView out, TensorView ids, TensorView weights, const Context& ctx) {
  const int64_t t_count = x.size(0), d = x.size(1), e_count = int64_t(w.experts.size());
  const int64_t k = router.top_k, slots = t_count * k;
  if (t_count == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const int64_t inter = w.experts[0].gate.out_features();
  for (size_t e = 1; e < w.experts.size(); ++e)  // the experts share [T*K, I] scratch buffers
    if (w.experts[e].gate.out_features() != inter)
      throw Error("latent_moe: argument 'w.experts[" + std::to_string(e) + "]': expected the intermediate size of " +
                  "expert 0 on CUDA (" + std::to_string(inter) + "), got " +
                  std::to_string(w.experts[e].gate.out_features()));
  if (slots > int64_t(0x7fffffff))  // grouped rows are counted in int32
    throw Error("latent_moe: argument 'x': expected T * top_k <= 2^31 - 1 on CUDA, got " + std::to_string(slots));
  refuse_capture(s, "latent_moe");
  const DeviceGuard device_guard(x.device.index);
  const Device dev = x.device;
  const bool latent = w.latent_down.w.present();
  const int64_t dl = latent ? w.latent_down.out_features() : d;
  const auto f32 = [&](const Scratch& b, int64_t rows, int64_t cols) {
    return TensorView(b.get(), DType::f32, {rows, cols}, dev);
  };

  // 1. Routing.
  Scratch logits(size_t(t_count * e_count) * 4, s), sel(size_t(slots) * 4, s), wts(size_t(slots) * 4, s);
  cuda::linear(x, w.router, f32(logits, t_count, e_count), 0.f, ctx);
  cuda::moe_router(f32(logits, t_count, e_count), w.router_bias, router,
             TensorView(sel.get(), DType::i32, {t_count, k}, dev), f32(wts, t_count, k), ctx);
  copy_out(sel, t_count, k, ids, s);
  copy_out(wts, t_count, k, weights, s);

  // 2. The expert input z [T, Dl] f32.
  Scratch z(size_t(t_count * dl) * 4, s);
  if (latent) cuda::linear(x, w.latent_down, f32(z, t_count, dl), 0.f, ctx);
  else convert_view(x, z.get(), DType::f32, dl, ctx);

  // 3. Group slots by expert: counts to the host (the one sync), then rows on the device.
  Scratch count(size_t(e_count) * 4, s), cursor(size_t(e_count) * 4, s), row_of_slot(size_t(slots) * 4, s);
  KIMI_CUDA_CHECK(cudaMemsetAsync(count.get(), 0, size_t(e_count) * 4, s));
  count_kernel<<<grid_1d(slots, kThreads, "latent_moe"), kThreads, 0, s>>>(sel.get<int32_t>(), slots,
                                                                          count.get<int32_t>());
  KIMI_CUDA_CHECK(cudaGetLastError());
  std::vector<int32_t> counts(static_cast<size_t>(e_count));
  KIMI_CUDA_CHECK(cudaMemcpyAsync(counts.data(), count.get(), size_t(e_count) * 4, cudaMemcpyDeviceToHost, s));
  KIMI_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<int32_t> start(size_t(e_count) + 1, 0);
  for (size_t e = 0; e < size_t(e_count); ++e) start[e + 1] = start[e] + counts[e];
  KIMI_CUDA_CHECK(cudaMemcpyAsync(cursor.get(), start.data(), size_t(e_count) * 4, cudaMemcpyHostToDevice, s));
  // NOTE: a pageable host -> device copy returns once `start` is staged, so the vector may die after it.
  place_kernel<<<grid_1d(slots, kThreads, "latent_moe"), kThreads, 0, s>>>(sel.get<int32_t>(), slots,
                                                                          cursor.get<int32_t>(),
                                                                          row_of_slot.get<int32_t>());
  KIMI_CUDA_CHECK(cudaGetLastError());
  Scratch zg(size_t(slots * dl) * 4, s);
  gather_kernel<<<grid_1d(slots * dl, kThreads, "latent_moe"), kThreads, 0, s>>>(
      z.get<float>(), row_of_slot.get<int32_t>(), int(k), slots, dl, zg.get<float>());
  KIMI_CUDA_CHECK(cudaGetLastError());

  // 4. Experts over their rows: gate/up, one activation over every row, down.
  Scratch g(size_t(slots * inter) * 4, s), u(size_t(slots * inter) * 4, s), ye(size_t(slots * dl) * 4, s);
  const auto rows_of = [&](const Scratch& b, int64_t cols, size_t e) {  // expert e's rows of a [T*K, cols] buffer
    return TensorView(b.get<float>() + int64_t(start[e]) * cols, DType::f32, {int64_t(counts[e]), cols}, dev);
  };
  for (size_t e = 0; e < size_t(e_count); ++e) {
    if (counts[e] == 0) continue;
    cuda::linear(rows_of(zg, dl, e), w.experts[e].gate, rows_of(g, inter, e), 0.f, ctx);
    cuda::linear(rows_of(zg, dl, e), w.experts[e].up, rows_of(u, inter, e), 0.f, ctx);
  }
  cuda::glu(f32(g, slots, inter), f32(u, slots, inter), act, f32(g, slots, inter), ctx);
  for (size_t e = 0; e < size_t(e_count); ++e)
    if (counts[e] != 0) cuda::linear(rows_of(g, inter, e), w.experts[e].down, rows_of(ye, dl, e), 0.f, ctx);

  // 5. Weighted sum per token, latent RMSNorm (into yn: rms_norm does not promise in-place).
  Scratch y(size_t(t_count * dl) * 4, s);
  std::optional<Scratch> yn;
  const Scratch* yl = &y;
  combine_kernel<<<grid_1d(t_count * dl, kThreads, "latent_moe"), kThreads, 0, s>>>(
      ye.get<float>(), row_of_slot.get<int32_t>(), wts.get<float>(), int(k), t_count, dl, y.get<float>());
  KIMI_CUDA_CHECK(cudaGetLastError());
  if (w.latent_norm.present()) {
    TensorView nw = w.latent_norm;
    std::optional<Scratch> nws;
    if (nw.stride(0) != 1) {  // rms_norm reads a contiguous weight
      nws.emplace(size_t(dl) * 4, s);
      convert_view(nw, nws->get(), DType::f32, 1, ctx);
      nw = TensorView(nws->get(), DType::f32, {dl}, dev);
    }
    yn.emplace(size_t(t_count * dl) * 4, s);
    cuda::rms_norm(f32(y, t_count, dl), nw, norm_eps, f32(*yn, t_count, dl), ctx);
    yl = &*yn;
  }

  // 6. Up-projection, shared expert, the one rounding into out.
  std::optional<Scratch> up;
  const Scratch* res = yl;
  if (latent) {
    up.emplace(size_t(t_count * d) * 4, s);
    cuda::linear(f32(*yl, t_count, dl), w.latent_up, f32(*up, t_count, d), 0.f, ctx);
    res = &*up;
  }
  if (w.shared) cuda::mlp(x, *w.shared, act, f32(*res, t_count, d), 1.f, ctx);
  cuda::convert_rows(res->get(), DType::f32, d, out.data, out.dtype, t_count > 1 ? out.stride(0) : d, t_count, d, ctx);
}

}  // namespace kimi::cuda
