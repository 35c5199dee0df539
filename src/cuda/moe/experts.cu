// The routed experts of latent_moe (src/cuda/moe/experts.h): the tensor-core path, the grouped FFMA path and the
// cuBLAS path, and expert_path, the one rule that picks among them.
//   grouped: h = glu(z W1_e^T, z W3_e^T) for every grouped row (one launch, grouped.cuh, P = 2), ye = h W2_e^T
//            (one launch, P = 1); h f32 [T*K, I] scratch. The kernels take each expert's weight pointers from
//            base + e * stride when the experts are stacked, else from a table uploaded here per call.
//   wgmma:   the same pointers; a one-block M-tile scan of the device offsets, then H = bf16(glu(zg W1_e^T,
//            zg W3_e^T)) (one tensor-core launch, grouped_gemm.cuh, P = 2) and ye = H W2_e^T (one launch, P = 1);
//            H bf16 [T*K, I] scratch; no host sync.
//   gemm:    offsets -> host (the one sync), per expert with rows: G = zg_e W1^T, U = zg_e W3^T (f32), one glu
//            over all rows into H (the operand dtype), per expert ye_e = H_e W2^T (cuda::linear: one cuBLAS GEMM
//            per projection when the operands are bf16, GEMV for experts with <= 16 rows).
#include "cuda/moe/experts.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/linear/linear.h"
#include "cuda/kernel_attrs.cuh"
#include "cuda/moe/grouped.cuh"
#include "cuda/moe/grouped_gemm.cuh"
#include "cuda/moe/moe.h"
#include "cuda/scratch.cuh"

