// Launcher of src/cuda/kda/chunk.h: resolve the sequences, build the chunk table (and the segment table), allocate
// the scratch, launch the prep (prep.cuh) and the walk (walk_rs.cuh: plain, or the three segment phases) on
// ctx.cuda_stream. The math and the two-pass design: chunk.cuh.
//
// Choices (docs/ops/kda.md "CUDA kernels" has the measurements behind them):
//  - The walk is walk_rs.cuh for every o. Its O epilogue: a bf16 o with 16-byte aligned rows goes through the O stage
//    (stmatrix.trans into shared memory, stored 16 bytes a piece by the load warpgroup: Params::o_rows16); any other
//    o (fp32, f16, unaligned rows) by per-element stores from the chain warpgroup.
//  - Diagonal 16 x 16 blocks of A_qk / A_kk on tensor cores only for the bounded gate with lower bound >= -5
//    (exp(-G) <= e^80 inside a 16-row block); the softplus gate and a given g take the per-pair fp32 path.
//  - chunk_size is ignored: the GPU always uses 64-row chunks (same math, different rounding only).
//  - The prep's row loads: tensor-map copies of row tiles where q, k, v, g are bf16 with 16-byte aligned rows and
//    the driver encodes the maps; else vector loads (bf16, 8-byte aligned row pieces); else generic loads. With the
//    tensor-map copies the walk reads its V tiles from v itself (Params::v_in_walk) and the scratch holds no v.
//  - Scratch: ScratchBytes<D>::total(v_in_walk) per chunk-head (D = 128: 1288 B per token-head, 1032 with
//    v_in_walk; chunk.cuh "Scratch") plus the chunk table, one cudaMallocAsync / cudaFreeAsync pair on the stream
//    (the pool keeps it between calls: cuda/scratch.cuh).
//  - CUDA-graph capture: fixed-length batches build the chunk table on the device (fixed_chunk_table, and the
//    segment table: fixed_segment_table); varlen batches (a host-built table to upload) refuse capture with a
//    clear error.
//  - Segments (sequence parallelism, chunk.cuh "Segments"): considered only while the plain walk's N H D / 64 CTAs
//    fit one wave (more CTAs than SMs: every SM already walks, and segments add work). The cost model
//    (src/cuda/kda/segment_plan.h, host code tested on every machine) prices the walk (list scheduling of the CTAs
//    on the SMs; us per chunk with and without outputs) for 2 .. 64 segments of the longest sequence and takes the
//    best when it comes under WalkCosts::keep (0.9) of the plain walk's model; the choice is cached per shape (the
//    model costs 25-120 us of host time). Measured: 1 x 65536 H8 2.650 ms plain, 1.196 ms with 9 segments
//    (docs/gpu/2026-11-30-h200-run43.txt).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/index.cuh"
#include "cuda/kda/chunk.cuh"
#include "cuda/kda/chunk.h"
#include "cuda/kda/prep.cuh"
#include "cuda/kda/seqpar.cuh"
#include "cuda/kda/walk_rs.cuh"
#include "cuda/runtime.h"
#include "cuda/scratch.cuh"
#include "cuda/tensor_map.h"
#include "kimi/error.h"
#include "cuda/kda/segment_plan.h"

