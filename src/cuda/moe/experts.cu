// The routed experts of latent_moe (src/cuda/moe/experts.h): the touched path, the tensor-core path, the grouped
// FFMA path and the cuBLAS path, and expert_path, the one rule that picks among them.
//   touched: h = glu(z W1_e^T, z W3_e^T) for every grouped row (one launch, touched.cuh, P = 2), ye = h W2_e^T
//            (one launch, P = 1); h f32 [T*K (+ T), I] scratch. The grids cover the touched experts only (the
//            list group_kernel wrote, ExpertRows::active); a shared expert of the experts' shapes and format
//            rides in the same two launches (rows T*K .. T*K + T of h and ye). Two register tiles (in flight,
//            streaming: launch_touched_mt), chosen by ExpertPathOptions::touched_tile.
//   grouped: the same two launches (grouped.cuh) with one grid row per expert; h f32 [T*K, I] scratch.
//            Both FFMA paths take each expert's weight pointers from base + e * stride when the experts are
//            stacked, else from a table uploaded here per call.
//   wgmma:   the same pointers; a one-block M-tile scan of the device offsets, then H = bf16(glu(zg W1_e^T,
//            zg W3_e^T)) (one tensor-core launch, P = 2) and ye = H W2_e^T (one launch, P = 1); H bf16 [T*K, I]
//            scratch; no host sync. The kernel (grouped_gemm_kernel, options.h GroupedGemmKernel): stacked dense
//            bf16 experts take grouped_gemm_ws.cuh (warp-specialized, persistent: tensor maps of zg / H and of
//            each projection's stacked [E, n, k] weights, encoded on the host per call), all others
//            grouped_gemm.cuh (cp.async; MXFP4 decoded in shared memory).
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
#include "cuda/moe/grouped_gemm_ws.cuh"
#include "cuda/moe/moe.h"
#include "cuda/moe/touched.cuh"
#include "cuda/runtime.h"
#include "cuda/scratch.cuh"
#include "cuda/tensor_map.h"

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

// Warps per column group splitting K for the in-flight tile (touched.cuh): the fewest (1, 2, 4) that leave a lane
// at most 4 chunks of a row, from K and the format alone (so an output's summation order never depends on MT, NR
// or U within the tile).
int touched_ks(int64_t k, int chunk) {
  const int64_t chunks = k / chunk;
  int ks = 1;
  while (ks < kTouchedWarps && chunks > int64_t(32) * ks * 4) ks *= 2;
  return ks;
}

// The two register tiles of touched.cuh (ExpertPathOptions::touched_tile), columns per group NR, chunks in flight
// per lane U and warps splitting K ks:
//   in flight (kStream false): ks from K (touched_ks); at MT <= 2 two columns of each projection and 4 chunks per
//     row (gate+up: 16 loads = 256 bytes of bf16 in flight per lane, down: 8 = 128 bytes); with more rows per
//     group the accumulators grow, so U drops to 2 (down's columns grow to 4, sharing each x load). f32 chunks are
//     twice as wide: half the chunks (a quarter for down at MT = 2, which spills at 2). 72-168 registers. At
//     MT = 1 (T = 1) a block streams several column tiles (tiles_per_block: one wave of blocks), the next tile's
//     first round issued before the current tile's reduction.
//   streaming (kStream true): the grouped kernels' tile (grouped.cuh): all four warps split K (ks = 4), one chunk
//     per weight row in flight, NR = 2 (MT <= 2) or 4 columns of each projection, twice that for down: 4 or 8
//     weight rows per lane, so each x value loaded serves twice as many weight rows as the in-flight tile's at
//     MT >= 2; the x rows computed once per row group; every warp's sums through shared memory (the accumulators
//     die at their shuffle). 61-128 registers at MT <= 2, 168 at MT = 4 (MXFP4: 254), 214-254 at MT = 8 (the
//     grouped kernels: 128-168, MXFP4 254); 8-20 byte spills in two instantiations of the non-production
//     formats (f16 gate+up at MT 2, f32 gate+up at MT 1) (ptxas -v, sm_90a).
// Column tiles per block of the in-flight tile at MT = 1 (touched.cuh kEarly: the next tile's first round is
// issued before the current tile's reduction): `forced` when > 0 (ExpertPathOptions::touched_tiles_per_block),
// else the fewest that fit every block of the launch in one wave (per_sm blocks, the kernel's occupancy, on all
// SMs but one, which may still run group_kernel), so the blocks pay their prologue once and keep loads in flight
// across tiles.
int tiles_per_block(int per_sm, int64_t tiles_x, int64_t blocks_y, int forced) {
  if (forced > 0) return forced;
  int dev = 0;
  KIMI_CUDA_CHECK(cudaGetDevice(&dev));
  const int64_t capacity = std::max<int64_t>(1, int64_t(per_sm) * (sm_count(dev) - 1));
  int64_t f = std::max<int64_t>(1, (tiles_x * blocks_y + capacity - 1) / capacity);
  while (f < tiles_x && blocks_y * ((tiles_x + f - 1) / f) > capacity) ++f;
  return int(f);
}

