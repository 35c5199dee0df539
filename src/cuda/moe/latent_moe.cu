// Launcher of cuda::latent_moe (kimi/ops/moe.h, SPEC 7): the latent MoE block on the device.
//   1. logits = x W_r^T (f32 [T, E]); router_kernel -> ids i32 [T, K], w f32 [T, K] (on the touched path at
//      E <= 256: inside the grouping launch of step 3)
//   2. z = x W_ld^T [T, Dl], or x without the latent projections (Dl = d): f32 on the touched and grouped paths,
//      which read it in place; the gathering paths' operand dtype (bf16 for bf16 x) on the others
//   3. group the T*K slots by expert on the device (group.cuh): on the touched path ONE launch, group_kernel
//      (offsets, row_of_slot, token_of_row, the list of touched experts, the optional ids / weights copies, and
//      z = f32(x) without a latent);
//      otherwise count_kernel, offsets_kernel (exclusive scan), place_kernel; no count reaches the host here
//   4. the experts over their rows, ye [T*K, Dl] in grouped order (experts.h; bf16 on the wgmma path, else f32),
//      the path chosen on the host by expert_path (T, T*K / E, dtypes, weight format and layout; options.h):
//      touched (decode, T <= touched_max_tokens): experts_touched, one gate+up+GLU launch and one down launch
//        over the touched experts, straight from z (no gather), no host sync;
//      wgmma (otherwise: bf16 x, dense bf16 or MXFP4 experts, prefill and decode): gather z into zg bf16
//        [T*K, Dl] (cuda::gather_rows by token_of_row: 16-byte row copies), then experts_wgmma (one tensor-core
//        launch for gate+up+GLU, one for down writing ye bf16), no host sync;
//      grouped (otherwise, T*K <= kGroupedMaxRowsPerExpert E: f32 / f16 x at decode): experts_grouped,
//        one gate+up+GLU launch and one down launch for every expert, straight from z (no gather), no host sync;
//      gemm (prefill otherwise): gather z into zg [T*K, Dl] of the operand dtype (bf16 when x is bf16, else f32:
//        f32 / f16 x keep exact operands), then experts_gemm (the offsets copied to the host: ONE stream sync)
//   5. without a latent (Kimi-Linear): ys = Shared(x) (f32 [T, d], cuda::mlp, beta 0), unless the touched launches
//      ran it (ye rows T*K + t); then ONE combine launch writes out = round(sum_j w[t, j] Ye[row of slot (t, j)]
//      + ys[t] (+ out, beta 1)): the only write of out, the residual add inside it.
//   6. with a latent (K3): y[t] = sum_j w[t, j] Ye[row of slot (t, j)] (the combine, f32 [T, Dl]);
//      RMSNorm_latent (f32)
//   7. res = y W_lu^T (f32 [T, d]), res += Shared(x) (cuda::mlp, beta 1); out = round(res (+ out, beta 1))
// The touched path without a latent (Kimi-Linear) at T <= kTouchedMaxSharedTokens: the shared expert runs inside
// the two expert launches (its rows after the routed ones in ye, z = f32(x) being its input) and the combine adds
// it and rounds into out: router GEMV, group (which also routes at E <= 256 and writes z = f32(x)), gate+up,
// down, combine: 5 launches in all (the grouped path: 17).
// NOTE: ye bf16 on the wgmma path. The combine reads ye once per (t, j): at the slice's 8192-token prefill that
// read is 604 MB per layer in f32 (T*K = 65536 rows of 2304) plus the down GEMM's write of the same; bf16 halves
// both (-604 MB per layer), and combine_bf16_kernel reads it in 16-byte pieces (8 columns per thread). Each ye element is its fp32 sum rounded once (relative error <= 2^-9, the size of
// the rounding of H before it); the weighted sum over K stays fp32 and rounds once into out.
// z, h, ye (but the wgmma path's), y and res are f32 (the prefill path's operands follow x's dtype, above); out is
// written once at the end, so it may alias x (beta 0). beta 1 adds out's old value in f32 in that same final write
// (the combine without a latent: the model's residual add needs no launch of its own).
// CUDA graph capture: the touched, grouped and wgmma paths capture when the experts are stacked (one allocation per
// projection, evenly strided: place_weights builds them so). Separately allocated experts need a per-call
// pointer-table upload and the gemm path a counts copy: both are refused under capture with an error, before any
// work.
#include <cuda_bf16.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/gather/gather.h"
#include "cuda/grid.cuh"
#include "cuda/linear/linear.h"
#include "cuda/moe/experts.h"
#include "cuda/moe/group.cuh"
#include "cuda/moe/moe.h"
#include "cuda/norm/norm.h"
#include "cuda/scratch.cuh"
#include "cuda/pdl.cuh"

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