namespace kimi::cuda {

namespace {

static_assert(kda_chunk::kDtF32 == int(DType::f32) && kda_chunk::kDtBf16 == int(DType::bf16) &&
                  kda_chunk::kDtF16 == int(DType::f16),
              "dtype codes");

void strides3(const TensorView& t, int64_t (&s)[3]) {
  for (int d = 0; d < 3; ++d) s[d] = t.strides[d];
}

// Whether every tensor is bf16 [B][T][H][D] with rows of `bytes`-aligned pieces: its base and the strides of its
// first three dimensions multiples of `bytes` (a dimension of size 1 is never stepped, so its stride is free).
bool bf16_rows_aligned(std::span<const TensorView* const> tensors, int64_t bytes) {
  for (const TensorView* t : tensors) {
    if (t->dtype != DType::bf16 || reinterpret_cast<uintptr_t>(t->data) % size_t(bytes) != 0) return false;
    for (int d = 0; d < 3; ++d)
      if (t->shape[d] > 1 && (t->strides[d] * 2) % bytes != 0) return false;
  }
  return true;
}

// The prep's row-tile maps (kda_chunk::Params::rows_map) of q, k, v, g: bf16 [B][T][H][D] at their strides, as
// 4-d tensors innermost first {D, H, T, B}, box {D + 8, 1, 64, 1} (the 8 columns past D zero-filled: the padded
// shared rows). A dimension of size 1 is never stepped: its stride is replaced by 16 bytes where the tensor's is
// not a multiple of 16 (the caller checked the others). False where the driver refuses one (the caller then takes
// the vector row loads).
bool encode_row_tiles(CUtensorMap (&maps)[4], const std::array<const TensorView*, 4>& tensors) {
  const auto encode = tensor_map_encoder();
  if (!encode) return false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& t = *tensors[i];
    const int64_t D = t.shape[3];
    const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(t.shape[2]), cuuint64_t(t.shape[1]), cuuint64_t(t.shape[0])};
    cuuint64_t strides[3];
    for (int d = 0; d < 3; ++d) {  // bytes of dims H, T, B
      const int64_t bytes = t.strides[2 - d] * 2;
      strides[d] = t.shape[2 - d] > 1 || (bytes > 0 && bytes % 16 == 0) ? cuuint64_t(bytes) : cuuint64_t(16);
    }
    const cuuint32_t box[4] = {cuuint32_t(D + 8), 1, cuuint32_t(kda_chunk::kC), 1}, unit[4] = {1, 1, 1, 1};
    if (encode(&maps[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(t.data), dims, strides, box, unit,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
      return false;
  }
  return true;
}

// The chunk table of N sequences of T tokens each (no cu_seqlens), built on the device for CUDA-graph
// capture (a host upload cannot be captured): the same entries as the host loop in kda_chunk_fwd.
// tab [3 * nch] (first token, batch row, rows), then seq0 [N + 1]; per_seq = ceil(T / C) chunks a sequence.
__global__ void fixed_chunk_table(int64_t* tab, int64_t N, int64_t T, int64_t per_seq) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nch = N * per_seq;
  if (i < nch) {
    const int64_t n = i / per_seq, c0 = (i % per_seq) * kda_chunk::kC;
    tab[3 * i] = c0;
    tab[3 * i + 1] = n;
    tab[3 * i + 2] = T - c0 < kda_chunk::kC ? T - c0 : kda_chunk::kC;
  }
  if (i <= N) tab[3 * nch + i] = i * per_seq;
}

// N sequences of per_seq chunks each, segments of len chunks (P = max(1, ceil(per_seq / len)) per sequence):
// the same rows as the host loop in chunk.cu. seg [kSegFields * N * P], segbase [N + 1].
__global__ void fixed_segment_table(int64_t* seg, int64_t* segbase, int64_t N, int64_t per_seq, int64_t len,
                                    int64_t P) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < N * P) {
    const int64_t n = i / P, j = i % P, b = n * per_seq + j * len;
    int64_t* e = seg + kda_chunk::kSegFields * i;
    e[kda_chunk::kSegBeg] = b < (n + 1) * per_seq ? b : (n + 1) * per_seq;
    e[kda_chunk::kSegEnd] = b + len < (n + 1) * per_seq ? b + len : (n + 1) * per_seq;
    e[kda_chunk::kSegSeq] = n;
    e[kda_chunk::kSegIdx] = j;
    e[kda_chunk::kSegCount] = P;
  }
  if (i <= N) segbase[i] = i * P;
}


// ---- sequence parallelism: the segment plan (header: "Segments")

// Segment length in chunks (0: the plain walk). forced (KdaLaunchOptions::segment_chunks): > 0 that length, < 0
// never; 0: kda_plan::best_segment_chunks (src/cuda/kda/segment_plan.h: the cost model of walk_rs.cuh), cached per
// (H, D, SMs, sequence lengths).
int64_t segment_chunks(const std::vector<int64_t>& len, int64_t H, int64_t D, int sms, int64_t forced) {
  if (forced != 0) return forced > 0 ? forced : 0;
  static std::mutex mu;
  static std::map<std::vector<int64_t>, int64_t> cache;
  std::vector<int64_t> key{H, D, sms, 1};
  key.insert(key.end(), len.begin(), len.end());
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const int64_t best = kda_plan::best_segment_chunks(len, H, D, sms);
  const std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 256) cache.clear();
  cache.emplace(std::move(key), best);
  return best;
}