template <int MT, int P, class WF, bool kStream>
void launch_touched_mt(TouchedArgs a, int64_t blocks_y, cudaStream_t s) {
  constexpr bool wide = sizeof(typename WF::Raw) >= 32;  // f32: 32-byte chunks
  constexpr int NR = kStream ? (MT <= 2 ? 2 : 4) * (P == 1 ? 2 : 1) : (P == 2 || MT <= 2 ? 2 : 4);
  constexpr int U0 = MT <= 2 ? 4 : 2;
  constexpr int U = kStream ? 1 : !wide ? U0 : (P == 1 && MT == 2) ? 1 : U0 / 2;
  constexpr auto kernel = touched_kernel<MT, NR, U, P, WF, kStream>;
  a.ks = kStream ? kTouchedWarps : touched_ks(a.k, WF::kChunk);
  const int64_t cols = int64_t(NR) * (kTouchedWarps / a.ks);  // output columns per block and projection
  const int64_t tiles_x = (a.n + cols - 1) / cols;
  int per_block = 1;
  if constexpr (!kStream && MT == 1) {
    static const int per_sm = [] {  // blocks per SM (one GPU model per process)
      int n = 0;
      KIMI_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kTouchedThreads, 0));
      return n;
    }();
    per_block = tiles_per_block(per_sm, tiles_x, blocks_y, expert_path_options().touched_tiles_per_block);
  }
  a.tiles_x = int32_t(tiles_x);
  const dim3 grid(unsigned((tiles_x + per_block - 1) / per_block), unsigned(blocks_y));
  programmatic_launch(kernel, grid, dim3(kTouchedThreads), 0, s, a);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

template <int P, class WF, bool kStream>
void launch_touched_wf(const TouchedArgs& a, int mt, int64_t blocks_y, cudaStream_t s) {
  switch (mt) {
    case 1: return launch_touched_mt<1, P, WF, kStream>(a, blocks_y, s);
    case 2: return launch_touched_mt<2, P, WF, kStream>(a, blocks_y, s);
    case 4: return launch_touched_mt<4, P, WF, kStream>(a, blocks_y, s);
    default: return launch_touched_mt<8, P, WF, kStream>(a, blocks_y, s);
  }
}

template <int P, class WF>
void launch_touched_tile(const TouchedArgs& a, int mt, bool stream, int64_t blocks_y, cudaStream_t s) {
  if (stream) return launch_touched_wf<P, WF, true>(a, mt, blocks_y, s);
  return launch_touched_wf<P, WF, false>(a, mt, blocks_y, s);
}

template <int P>
void launch_touched(const TouchedArgs& a, const Weight& w, int mt, bool stream, int64_t blocks_y, cudaStream_t s) {
  if (w.is_mxfp4()) return launch_touched_tile<P, Mxfp4W>(a, mt, stream, blocks_y, s);
  switch (w.w.dtype) {
    case DType::f32: return launch_touched_tile<P, DenseW<float>>(a, mt, stream, blocks_y, s);
    case DType::bf16: return launch_touched_tile<P, DenseW<__nv_bfloat16>>(a, mt, stream, blocks_y, s);
    case DType::f16: return launch_touched_tile<P, DenseW<__half>>(a, mt, stream, blocks_y, s);
    default: throw Error("latent_moe: unsupported expert weight dtype " + std::string(dtype_name(w.w.dtype)) + " on CUDA");
  }
}