// Refuses graph capture (before any work on the stream: the caller's capture stays valid) when this call
// would synchronise with the host or upload a host table.
void refuse_capture_of(cudaStream_t s, ExpertPath path, bool stacked, int64_t slots, int64_t e_count) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  KIMI_CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  if (st == cudaStreamCaptureStatusNone) return;
  if (path == ExpertPath::gemm)
    throw Error("latent_moe: cannot run inside CUDA graph capture with T * top_k = " + std::to_string(slots) +
                " routed rows over " + std::to_string(e_count) + " experts (more than " +
                std::to_string(kGroupedMaxRowsPerExpert) +
                " per expert on average, and not bf16 x with dense bf16 or MXFP4 experts: this prefill path copies the "
                "expert counts to the host); capture batches with T * top_k <= " +
                std::to_string(kGroupedMaxRowsPerExpert * e_count) + ", or bf16 x with bf16 or MXFP4 experts");
  if (!stacked)
    throw Error("latent_moe: cannot run inside CUDA graph capture with expert weights that are separate "
                "allocations (argument 'w.experts': each projection's experts must be evenly strided in memory, "
                "one stacked tensor per projection, to be captured; separate experts need a per-call "
                "pointer-table upload); call it outside stream capture");
}
}  // namespace

void latent_moe(TensorView x, const LatentMoeWeights& w, const RouterParams& router, const GluParams& act,
                float norm_eps, TensorView out, TensorView ids, TensorView weights, float beta, const Context& ctx) {
  const int64_t t_count = x.size(0), d = x.size(1), e_count = int64_t(w.experts.size());
  const int64_t k = router.top_k, slots = t_count * k;
  if (t_count == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const ExpertLayout layout = expert_layout(w.experts);  // one width and format per projection (errors)
  if (slots > int64_t(0x7fffffff))  // grouped rows are counted in int32
    throw Error("latent_moe: argument 'x': expected T * top_k <= 2^31 - 1 on CUDA, got " + std::to_string(slots));
  const ExpertPath path = expert_path(t_count, slots, x.dtype, w.experts);  // no counts needed
  const bool touched = path == ExpertPath::touched;
  refuse_capture_of(s, path, layout.stacked, slots, e_count);
  if (path == ExpertPath::wgmma) (void)grouped_gemm_kernel(w.experts, layout);  // a forced kernel it cannot take
  if (ExpertPathRecord* rec = expert_path_options().record) {
    int64_t& n = path == ExpertPath::touched ? rec->touched
                 : path == ExpertPath::grouped ? rec->grouped
                 : path == ExpertPath::wgmma   ? rec->wgmma
                                               : rec->gemm;
    ++n;
  }
  const DeviceGuard device_guard(x.device.index);
  const Device dev = x.device;
  const bool latent = w.latent_down.w.present();
  const int64_t dl = latent ? w.latent_down.out_features() : d;
  const auto f32 = [&](const Scratch& b, int64_t rows, int64_t cols) {
    return TensorView(b.get(), DType::f32, {rows, cols}, dev);
  };

  // 1. Routing. On the touched path with E <= kRankMaxExperts and K <= kRankMaxK the grouping launch routes
  //    (group_kernel<true>: router_rank.cuh, the ids and weights of moe_router bit for bit).
  Scratch logits(size_t(t_count * e_count) * 4, s), sel(size_t(slots) * 4, s), wts(size_t(slots) * 4, s);
  cuda::linear(x, w.router, f32(logits, t_count, e_count), 0.f, ctx);
  const TensorView sel_v(sel.get(), DType::i32, {t_count, k}, dev);
  const bool route_in_group = touched && k <= kRankMaxK && e_count <= kRankMaxExperts;
  if (!route_in_group)
    cuda::moe_router(f32(logits, t_count, e_count), w.router_bias, router, sel_v, f32(wts, t_count, k), ctx);

  // 2. The expert input z [T, Dl]: f32 for the paths that read it in place (touched, grouped); in the operand
  //    dtype zt for the paths that gather it (bf16 when x is bf16: the rounding the gather would apply), and x
  //    itself without a latent when x already is zt (no copy).
  const bool gathers = path == ExpertPath::wgmma || path == ExpertPath::gemm;
  const DType zt = gathers && x.dtype == DType::bf16 ? DType::bf16 : DType::f32;
  std::optional<Scratch> z;
  TensorView zv = x;  // [T, Dl]
  if (latent || !gathers || x.dtype != zt) {
    z.emplace(size_t(t_count * dl) * dtype_size(zt), s);
    zv = TensorView(z->get(), zt, {t_count, dl}, dev);
    if (latent) cuda::linear(x, w.latent_down, zv, 0.f, ctx);
    else if (!touched) convert_view(x, z->get(), zt, dl, ctx);  // the touched path: group_kernel converts
  }

  // 3. Group slots by expert, all on the device.
  Scratch offsets(size_t(e_count + 1) * 4, s), row_of_slot(size_t(slots) * 4, s), token_of_row(size_t(slots) * 4, s);
  std::optional<Scratch> active;
  if (touched) {  // one launch (E <= kGroupMaxExperts: expert_path), the touched experts listed for the grids
    active.emplace(size_t(std::min(e_count, slots) + 1) * 4, s);  // [min(E, T*K)] list, then n_active
    GroupArgs g{};
    if (route_in_group) g.route = router_args(f32(logits, t_count, e_count), w.router_bias, router, sel_v,
                                              f32(wts, t_count, k));
    g.ids = sel.get<int32_t>();
    g.w = wts.get<float>();
    g.slots = int32_t(slots);
    g.k = int(k);
    g.e_count = int(e_count);
    g.offsets = offsets.get<int32_t>();
    g.row_of_slot = row_of_slot.get<int32_t>();
    g.token_of_row = token_of_row.get<int32_t>();
    g.active = active->get<int32_t>();
    g.n_active = active->get<int32_t>() + std::min(e_count, slots);
    if (ids.present()) g.ids_out = static_cast<int32_t*>(ids.data), g.ldi = t_count > 1 ? ids.stride(0) : k;
    if (weights.present()) g.w_out = static_cast<float*>(weights.data), g.ldw = t_count > 1 ? weights.stride(0) : k;
    if (!latent) {  // z = f32(x) in the same launch (z is not read before the expert launches)
      g.x = x.data, g.tx = elem_type(x.dtype), g.ldx = t_count > 1 ? x.stride(0) : d;
      g.x_rows = int32_t(t_count), g.x_cols = int32_t(d), g.z = z->get<float>();
    }
    programmatic_launch(route_in_group ? group_kernel<true> : group_kernel<false>, dim3(1), dim3(kGroupThreads),
                        group_smem_bytes(route_in_group, e_count), s, g);
    KIMI_CUDA_CHECK(cudaGetLastError());
  } else {
    copy_out(sel, t_count, k, ids, s);
    copy_out(wts, t_count, k, weights, s);
    Scratch count(size_t(e_count) * 4, s), cursor(size_t(e_count) * 4, s);
    KIMI_CUDA_CHECK(cudaMemsetAsync(count.get(), 0, size_t(e_count) * 4, s));
    count_kernel<<<grid_1d(slots, kThreads, "latent_moe"), kThreads, 0, s>>>(sel.get<int32_t>(), slots,
                                                                            count.get<int32_t>());
    KIMI_CUDA_CHECK(cudaGetLastError());
    offsets_kernel<<<1, kOffsetsThreads, 0, s>>>(count.get<int32_t>(), int(e_count), offsets.get<int32_t>(),
                                                 cursor.get<int32_t>());
    KIMI_CUDA_CHECK(cudaGetLastError());
    place_kernel<<<grid_1d(slots, kThreads, "latent_moe"), kThreads, 0, s>>>(
        sel.get<int32_t>(), slots, int(k), cursor.get<int32_t>(), row_of_slot.get<int32_t>(),
        token_of_row.get<int32_t>());
    KIMI_CUDA_CHECK(cudaGetLastError());
  }
  ExpertRows rows{offsets.get<int32_t>(), token_of_row.get<int32_t>(), slots, t_count};
  if (active) rows.active = active->get<int32_t>(), rows.n_active = active->get<int32_t>() + std::min(e_count, slots);

  // 4. The experts over their rows: ye [T*K, Dl] grouped order, bf16 on the tensor-core path (an activation between
  //    two ops: its fp32 sums rounded once, half the bytes of the down GEMM's write and the combine's read), else f32;
  //    the shared expert in the same launches when it reads z (no latent) and has the experts' shapes and format
  //    (ye rows T*K + t).
  const bool fuse_shared = touched && !latent && w.shared && touched_takes_shared(w.experts, *w.shared, t_count);
  const DType yt = path == ExpertPath::wgmma ? DType::bf16 : DType::f32;
  Scratch ye(size_t((slots + (fuse_shared ? t_count : 0)) * dl) * dtype_size(yt), s);
  if (touched) {
    experts_touched(z->get<float>(), dl, w.experts, layout, rows, act, fuse_shared ? w.shared : nullptr,
                    ye.get<float>(), s);
  } else if (path == ExpertPath::grouped) {
    experts_grouped(z->get<float>(), dl, w.experts, layout, rows, act, ye.get<float>(), s);
  } else {
    Scratch zg(size_t(slots * dl) * dtype_size(zt), s);  // zg [T*K, Dl] zt: zg[r] = z[token_of_row[r]]
    cuda::gather_rows(zv, Index{{}, TensorView(token_of_row.get(), DType::i32, {slots}, dev)},
                      TensorView(zg.get(), zt, {slots, dl}, dev), ctx);
    if (path == ExpertPath::wgmma) experts_wgmma(zg.get(), dl, w.experts, layout, rows, act, ye.get(), yt, s);
    else experts_gemm(zg.get(), zt, dl, w.experts, rows, act, ye.get<float>(), ctx);
  }

  // 5. Without a latent the combine is the one rounding into out: the weighted routed sum, plus the shared
  //    expert's f32 output (the touched launches' rows T*K .. T*K + T of ye, or cuda::mlp's ys [T, d], computed
  //    before the combine: x, which out may alias, is read by nothing after it), plus out's old value (beta 1).
  const int64_t ldo = t_count > 1 ? out.stride(0) : d;
  // y [T, Dl] of dtype code ty, rows ldy apart (=|+=, beta) sum_j w ye[row of slot (t, j)] (+ shared [T, Dl] f32)
  const auto combine = [&](const float* shared, void* y, int ty, int64_t ldy, float b) {
    const dim3 block(kThreads);
    if (yt == DType::bf16) {  // the tensor-core path: dl % 8 == 0 (expert_path's wgmma_ok), ye 256-byte aligned
      programmatic_launch(combine_bf16_kernel, dim3(grid_1d(t_count * (dl / kCombineCols), kThreads, "latent_moe")),
                          block, 0, s, ye.get<__nv_bfloat16>(), row_of_slot.get<int32_t>(), wts.get<float>(), int(k),
                          t_count, dl, shared, y, ty, ldy, b);
    } else {
      programmatic_launch(combine_kernel, dim3(grid_1d(t_count * dl, kThreads, "latent_moe")), block, 0, s,
                          ye.get<float>(), row_of_slot.get<int32_t>(), wts.get<float>(), int(k), t_count, dl, shared,
                          y, ty, ldy, b);
    }
    KIMI_CUDA_CHECK(cudaGetLastError());
  };
  if (!latent) {
    std::optional<Scratch> ys;
    const float* shared = fuse_shared ? ye.get<float>() + slots * dl : nullptr;
    if (w.shared && !fuse_shared) {
      ys.emplace(size_t(t_count * d) * 4, s);
      cuda::mlp(x, *w.shared, act, f32(*ys, t_count, d), 0.f, ctx);  // ys [T, d]
      shared = ys->get<float>();
    }
    combine(shared, out.data, elem_type(out.dtype), ldo, beta);
    return;
  }

  // 6. With a latent: the weighted sum into y f32 [T, Dl], latent RMSNorm (into yn: rms_norm does not promise
  //    in-place).
  Scratch y(size_t(t_count * dl) * 4, s);
  std::optional<Scratch> yn;
  const Scratch* yl = &y;
  combine(nullptr, y.get(), elem_type(DType::f32), dl, 0.f);
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

  // 7. Up-projection res f32 [T, d], the shared expert added into it, the one rounding into out.
  const Scratch res(size_t(t_count * d) * 4, s);
  cuda::linear(f32(*yl, t_count, dl), w.latent_up, f32(res, t_count, d), 0.f, ctx);
  if (w.shared) cuda::mlp(x, *w.shared, act, f32(res, t_count, d), 1.f, ctx);
  cuda::convert_rows(res.get(), DType::f32, d, out.data, out.dtype, ldo, t_count, d, ctx, beta);
}

}  // namespace kimi::cuda