namespace kimi::cuda {

namespace {

using Proj = Weight MlpWeights::*;
constexpr Proj kProjs[3] = {&MlpWeights::gate, &MlpWeights::up, &MlpWeights::down};
constexpr const char* kProjNames[3] = {"gate", "up", "down"};
constexpr int64_t kMaxExperts = 65535;  // grid.y of the grouped kernels

int64_t row_stride(const TensorView& t, int64_t cols) { return t.size(0) > 1 ? t.stride(0) : cols; }
int64_t addr(const void* p) { return int64_t(reinterpret_cast<uintptr_t>(p)); }
std::string format_name(const Weight& w) { return w.is_mxfp4() ? "mxfp4" : std::string(dtype_name(w.w.dtype)); }

ExpertPtr ptr_of(const Weight& w) {
  const int64_t k = w.in_features();
  if (!w.is_mxfp4()) return {w.w.data, nullptr, row_stride(w.w, k), 0};
  return {w.w.data, static_cast<const uint8_t*>(w.scale.data), row_stride(w.w, k / 2), row_stride(w.scale, k / 32)};
}

// Expert e's pointers are expert 0's plus e strides (and all row strides agree).
bool is_stacked(std::span<const MlpWeights> ex, Proj p) {
  if (ex.size() == 1) return true;
  const ExpertPtr f = ptr_of(ex[0].*p), n = ptr_of(ex[1].*p);
  const int64_t ws = addr(n.w) - addr(f.w), ss = f.scale ? addr(n.scale) - addr(f.scale) : 0;
  for (size_t e = 0; e < ex.size(); ++e) {
    const ExpertPtr c = ptr_of(ex[e].*p);
    if (c.ldw != f.ldw || c.lds != f.lds || addr(c.w) - addr(f.w) != int64_t(e) * ws) return false;
    if (f.scale && addr(c.scale) - addr(f.scale) != int64_t(e) * ss) return false;
  }
  return true;
}

// The vector loads of grouped.cuh are legal for every expert of projection p (gemv.cuh's rules).
bool vec_ok(std::span<const MlpWeights> ex, Proj p) {
  for (const MlpWeights& m : ex) {
    const Weight& w = m.*p;
    const ExpertPtr q = ptr_of(w);
    const bool multi = w.out_features() > 1;
    if (w.is_mxfp4()) {
      if (addr(q.w) % 8 != 0 || (multi && q.ldw % 8 != 0)) return false;
    } else if (addr(q.w) % 16 != 0 || (multi && (q.ldw * int64_t(w.w.element_size())) % 16 != 0)) {
      return false;
    }
  }
  return true;
}

template <int MT, int P, class WF>
void launch_mt(const GroupedArgs& a, int64_t e_count, cudaStream_t s) {
  constexpr int NR = (MT <= 2 ? 2 : 4) * (P == 1 ? 2 : 1);  // 4 or 8 weight rows per block
  const dim3 grid(unsigned((a.n + NR - 1) / NR), unsigned(e_count));
  grouped_kernel<MT, NR, P, WF><<<grid, kGroupedThreads, 0, s>>>(a);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

template <int P, class WF>
void launch_wf(const GroupedArgs& a, int mt, int64_t e_count, cudaStream_t s) {
  switch (mt) {
    case 1: return launch_mt<1, P, WF>(a, e_count, s);
    case 2: return launch_mt<2, P, WF>(a, e_count, s);
    case 4: return launch_mt<4, P, WF>(a, e_count, s);
    default: return launch_mt<8, P, WF>(a, e_count, s);
  }
}

// The format of w (the same for every expert: expert_layout) picks the decoder.
template <int P>
void launch_grouped(const GroupedArgs& a, const Weight& w, int mt, int64_t e_count, cudaStream_t s) {
  if (w.is_mxfp4()) return launch_wf<P, Mxfp4W>(a, mt, e_count, s);
  switch (w.w.dtype) {
    case DType::f32: return launch_wf<P, DenseW<float>>(a, mt, e_count, s);
    case DType::bf16: return launch_wf<P, DenseW<__nv_bfloat16>>(a, mt, e_count, s);
    case DType::f16: return launch_wf<P, DenseW<__half>>(a, mt, e_count, s);
    default: throw Error("latent_moe: unsupported expert weight dtype " + std::string(dtype_name(w.w.dtype)) + " on CUDA");
  }
}

// Every projection's ExpertProj: base + e * stride for stacked experts, else a [3][E] device table of pointers
// uploaded into `table` (a pageable upload: not capturable, refused by the launcher under capture).
void expert_projs(std::span<const MlpWeights> experts, const ExpertLayout& layout, cudaStream_t s,
                  std::optional<Scratch>& table, ExpertProj (&proj)[3]) {
  const int64_t e_count = int64_t(experts.size());
  if (!layout.stacked) {
    std::vector<ExpertPtr> host;
    host.reserve(size_t(3 * e_count));
    for (const Proj p : kProjs)
      for (const MlpWeights& m : experts) host.push_back(ptr_of(m.*p));
    table.emplace(upload(host, s));
  }
  for (int p = 0; p < 3; ++p) {
    proj[p] = ExpertProj{};
    proj[p].first = ptr_of(experts[0].*kProjs[p]);
    if (table) {
      proj[p].table = table->get<ExpertPtr>() + int64_t(p) * e_count;
    } else if (e_count > 1) {
      const ExpertPtr n = ptr_of(experts[1].*kProjs[p]);
      proj[p].w_stride = addr(n.w) - addr(proj[p].first.w);
      proj[p].s_stride = n.scale ? addr(n.scale) - addr(proj[p].first.scale) : 0;
    }
  }
}

// The tensor-core path's requirements on every expert's projection p: dense bf16, 16-byte aligned rows
// (cp.async pieces), widths multiples of 8.
bool wgmma_ok(std::span<const MlpWeights> ex, Proj p) {
  for (const MlpWeights& m : ex) {
    const Weight& w = m.*p;
    if (w.is_mxfp4() || w.w.dtype != DType::bf16) return false;
    const ExpertPtr q = ptr_of(w);
    if (w.in_features() % 8 != 0 || w.out_features() % 8 != 0 || addr(q.w) % 16 != 0 || q.ldw % 8 != 0) return false;
  }
  return true;
}

// The tensor-core path's M-tile bound: at most floor(slots / BM) full tiles plus one partial tile per expert with
// rows (fixed on the host without the counts); CTAs past the real total exit at once. It is grid.y.
constexpr int64_t kMaxGridY = 65535;
int64_t wgmma_m_tiles(int64_t slots, int64_t e_count) { return slots / moe_gemm::kBM + std::min(e_count, slots); }

template <int P>
void launch_wgmma(const moe_gemm::Args& a, int64_t m_tiles, cudaStream_t s) {
  constexpr auto kernel = moe_gemm::grouped_gemm_kernel<P>;
  int dev = 0;
  KIMI_CUDA_CHECK(cudaGetDevice(&dev));
  allow_dynamic_smem<kernel>(dev, moe_gemm::kSmemBytes);
  const dim3 grid(unsigned((a.n + moe_gemm::kBN<P> - 1) / moe_gemm::kBN<P>), unsigned(m_tiles));
  kernel<<<grid, moe_gemm::kThreads, moe_gemm::kSmemBytes, s>>>(a);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

ExpertPath expert_path(int64_t slots, DType x_dtype, std::span<const MlpWeights> experts) {
  const int64_t e_count = int64_t(experts.size());
  const bool dense_bf16 =
      wgmma_ok(experts, kProjs[0]) && wgmma_ok(experts, kProjs[1]) && wgmma_ok(experts, kProjs[2]);
  // Tensor cores at every row count when they apply: on the H200 they stream the touched experts faster than the
  // grouped FFMA kernels from 1 token on (docs/ops/moe.md "Which path").
  if (x_dtype == DType::bf16 && dense_bf16 && wgmma_m_tiles(slots, e_count) <= kMaxGridY) return ExpertPath::wgmma;
  if (slots <= kGroupedMaxRowsPerExpert * e_count) return ExpertPath::grouped;  // average rows per expert
  return ExpertPath::gemm;
}

ExpertLayout expert_layout(std::span<const MlpWeights> experts) {
  const int64_t e_count = int64_t(experts.size());
  if (e_count > kMaxExperts)
    throw Error("latent_moe: argument 'w.experts': expected at most " + std::to_string(kMaxExperts) +
                " experts on CUDA, got " + std::to_string(e_count));
  const int64_t inter = experts[0].gate.out_features();
  for (size_t e = 1; e < experts.size(); ++e) {  // the experts share [T*K, I] scratch buffers
    if (experts[e].gate.out_features() != inter)
      throw Error("latent_moe: argument 'w.experts[" + std::to_string(e) + "]': expected the intermediate size of " +
                  "expert 0 on CUDA (" + std::to_string(inter) + "), got " +
                  std::to_string(experts[e].gate.out_features()));
    for (int p = 0; p < 3; ++p) {  // one decoder per projection in the grouped kernels
      const Weight &w0 = experts[0].*kProjs[p], &w = experts[e].*kProjs[p];
      if (format_name(w) != format_name(w0))
        throw Error("latent_moe: argument 'w.experts[" + std::to_string(e) + "]." + kProjNames[p] +
                    "': expected the weight format of expert 0 on CUDA (" + format_name(w0) + "), got " +
                    format_name(w));
    }
  }
  ExpertLayout l;
  for (const Proj p : kProjs) l.stacked = l.stacked && is_stacked(experts, p);
  return l;
}

void experts_grouped(const float* z, int64_t dl, std::span<const MlpWeights> experts, const ExpertLayout& layout,
                     const ExpertRows& rows, const GluParams& act, float* ye, cudaStream_t s) {
  const int64_t e_count = int64_t(experts.size()), inter = experts[0].gate.out_features();
  // Rows per group MT: twice the average rows per expert (rounded up to 1, 2, 4 or 8), and never above T (an
  // expert holds at most T rows: a token's K experts are distinct). Experts with more rows loop over groups,
  // re-reading their weight tile from L2; a narrower MT keeps fewer registers (more blocks in flight per SM,
  // the bandwidth-bound case). The results do not depend on MT (each row's sums are formed the same way).
  const int64_t want = std::min<int64_t>(rows.tokens, 2 * ((rows.slots + e_count - 1) / e_count));
  const int mt = want <= 1 ? 1 : want <= 2 ? 2 : want <= 4 ? 4 : 8;

  std::optional<Scratch> table;
  ExpertProj proj[3];
  expert_projs(experts, layout, s, table, proj);

  Scratch h(size_t(rows.slots * inter) * sizeof(float), s);  // [T*K, I] grouped
  GroupedArgs gu{};
  gu.offsets = rows.offsets;
  gu.src_row = rows.token_of_row;
  gu.x = z;
  gu.ldx = dl;
  gu.proj[0] = proj[0];
  gu.proj[1] = proj[1];
  gu.n = inter;
  gu.k = dl;
  gu.y = h.get<float>();
  gu.ldy = inter;
  gu.situ = act.act == GluAct::situ ? 1 : 0;
  gu.beta = act.situ_beta;
  gu.lbeta = act.situ_linear_beta;
  gu.vec = dl % 4 == 0 && vec_ok(experts, kProjs[0]) && vec_ok(experts, kProjs[1]);  // z: aligned scratch
  launch_grouped<2>(gu, experts[0].gate, mt, e_count, s);

  GroupedArgs dn{};
  dn.offsets = rows.offsets;
  dn.x = h.get<float>();
  dn.ldx = inter;
  dn.proj[0] = proj[2];
  dn.n = dl;
  dn.k = inter;
  dn.y = ye;
  dn.ldy = dl;
  dn.vec = inter % 4 == 0 && vec_ok(experts, kProjs[2]);
  launch_grouped<1>(dn, experts[0].down, mt, e_count, s);
}

void experts_wgmma(const void* zg, int64_t dl, std::span<const MlpWeights> experts, const ExpertLayout& layout,
                   const ExpertRows& rows, const GluParams& act, float* ye, cudaStream_t s) {
  const int64_t e_count = int64_t(experts.size()), inter = experts[0].gate.out_features();
  std::optional<Scratch> table;
  ExpertProj proj[3];
  expert_projs(experts, layout, s, table, proj);

  // M-tile prefix tile_off [E + 1] from the device offsets.
  Scratch tile_off(size_t(e_count + 1) * 4, s);
  moe_gemm::mtile_offsets_kernel<<<1, moe_gemm::kScanThreads, 0, s>>>(rows.offsets, int(e_count),
                                                                      tile_off.get<int32_t>());
  KIMI_CUDA_CHECK(cudaGetLastError());
  const int64_t m_tiles = wgmma_m_tiles(rows.slots, e_count);  // <= kMaxGridY (expert_path)

  Scratch h(size_t(rows.slots * inter) * 2, s);  // H bf16 [T*K, I] grouped
  moe_gemm::Args gu{};
  gu.offsets = rows.offsets;
  gu.tile_off = tile_off.get<int32_t>();
  gu.e_count = int(e_count);
  gu.a = static_cast<const __nv_bfloat16*>(zg);
  gu.lda = dl;
  gu.proj[0] = proj[0];
  gu.proj[1] = proj[1];
  gu.n = inter;
  gu.k = dl;
  gu.y = h.get();
  gu.ldy = inter;
  gu.situ = act.act == GluAct::situ ? 1 : 0;
  gu.beta = act.situ_beta;
  gu.lbeta = act.situ_linear_beta;
  launch_wgmma<2>(gu, m_tiles, s);

  moe_gemm::Args dn = gu;
  dn.a = h.get<__nv_bfloat16>();
  dn.lda = inter;
  dn.proj[0] = proj[2];
  dn.proj[1] = proj[2];
  dn.n = dl;
  dn.k = inter;
  dn.y = ye;
  dn.ldy = dl;
  launch_wgmma<1>(dn, m_tiles, s);
}

void experts_gemm(const void* zg, DType op, int64_t dl, std::span<const MlpWeights> experts, const ExpertRows& rows,
                  const GluParams& act, float* ye, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const int64_t e_count = int64_t(experts.size()), inter = experts[0].gate.out_features(), slots = rows.slots;
  const Device dev = experts[0].gate.w.device;
  // NOTE: the one host synchronisation of latent_moe, on this (prefill) path only: cuBLAS takes its shapes
  // from the host.
  std::vector<int32_t> off(size_t(e_count) + 1);
  KIMI_CUDA_CHECK(cudaMemcpyAsync(off.data(), rows.offsets, off.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, s));
  KIMI_CUDA_CHECK(cudaStreamSynchronize(s));

  const int64_t oes = int64_t(dtype_size(op));
  Scratch g(size_t(slots * inter) * 4, s), u(size_t(slots * inter) * 4, s), h(size_t(slots * inter * oes), s);
  // Expert e's rows of a grouped [T*K, cols] buffer of dtype t.
  const auto rows_of = [&](const void* b, DType t, int64_t cols, size_t e) {
    const int64_t count = off[e + 1] - off[e];
    void* p = const_cast<char*>(static_cast<const char*>(b)) + int64_t(off[e]) * cols * int64_t(dtype_size(t));
    return TensorView(p, t, {count, cols}, dev);
  };
  for (size_t e = 0; e < size_t(e_count); ++e) {
    if (off[e + 1] == off[e]) continue;
    cuda::linear(rows_of(zg, op, dl, e), experts[e].gate, rows_of(g.get(), DType::f32, inter, e), 0.f, ctx);
    cuda::linear(rows_of(zg, op, dl, e), experts[e].up, rows_of(u.get(), DType::f32, inter, e), 0.f, ctx);
  }
  const TensorView gv(g.get(), DType::f32, {slots, inter}, dev), uv(u.get(), DType::f32, {slots, inter}, dev);
  cuda::glu(gv, uv, act, TensorView(h.get(), op, {slots, inter}, dev), ctx);
  for (size_t e = 0; e < size_t(e_count); ++e)
    if (off[e + 1] != off[e])
      cuda::linear(rows_of(h.get(), op, inter, e), experts[e].down, rows_of(ye, DType::f32, dl, e), 0.f, ctx);
}

}  // namespace kimi::cuda