// Rows per group MT of the decode kernels: twice the average rows per expert (rounded up to 1, 2, 4 or 8), and
// never above T (an expert holds at most T rows: a token's K experts are distinct). Experts with more rows loop
// over groups, re-reading their weight tile from L2; a narrower MT keeps fewer registers (more blocks in flight
// per SM, the bandwidth-bound case). The results do not depend on MT (each row's sums are formed the same way).
int decode_mt(const ExpertRows& rows, int64_t e_count) {
  const int64_t want = std::min<int64_t>(rows.tokens, 2 * ((rows.slots + e_count - 1) / e_count));
  return want <= 1 ? 1 : want <= 2 ? 2 : want <= 4 ? 4 : 8;
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

// The arguments both FFMA decode paths build (grouped.cuh GroupedArgs, touched.cuh TouchedArgs: the same fields
// by name; the touched path adds its own): the gate/up launch (P = 2: z f32 [T, dl] rows dl apart, the x row of
// grouped row r token_of_row[r] -> h f32 [T*K, I] = glu(z W1_e^T, z W3_e^T) grouped) and the down launch (P = 1:
// h -> ye f32 [T*K, dl] = h W2_e^T). vec: the vector loads, legal for rows of a multiple of 4 columns (z and h
// are aligned scratch) and every expert's projection (vec_ok).
template <class Args>
struct FfmaArgs {
  Args gate_up{}, down{};
};

template <class Args>
FfmaArgs<Args> ffma_args(std::span<const MlpWeights> experts, const ExpertRows& rows, const GluParams& act,
                         const ExpertProj (&proj)[3], const float* z, int64_t dl, float* h, float* ye) {
  const int64_t inter = experts[0].gate.out_features();
  FfmaArgs<Args> a;
  Args& gu = a.gate_up;
  gu.offsets = rows.offsets;
  gu.src_row = rows.token_of_row;
  gu.x = z;
  gu.ldx = dl;
  gu.proj[0] = proj[0];
  gu.proj[1] = proj[1];
  gu.n = inter;
  gu.k = dl;
  gu.y = h;
  gu.ldy = inter;
  gu.situ = act.act == GluAct::situ ? 1 : 0;
  gu.beta = act.situ_beta;
  gu.lbeta = act.situ_linear_beta;
  gu.vec = dl % 4 == 0 && vec_ok(experts, kProjs[0]) && vec_ok(experts, kProjs[1]);
  Args& dn = a.down;
  dn.offsets = rows.offsets;
  dn.x = h;
  dn.ldx = inter;
  dn.proj[0] = proj[2];
  dn.n = dl;
  dn.k = inter;
  dn.y = ye;
  dn.ldy = dl;
  dn.vec = inter % 4 == 0 && vec_ok(experts, kProjs[2]);
  return a;
}

// The tensor-core path's requirements on every expert's projection p: dense bf16 or MXFP4 (as expert 0: one
// format per projection), 16-byte aligned rows (cp.async pieces: ldw a multiple of 8 bf16 elements or of 16 packed
// bytes), widths multiples of 8.
bool wgmma_ok(std::span<const MlpWeights> ex, Proj p) {
  const bool mx = (ex[0].*p).is_mxfp4();
  for (const MlpWeights& m : ex) {
    const Weight& w = m.*p;
    if (w.is_mxfp4() != mx || (!mx && w.w.dtype != DType::bf16)) return false;
    const ExpertPtr q = ptr_of(w);
    if (w.in_features() % 8 != 0 || w.out_features() % 8 != 0 || addr(q.w) % 16 != 0 || q.ldw % (mx ? 16 : 8) != 0)
      return false;
  }
  return true;
}

// The tensor-core path's M-tile bound: at most floor(slots / BM) full tiles plus one partial tile per expert with
// rows (fixed on the host without the counts); CTAs past the real total exit at once. It is grid.y.
constexpr int64_t kMaxGridY = 65535;
int64_t wgmma_m_tiles(int64_t slots, int64_t e_count) { return slots / moe_gemm::kBM + std::min(e_count, slots); }

template <int P, bool kMx>
void launch_wgmma_as(const moe_gemm::Args& a, int64_t m_tiles, cudaStream_t s) {
  constexpr auto kernel = moe_gemm::grouped_gemm_kernel<P, kMx>;
  constexpr int smem = moe_gemm::kSmemBytes<kMx>;
  int dev = 0;
  KIMI_CUDA_CHECK(cudaGetDevice(&dev));
  allow_dynamic_smem<kernel>(dev, smem);
  const dim3 grid(unsigned((a.n + moe_gemm::kBN<P> - 1) / moe_gemm::kBN<P>), unsigned(m_tiles));
  kernel<<<grid, moe_gemm::kThreads, smem, s>>>(a);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

// The projection's weight format (one per projection: wgmma_ok) picks the kernel.
template <int P>
void launch_wgmma(const moe_gemm::Args& a, const Weight& w, int64_t m_tiles, cudaStream_t s) {
  if (w.is_mxfp4()) return launch_wgmma_as<P, true>(a, m_tiles, s);
  launch_wgmma_as<P, false>(a, m_tiles, s);
}

// Why the warp-specialized kernel (grouped_gemm_ws.cuh) cannot take these experts, or null where it can: dense
// bf16 experts (wgmma_ok holds: the caller is the tensor-core path), stacked, each projection's expert stride a
// positive multiple of 16 bytes (a tensor-map stride) unless there is one expert.
const char* ws_refusal(std::span<const MlpWeights> experts, const ExpertLayout& layout) {
  if (experts[0].gate.is_mxfp4() || experts[0].down.is_mxfp4()) return "MXFP4 experts";
  if (!layout.stacked) return "experts not stacked (separately allocated)";
  if (experts.size() > 1)
    for (const Proj p : kProjs) {
      const int64_t stride = addr((experts[1].*p).w.data) - addr((experts[0].*p).w.data);
      if (stride <= 0 || stride % 16 != 0) return "an expert stride not a positive multiple of 16 bytes";
    }
  return nullptr;
}

// Encodes a bf16 tensor map of rank 2 or 3 (dims innermost first, strides in bytes of dims 1 ..), 128B swizzle,
// zeros outside the tensor; throws naming `what` where the driver refuses it.
void encode_bf16_map(CUtensorMap& map, const void* base, int rank, const cuuint64_t* dims, const cuuint64_t* strides,
                     const cuuint32_t* box, const char* what) {
  const auto encode = tensor_map_encoder();
  if (!encode)
    throw Error("latent_moe: the warp-specialized grouped GEMM needs the driver's cuTensorMapEncodeTiled, which this "
                "driver lacks (force ExpertPathOptions::grouped_gemm = cp_async)");
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, cuuint32_t(rank), const_cast<void*>(base), dims,
                            strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(std::string("latent_moe: cuTensorMapEncodeTiled refused the ") + what + " map (CUresult " +
                std::to_string(int(r)) + ")");
}

// One launch of grouped_gemm_ws.cuh for the projection(s) of `a` (a.proj[0], and a.proj[1] at P = 2): A [rows, k]
// and the weights as tensor maps, a persistent grid of min(SMs, n_tiles * m_tiles) CTAs.
template <int P>
void launch_wgmma_ws(const moe_gemm::Args& a, int64_t rows, int64_t e_count, int64_t m_tiles, cudaStream_t s) {
  moe_gemm::WsArgs w{};
  w.g = a;
  w.n_tiles = int((a.n + moe_gemm::kBN<P> - 1) / moe_gemm::kBN<P>);
  w.k_tiles = int((a.k + moe_gemm::kBK - 1) / moe_gemm::kBK);
  const cuuint64_t a_dims[2] = {cuuint64_t(a.k), cuuint64_t(std::max<int64_t>(rows, 1))};
  const cuuint64_t a_strides[1] = {cuuint64_t(a.lda * 2)};
  const cuuint32_t a_box[2] = {moe_gemm::kBK, moe_gemm::kBM};
  encode_bf16_map(w.a_map, a.a, 2, a_dims, a_strides, a_box, "grouped rows (A)");
  for (int p = 0; p < P; ++p) {
    const ExpertPtr& f = a.proj[p].first;
    const int64_t row_bytes = f.ldw * 2;
    const int64_t e_bytes = e_count > 1 ? a.proj[p].w_stride : row_bytes * a.n;  // one expert: never stepped
    const cuuint64_t dims[3] = {cuuint64_t(a.k), cuuint64_t(a.n), cuuint64_t(e_count)};
    const cuuint64_t strides[2] = {cuuint64_t(row_bytes), cuuint64_t(e_bytes)};
    const cuuint32_t box[3] = {moe_gemm::kBK, moe_gemm::kWsBoxRows<P>, 1};
    encode_bf16_map(w.w_map[p], f.w, 3, dims, strides, box,
                    p == 0 ? "expert weights (W1 or W2)" : "expert weights (W3)");
  }
  constexpr auto kernel = moe_gemm::grouped_gemm_ws_kernel<P>;
  int dev = 0;
  KIMI_CUDA_CHECK(cudaGetDevice(&dev));
  allow_dynamic_smem<kernel>(dev, moe_gemm::kWsSmemBytes);
  const int64_t grid = std::min<int64_t>(sm_count(dev), int64_t(w.n_tiles) * m_tiles);
  kernel<<<unsigned(std::max<int64_t>(grid, 1)), moe_gemm::kWsThreads, moe_gemm::kWsSmemBytes, s>>>(w);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

ExpertPath expert_path(int64_t tokens, int64_t slots, DType x_dtype, std::span<const MlpWeights> experts) {
  const int64_t e_count = int64_t(experts.size());
  // gate and up share a launch, so they share a format
  const bool tensor_core_weights = wgmma_ok(experts, kProjs[0]) && wgmma_ok(experts, kProjs[1]) &&
                                   wgmma_ok(experts, kProjs[2]) &&
                                   experts[0].gate.is_mxfp4() == experts[0].up.is_mxfp4();
  const bool tensor_cores =
      x_dtype == DType::bf16 && tensor_core_weights && wgmma_m_tiles(slots, e_count) <= kMaxGridY;
  if (slots <= kGroupedMaxRowsPerExpert * e_count) {  // average rows per expert: decode, the options' choice
    const ExpertPathOptions& o = expert_path_options();
    const bool touched_ok = e_count <= kGroupMaxExperts;  // the one-block grouping
    switch (o.decode) {
      case DecodeExpertPath::touched:
        if (touched_ok) return ExpertPath::touched;
        break;
      case DecodeExpertPath::tensor_cores: return tensor_cores ? ExpertPath::wgmma : ExpertPath::grouped;
      case DecodeExpertPath::grouped: return ExpertPath::grouped;
      case DecodeExpertPath::automatic:
        if (touched_ok && tokens <= o.touched_max_tokens) return ExpertPath::touched;
        break;
    }
  }
  // Tensor cores at every row count when they apply: on the H200 they stream the touched experts faster than the
  // grouped FFMA kernels from 1 token on (docs/ops/moe.md "Which path").
  if (tensor_cores) return ExpertPath::wgmma;
  if (slots <= kGroupedMaxRowsPerExpert * e_count) return ExpertPath::grouped;
  return ExpertPath::gemm;
}

GroupedGemmKernel grouped_gemm_kernel(std::span<const MlpWeights> experts, const ExpertLayout& layout) {
  const GroupedGemmKernel want = expert_path_options().grouped_gemm;
  const char* refusal = ws_refusal(experts, layout);
  if (want == GroupedGemmKernel::warp_specialized && refusal)
    throw Error(std::string("latent_moe: ExpertPathOptions::grouped_gemm = warp_specialized, but the experts cannot "
                            "take the warp-specialized kernel: ") + refusal);
  return !refusal && want != GroupedGemmKernel::cp_async ? GroupedGemmKernel::warp_specialized
                                                         : GroupedGemmKernel::cp_async;
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

bool touched_takes_shared(std::span<const MlpWeights> experts, const MlpWeights& shared, int64_t tokens) {
  if (tokens > kTouchedMaxSharedTokens) return false;
  for (int p = 0; p < 3; ++p) {
    const Weight &w0 = experts[0].*kProjs[p], &w = shared.*kProjs[p];
    if (format_name(w) != format_name(w0) || w.in_features() != w0.in_features() ||
        w.out_features() != w0.out_features())
      return false;
  }
  return true;
}

void experts_touched(const float* z, int64_t dl, std::span<const MlpWeights> experts, const ExpertLayout& layout,
                     const ExpertRows& rows, const GluParams& act, const MlpWeights* shared, float* ye,
                     cudaStream_t s) {
  const int64_t e_count = int64_t(experts.size()), inter = experts[0].gate.out_features();
  const int mt = decode_mt(rows, e_count);  // from the routed rows only (the shared rows take their own grid rows)
  // The register tile (options.h): automatic takes the in-flight tile at MT = 1 (T = 1) and streaming above.
  const ExpertPathOptions& opt = expert_path_options();
  const bool stream =
      opt.touched_tile == TouchedTile::streaming || (opt.touched_tile == TouchedTile::automatic && mt >= 2);

  std::optional<Scratch> table;
  ExpertProj proj[3];
  expert_projs(experts, layout, s, table, proj);

  // Grid rows: ceil(T / MT) rows of the fused shared expert (over T rows after the routed ones in h and ye), then
  // the touched experts (at most min(E, T*K)). grid.y <= kGroupMaxExperts + kTouchedMaxSharedTokens.
  const int64_t routed_rows = std::min(e_count, rows.slots);
  const int64_t shared_grid = shared ? (rows.tokens + mt - 1) / mt : 0;
  const int64_t blocks_y = shared_grid + routed_rows;
  if (!rows.active || !rows.n_active || blocks_y > kMaxExperts)  // latent_moe passes group_kernel's list, E <= 12000
    throw Error("latent_moe: the touched-expert path needs the device list of touched experts and at most " +
                std::to_string(kMaxExperts) + " grid rows, got " + std::to_string(blocks_y) +
                (rows.active ? "" : " and no list"));
  const int64_t h_rows = rows.slots + (shared ? rows.tokens : 0);
  Scratch h(size_t(h_rows * inter) * sizeof(float), s);  // [T*K (+ T), I] grouped
  const auto with_shared = [&](TouchedArgs& a, int p0, int np, int64_t src0) {
    if (!shared) return;
    for (int p = 0; p < np; ++p) a.shared[p] = ptr_of(shared->*kProjs[p0 + p]);
    a.shared_rows = int32_t(rows.tokens);
    a.shared_row0 = int32_t(rows.slots);
    a.shared_src0 = int32_t(src0);
    a.shared_grid = int32_t(shared_grid);
  };
  const auto shared_vec = [&](int p) { return !shared || vec_ok(std::span<const MlpWeights>(shared, 1), kProjs[p]); };
  FfmaArgs<TouchedArgs> args = ffma_args<TouchedArgs>(experts, rows, act, proj, z, dl, h.get<float>(), ye);
  for (TouchedArgs* a : {&args.gate_up, &args.down}) {
    a->active = rows.active;
    a->n_active = rows.n_active;
  }
  args.down.list_ready = 1;  // the gate/up launch triggers its dependents after its wait (touched.cuh)
  TouchedArgs& gu = args.gate_up;
  gu.vec = gu.vec && shared_vec(0) && shared_vec(1);
  with_shared(gu, 0, 2, rows.slots);  // x row of shared row T*K + t: token t
  launch_touched<2>(gu, experts[0].gate, mt, stream, blocks_y, s);

  TouchedArgs& dn = args.down;
  dn.vec = dn.vec && shared_vec(2);
  with_shared(dn, 2, 1, 0);  // h row r feeds ye row r
  launch_touched<1>(dn, experts[0].down, mt, stream, blocks_y, s);
  if (opt.record) ++(stream ? opt.record->touched_streaming : opt.record->touched_in_flight);
}

void experts_grouped(const float* z, int64_t dl, std::span<const MlpWeights> experts, const ExpertLayout& layout,
                     const ExpertRows& rows, const GluParams& act, float* ye, cudaStream_t s) {
  const int64_t e_count = int64_t(experts.size()), inter = experts[0].gate.out_features();
  const int mt = decode_mt(rows, e_count);

  std::optional<Scratch> table;
  ExpertProj proj[3];
  expert_projs(experts, layout, s, table, proj);

  Scratch h(size_t(rows.slots * inter) * sizeof(float), s);  // [T*K, I] grouped
  const FfmaArgs<GroupedArgs> args = ffma_args<GroupedArgs>(experts, rows, act, proj, z, dl, h.get<float>(), ye);
  launch_grouped<2>(args.gate_up, experts[0].gate, mt, e_count, s);
  launch_grouped<1>(args.down, experts[0].down, mt, e_count, s);
}

void experts_wgmma(const void* zg, int64_t dl, std::span<const MlpWeights> experts, const ExpertLayout& layout,
                   const ExpertRows& rows, const GluParams& act, void* ye, DType yt, cudaStream_t s) {
  if (yt != DType::f32 && yt != DType::bf16)
    throw Error("experts_wgmma: argument 'yt': expected f32 or bf16, got " + std::string(dtype_name(yt)));
  const int64_t e_count = int64_t(experts.size()), inter = experts[0].gate.out_features();
  const bool ws = grouped_gemm_kernel(experts, layout) == GroupedGemmKernel::warp_specialized;  // throws first
  if (ExpertPathRecord* rec = expert_path_options().record) ++(ws ? rec->wgmma_warp_specialized : rec->wgmma_cp_async);
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
  if (ws) launch_wgmma_ws<2>(gu, rows.slots, e_count, m_tiles, s);
  else launch_wgmma<2>(gu, experts[0].gate, m_tiles, s);

  moe_gemm::Args dn = gu;
  dn.a = h.get<__nv_bfloat16>();
  dn.lda = inter;
  dn.proj[0] = proj[2];
  dn.proj[1] = proj[2];
  dn.n = dl;
  dn.k = inter;
  dn.y = ye;
  dn.ldy = dl;
  dn.y_bf16 = yt == DType::bf16 ? 1 : 0;
  if (ws) launch_wgmma_ws<1>(dn, rows.slots, e_count, m_tiles, s);
  else launch_wgmma<1>(dn, experts[0].down, m_tiles, s);
}

bool glu_wgmma_applies(const TensorView& x, const MlpWeights& w) {
  const MlpGluPath want = expert_path_options().mlp_glu;
  if (want == MlpGluPath::separate) return false;
  const std::span<const MlpWeights> one(&w, 1);
  const int64_t m = x.size(0), inter = w.gate.out_features();
  const char* refusal = x.dtype != DType::bf16                              ? "x is not bf16"
                        : !wgmma_ok(one, kProjs[0]) || !wgmma_ok(one, kProjs[1]) ? "gate / up not tensor-core weights"
                        : w.gate.is_mxfp4() != w.up.is_mxfp4()                ? "gate and up in different formats"
                        : (m > 1 && x.stride(0) % 8 != 0) || addr(x.data) % 16 != 0
                            ? "x rows not 16-byte aligned"
                            : m / moe_gemm::kBM + 1 > kMaxGridY ? "more than 65535 M-tiles"
                                                                : nullptr;
  if (want == MlpGluPath::fused) {
    if (refusal) throw Error(std::string("mlp: ExpertPathOptions::mlp_glu = fused, but it cannot apply: ") + refusal);
    return true;
  }
  if (refusal) return false;
  int dev = 0;
  KIMI_CUDA_CHECK(cudaGetDevice(&dev));
  const int64_t tiles = ((m + moe_gemm::kBM - 1) / moe_gemm::kBM) * ((inter + moe_gemm::kBN<2> - 1) / moe_gemm::kBN<2>);
  return tiles >= sm_count(dev);
}

void glu_wgmma(const TensorView& x, const MlpWeights& w, const GluParams& act, void* h, cudaStream_t s) {
  const std::span<const MlpWeights> one(&w, 1);
  const ExpertLayout layout;  // one expert: stacked
  const bool ws = grouped_gemm_kernel(one, layout) == GroupedGemmKernel::warp_specialized;  // throws first
  const int64_t m = x.size(0), inter = w.gate.out_features(), m_tiles = (m + moe_gemm::kBM - 1) / moe_gemm::kBM;
  std::optional<Scratch> table;  // stays empty: one expert is stacked
  ExpertProj proj[3];
  expert_projs(one, layout, s, table, proj);
  Scratch tables(4 * sizeof(int32_t), s);  // offsets [2], tile_off [2]
  moe_gemm::one_group_kernel<<<1, 1, 0, s>>>(int32_t(m), tables.get<int32_t>(), tables.get<int32_t>() + 2);
  KIMI_CUDA_CHECK(cudaGetLastError());
  moe_gemm::Args gu{};
  gu.offsets = tables.get<int32_t>();
  gu.tile_off = tables.get<int32_t>() + 2;
  gu.e_count = 1;
  gu.a = static_cast<const __nv_bfloat16*>(x.data);
  gu.lda = m > 1 ? x.stride(0) : x.size(1);
  gu.proj[0] = proj[0];
  gu.proj[1] = proj[1];
  gu.n = inter;
  gu.k = x.size(1);
  gu.y = h;
  gu.ldy = inter;
  gu.situ = act.act == GluAct::situ ? 1 : 0;
  gu.beta = act.situ_beta;
  gu.lbeta = act.situ_linear_beta;
  if (ws) launch_wgmma_ws<2>(gu, m, 1, m_tiles, s);
  else launch_wgmma<2>(gu, w.gate, m_tiles, s);
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