// Threads per CTA: the prep kda_chunk::kPrepThreads (512, two CTAs per SM, prep.cuh), the walk kda_chunk::kRsThreads
// (two warpgroups), the scan kda_chunk::kScanThreads.
template <typename Kern>
void launch_kernel(Kern* kernel, size_t smem, int threads, int64_t ctas, const kda_chunk::Params& p, cudaStream_t s) {
  if (ctas <= 0) return;
  if (ctas > int64_t(0x7fffffff)) throw Error("kda_chunk_fwd: too many chunks for one launch");
  KIMI_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<dim3(unsigned(ctas)), dim3(unsigned(threads)), smem, s>>>(p);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

// The prep, then the walk: plain (p.nseg == 0: one CTA per (sequence, head, V tile of 64)), or the segments' three
// phases: the maps (and segment 0 with outputs), the scan, the other segments.
template <int D>
void launch_all(kda_chunk::Params p, bool diag_mma, cudaStream_t s) {
  namespace kc = kda_chunk;
  const int64_t H = p.H, N = p.N;
  // two CTAs per SM need the full shared-memory carveout
  const auto prep = diag_mma ? kc::kda_chunk_prep<D, true> : kc::kda_chunk_prep<D, false>;
  KIMI_CUDA_CHECK(
      cudaFuncSetAttribute(prep, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  launch_kernel(prep, kc::PrepSmem<D>::TOTAL, kc::kPrepThreads, p.nch * H, p, s);
  constexpr int nv = D / kc::RsSmem<D>::VT;  // V tiles per head
  if (p.nseg > 0) {
    p.walk_mode = kc::kWalkMaps;
    launch_kernel(kc::kda_chunk_walk_rs<D>, kc::RsSmem<D>::TOTAL, kc::kRsThreads, p.nseg * H * 2 * nv, p, s);
    launch_kernel(kc::kda_seg_scan<D>, kc::ScanSmem<D>::TOTAL, kc::kScanThreads, N * H * (D / kc::kScanRows), p, s);
    p.walk_mode = kc::kWalkFinish;
    launch_kernel(kc::kda_chunk_walk_rs<D>, kc::RsSmem<D>::TOTAL, kc::kRsThreads, p.nseg * H * nv, p, s);
  } else {
    launch_kernel(kc::kda_chunk_walk_rs<D>, kc::RsSmem<D>::TOTAL, kc::kRsThreads, N * nv * H, p, s);
  }
}

}  // namespace

void kda_chunk_fwd(const KdaArgs& a, int chunk_size, const Context& ctx, const KdaLaunchOptions* options) {
  const KdaLaunchOptions& opt = kda_launch_options(options);
  (void)chunk_size;  // always 64 on the GPU (see chunk.h)
  const int64_t B = a.q.size(0), T = a.q.size(1), H = a.q.size(2), K = a.q.size(3), V = a.v.size(3);
  if (!(K == V && (K == 64 || K == 128)))
    throw Error("kda_chunk_fwd: CUDA backend supports K = V in {64, 128}; got K = " + std::to_string(K) +
                ", V = " + std::to_string(V));

  // sequences, and the state row of each (state_slots: a pool row per sequence; else row n)
  const bool varlen = a.cu_seqlens.present();
  const std::vector<int64_t> cu = varlen ? index_values(a.cu_seqlens) : std::vector<int64_t>{};
  const int64_t N = varlen ? int64_t(cu.size()) - 1 : B;
  if (N <= 0 || H <= 0) return;
  const bool slotted = a.state_slots.present() && (a.initial_state.present() || a.final_state.present());
  const std::vector<int64_t> slots = slotted ? index_values(a.state_slots) : std::vector<int64_t>{};

  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  // Inside CUDA-graph capture the chunk table of fixed-length batches is built on the device; a varlen table
  // would need a host upload, which capture cannot hold: refused before touching the stream.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  KIMI_CUDA_CHECK(cudaStreamIsCapturing(s, &capture));
  const bool capturing = capture != cudaStreamCaptureStatusNone;
  if (capturing && varlen) refuse_capture(s, "kda_chunk_fwd with cu_seqlens");
  if (capturing && slotted) refuse_capture(s, "kda_chunk_fwd with state_slots");
  const int dev = a.q.device.index;
  const DeviceGuard device_guard(dev);
  const int sms = sm_count(dev);

  kda_chunk::Params p{};
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.g = a.g.data;
  p.beta = a.beta.data;
  p.o = a.o.data;
  p.dt_q = int(a.q.dtype);
  p.dt_k = int(a.k.dtype);
  p.dt_v = int(a.v.dtype);
  p.dt_g = int(a.g.dtype);
  p.dt_beta = int(a.beta.dtype);
  p.dt_o = int(a.o.dtype);
  strides3(a.q, p.s_q);
  strides3(a.k, p.s_k);
  strides3(a.v, p.s_v);
  strides3(a.g, p.s_g);
  strides3(a.beta, p.s_beta);
  strides3(a.o, p.s_o);
  p.gate = kda_chunk::kGateNone;
  bool diag_mma = false;
  if (a.gate) {
    p.gate = a.gate->form == GateForm::bounded ? kda_chunk::kGateBounded : kda_chunk::kGateSoftplus;
    p.A_log = static_cast<const float*>(a.gate->A_log.data);
    p.s_A = a.gate->A_log.strides[0];
    p.dt_bias = static_cast<const float*>(a.gate->dt_bias.data);
    p.lb = a.gate->lower_bound;
    // the prep's diagonal blocks on tensor cores for every chunk-head (other gates: where each one's data allow)
    diag_mma = a.gate->form == GateForm::bounded && a.gate->lower_bound >= -5.f;
  }
  p.beta_sigmoid = a.beta_sigmoid_in_kernel ? 1 : 0;
  p.l2norm = a.qk_l2norm_in_kernel ? 1 : 0;
  p.scale = a.scale ? *a.scale : float(1.0 / std::sqrt(double(K)));
  p.s0 = a.initial_state.present() ? static_cast<const float*>(a.initial_state.data) : nullptr;
  p.s1 = a.final_state.present() ? static_cast<float*>(a.final_state.data) : nullptr;
  p.vk = a.state_layout == StateLayout::vk ? 1 : 0;
  {  // the prep's row loads (prep.cuh, phase L): q, k, v, g bf16 with every row piece of 4 elements 8-byte aligned
     // (vector loads), and with 16-byte aligned rows (tensor-map copies of whole row tiles, where the driver
     // encodes the maps: encode_row_tiles; the row is 2 D bytes, a multiple of 16)
    const std::array<const TensorView*, 4> rows{&a.q, &a.k, &a.v, &a.g};
    p.rows_bf16 = bf16_rows_aligned(rows, 8) ? 1 : 0;
    p.rows_bulk = bf16_rows_aligned(rows, 16) && encode_row_tiles(p.rows_map, rows) ? 1 : 0;
    if (opt.record)
      opt.record->row_loads = p.rows_bulk ? KdaRowLoads::bulk : p.rows_bf16 ? KdaRowLoads::vector : KdaRowLoads::generic;
  }
  p.o_rows16 = bf16_rows_aligned(std::array<const TensorView*, 1>{&a.o}, 16) ? 1 : 0;  // walk_rs.cuh's O stage
  if (opt.record) opt.record->o_staged = p.o_rows16 != 0;
  p.H = int(H);
  p.N = int(N);

  // chunk table (host): chunks never straddle sequences; zero-length sequences have no chunks
  constexpr int64_t C = kda_chunk::kC;
  std::vector<int64_t> tab;  // [3 * nch] (first token, batch row, rows), then seq0 [N + 1]
  std::vector<int64_t> seq0(size_t(N) + 1, 0);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t bos = varlen ? cu[size_t(n)] : 0, len = varlen ? cu[size_t(n) + 1] - cu[size_t(n)] : T;
    const int64_t bb = varlen ? 0 : n;
    seq0[size_t(n)] = int64_t(tab.size() / 3);
    for (int64_t c0 = 0; c0 < len; c0 += C) {
      tab.push_back(bos + c0);
      tab.push_back(bb);
      tab.push_back(std::min(C, len - c0));
    }
  }
  const int64_t nch = int64_t(tab.size() / 3);
  seq0[size_t(N)] = nch;
  p.nch = nch;
  tab.insert(tab.end(), seq0.begin(), seq0.end());

  // segments (sequence parallelism): P_n = max(1, ceil(chunks / len_seg)) per sequence, in order; then
  // segbase [N + 1]. A zero-length sequence keeps one empty segment (it copies s0 to s1 like the plain walk).
  std::vector<int64_t> seq_len(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) seq_len[size_t(n)] = seq0[size_t(n) + 1] - seq0[size_t(n)];
  const int64_t len_seg = segment_chunks(seq_len, H, K, sms, opt.segment_chunks);
  if (opt.record) opt.record->segment_chunks = len_seg;
  const size_t tab_main = tab.size();  // 3 * nch + N + 1
  int64_t nseg = 0;
  if (len_seg > 0) {
    std::vector<int64_t> segbase(size_t(N) + 1, 0);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t l = seq_len[size_t(n)], P = std::max<int64_t>(1, (l + len_seg - 1) / len_seg);
      segbase[size_t(n)] = nseg;
      for (int64_t j = 0; j < P; ++j)
        tab.insert(tab.end(), {seq0[size_t(n)] + std::min(l, j * len_seg),
                               seq0[size_t(n)] + std::min(l, (j + 1) * len_seg), n, j, P});
      nseg += P;
    }
    segbase[size_t(N)] = nseg;
    tab.insert(tab.end(), segbase.begin(), segbase.end());
  }
  p.nseg = nseg;
  const size_t slots_at = tab.size();  // then the state rows [N] (state_slots)
  tab.insert(tab.end(), slots.begin(), slots.end());

  // the scratch form of walk_rs.cuh (kda_chunk::Scratch): Kg, Tb and V, V from v itself where the prep copies rows
  // by tensor maps (bf16, 16-byte aligned rows: the walk copies its V tiles)
  p.v_in_walk = p.rows_bulk;

  // one device allocation: table, then the scratch arrays (all offsets multiples of 256 bytes)
  const auto round256 = [](size_t x) { return (x + 255) / 256 * 256; };
  const size_t tab_bytes = round256(tab.size() * sizeof(int64_t));
  const size_t per_ch = K == 128 ? kda_chunk::ScratchBytes<128>::total(p.v_in_walk)
                                 : kda_chunk::ScratchBytes<64>::total(p.v_in_walk);
  const size_t nch_h = size_t(nch) * size_t(H);
  const size_t seg_bytes = size_t(nseg) * size_t(H) * size_t(K) * size_t(K) * 4;  // each of seg_start, seg_map
  const size_t total = tab_bytes + nch_h * per_ch + 2 * seg_bytes;
  // (the pool keeps freed scratch cached: cuda/scratch.cuh)
  const Scratch scratch(total, s);  // freed on the stream when this returns or throws
  unsigned char* buf = scratch.get<unsigned char>();
  if (capturing) {
    const int64_t per_seq = (T + C - 1) / C, threads = std::max(nch, N + 1);
    fixed_chunk_table<<<unsigned((threads + 255) / 256), 256, 0, s>>>(reinterpret_cast<int64_t*>(buf), N, T, per_seq);
    KIMI_CUDA_CHECK(cudaGetLastError());
    if (nseg > 0) {  // the same rows as the host loop above (fixed length: nseg = N * P)
      int64_t* sg = reinterpret_cast<int64_t*>(buf) + tab_main;
      const int64_t P = nseg / N, th = std::max(nseg, N + 1);
      fixed_segment_table<<<unsigned((th + 255) / 256), 256, 0, s>>>(sg, sg + kda_chunk::kSegFields * nseg, N,
                                                                    per_seq, len_seg, P);
      KIMI_CUDA_CHECK(cudaGetLastError());
    }
  } else {
    KIMI_CUDA_CHECK(cudaMemcpyAsync(buf, tab.data(), tab.size() * sizeof(int64_t), cudaMemcpyHostToDevice, s));
  }
  p.tab = reinterpret_cast<const int64_t*>(buf);
  p.seq0 = p.tab + 3 * nch;
  p.seg = nseg > 0 ? p.tab + tab_main : nullptr;
  p.segbase = nseg > 0 ? p.seg + kda_chunk::kSegFields * nseg : nullptr;
  p.state_rows = slotted ? p.tab + slots_at : nullptr;
  {
    size_t off = tab_bytes;
    const auto take = [&](size_t bytes_per_ch) {
      unsigned char* q = buf + off;
      off += nch_h * bytes_per_ch;
      return q;
    };
    const auto carve = [&](auto sizes) {  // sizes: kda_chunk::ScratchBytes<K>, the arrays in its order
      using SB = decltype(sizes);
      using kda_chunk::bf16;
      p.scr.qg = reinterpret_cast<bf16*>(take(SB::qg));
      p.scr.aqk = reinterpret_cast<bf16*>(take(SB::aqk));
      p.scr.kdt = reinterpret_cast<bf16*>(take(SB::kdt));
      p.scr.decay = reinterpret_cast<float*>(take(SB::decay));
      p.scr.kg = reinterpret_cast<bf16*>(take(SB::kg));
      p.scr.tb = reinterpret_cast<bf16*>(take(SB::tb));
      if (!p.v_in_walk) p.scr.vb = reinterpret_cast<bf16*>(take(SB::vb));
    };
    if (K == 128)
      carve(kda_chunk::ScratchBytes<128>{});
    else
      carve(kda_chunk::ScratchBytes<64>{});
    p.seg_start = nseg > 0 ? reinterpret_cast<float*>(buf + off) : nullptr;
    off += seg_bytes;
    p.seg_map = nseg > 0 ? reinterpret_cast<float*>(buf + off) : nullptr;
    off += seg_bytes;
    if (off != total) throw Error("kda_chunk_fwd: scratch layout mismatch");
  }

  if (K == 128)
    launch_all<128>(p, diag_mma, s);
  else
    launch_all<64>(p, diag_mma, s);
}

}  // namespace kimi::cuda
