// CUDA short-conv prefill (kimi/ops/conv.h short_conv_fwd, SPEC 4) in two launches on the stream:
//   1. outputs, a streaming pass over x: y[t, c] = act(sum_{j=0..W-1} w[c, j] * in(t - (W-1) + j, c))
//      where in(k, c) is x for k >= 0 (k counted from the sequence start), cache_in[n, c, W-1+k] for
//      -(W-1) <= k < 0, else 0; accumulated in fp32 in tap order j = 0 .. W-1 (the CPU kernel's order and
//      conv_step.cuh's, so prefill and decode agree);
//   2. cache write-back, one thread per (sequence, channel): cache_out[n, c, :] = in(len-(W-1) .. len-1, c),
//      every value read before any is written, so cache_out may be cache_in (zero-length sequences pass
//      cache_in through, zeros without one). Launch 2 runs after launch 1 has read cache_in.
//
// Launch 1's shape: a thread owns 8 consecutive channels (one 16-byte vector of bf16 / f16, two of f32) and walks
// tiles of conv_tile(W, io) consecutive flat tokens (4 for 16-bit rows and W <= 4) grid-stride (tile i, i + cols,
// ...; one wave of resident blocks), so its taps are loaded once per thread: staged through shared memory tap-major
// by coalesced loads of the block's taps (per-thread loads of 8 x W taps would touch 32 lines per warp each). For
// each tile it first issues the loads of the whole window, the H = W-1 rows before the tile and its own rows
// (W = 4: 7 x 16 bytes in flight per thread), then unpacks, computes and stores the tile's outputs. A thread never
// waits on a load before it has issued the rest of its tile, and no address of the window depends on a load (the
// sequence of the tile is looked up while the rows are in flight).
// Bytes in flight per SM (H200, W = 4, bf16): __launch_bounds__(128, 4) caps the kernel at 128 registers (ptxas:
// 127, no spills), 4 blocks x 128 threads x 112 bytes = 57 KB, twice the ~26 KB that 4.3 TB/s x ~0.8 us asks per SM
// (Little's law over 132 SMs). The H rows before a tile are the previous tile's last rows, read by a neighbouring
// block at about the same time: L2 hits, so HBM sees x once and y once; the L2 sees (tile + H) / tile reads per row.
// Fast path: the window [r0 - H, r0 + tile) lies in one sequence, so every tap is a row of x. Otherwise (a tile
// within H tokens of a sequence start, or crossing a sequence end; packed varlen) the tile takes the per-token path,
// which reads each tap from x, the cache row or zero by the sequence of each output token. Both paths accumulate
// in fp32 in tap order j = 0 .. W-1 with the same expression (conv_out), so their results are identical.
// Blocks: channel vectors fastest (a warp reads 32 x 16 contiguous bytes of one token row), tile columns over the
// flat tokens. Few tokens (decode-sized calls): the tile shrinks (p.tile < conv_tile) until the grid fills the GPU.
// Unaligned views (C, a row stride or a base address not a multiple of 8 elements / 16 bytes) take the same
// kernel with per-element loads and a channel guard.
//
// x, y: [B, T, C] (packed B = 1 with cu_seqlens), rows any strides, C contiguous; flat token r is (r / T, r % T);
// w [C, W] / [C, 1, W]; caches [N_c, C, W-1] any strides, sequence n at row rows[n]; float dtypes as codes
// (src/cuda/elementwise.cuh). Device table (one upload of 2N+1 values, nothing per token): [N+1] flat start
// of each sequence (starts[N] = all tokens), then [N] cache rows.
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/conv/conv.h"
#include "cuda/conv/conv_step.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/elementwise_vec.cuh"
#include "cuda/scratch.cuh"

namespace kimi::cuda {

namespace {

struct FwdParams {
  const void* x; int tx; int64_t x_b, x_t;
  void* y; int ty; int64_t y_b, y_t;
  const void* w; int tw; int64_t w_c, w_j;
  const void* cin; int tci; int64_t ci_n, ci_c, ci_j;
  void* cout; int tco; int64_t co_n, co_c, co_j;
  const int64_t* seq;  // device: [N+1] flat starts, then [N] cache rows
  int64_t N, tokens, B, T, C;
  int64_t tile;        // flat tokens per tile, <= conv_tile(W, io)
  int64_t tiles;       // ceil(tokens / tile)
  int W, silu;
};

// The 8 channels c0 .. c0+7 of x / y at element offset `off` (a token row + c0); per element past C when unaligned.
__device__ __forceinline__ void load_ch(const void* p, int64_t off, int t, bool vec, int nc, float (&v)[kVec]) {
  if (vec) return load8(p, off, t, v);
#pragma unroll
  for (int k = 0; k < kVec; ++k) v[k] = k < nc ? load_f32(p, off + k, t) : 0.f;
}

__device__ __forceinline__ void store_ch(void* p, int64_t off, int t, bool vec, int nc, const float (&v)[kVec]) {
  if (vec) return store8(p, off, t, v);
#pragma unroll
  for (int k = 0; k < kVec; ++k)
    if (k < nc) store_f32(p, off + k, t, v[k]);
}

// The sequence holding flat token r: the last n with starts[n] <= r (zero-length sequences share their start
// with the next one, which is the one that holds r).
__device__ __forceinline__ int64_t sequence_of(const int64_t* starts, int64_t N, int64_t r) {
  int64_t lo = 0, hi = N - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (starts[mid] <= r) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

inline constexpr int kConvThreads = 128;  // channel vectors per block (1024 channels)

// How a thread reads its 8 channels of a row: one 16-byte vector of bf16 / f16 (kept packed until used: 4
// registers per row), two of f32, or per element (unaligned views; a channel guard past C).
enum ConvIo : int { io_scalar = 0, io_vec16 = 1, io_vec32 = 2 };

// Flat tokens per tile: the window (tile + W-1 rows) stays in registers under the launch bound.
__host__ __device__ constexpr int conv_tile(int W, int io) {
  return io == io_scalar ? 1 : io == io_vec16 && W <= 4 ? 4 : 2;
}

template <int kIo>
struct ConvRow {  // f32 values (io_vec32, io_scalar)
  float v[kVec];
};
template <>
struct ConvRow<io_vec16> {  // 8 packed 16-bit values
  uint4 u;
};

// No use of the value here, so a run of these keeps every load in flight.
template <int kIo>
__device__ __forceinline__ void load_row(const void* p, int64_t off, int t, int nc, ConvRow<kIo>& r) {
  if constexpr (kIo == io_vec16) {
    r.u = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p) + off);
  } else if constexpr (kIo == io_vec32) {
    load8(p, off, el_f32, r.v);
  } else {
#pragma unroll
    for (int k = 0; k < kVec; ++k) r.v[k] = k < nc ? load_f32(p, off + k, t) : 0.f;
  }
}

template <int kIo>
__device__ __forceinline__ void unpack_row(const ConvRow<kIo>& r, int t, float (&v)[kVec]) {
  if constexpr (kIo == io_vec16) {
    if (t == el_bf16) unpack_bf16x8(r.u, v);
    else unpack_f16x8(r.u, v);
  } else {
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = r.v[k];
  }
}

// One output vector: y = act(sum_j w[j] * in[j]), fp32, tap order j = 0 .. W-1 (the CPU's and conv_step.cuh's).
template <int W>
__device__ __forceinline__ void conv_out(const float (&wt)[W][kVec], const float (&in)[W][kVec], bool silu,
                                         float (&acc)[kVec]) {
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    float a = 0.f;
#pragma unroll
    for (int j = 0; j < W - 1; ++j) a += wt[j][k] * in[j][k];
    acc[k] = a + wt[W - 1][k] * in[W - 1][k];
  }
  if (!silu) return;  // one branch per vector, not per element
#pragma unroll
  for (int k = 0; k < kVec; ++k) acc[k] = acc[k] * sigmoid_f32(acc[k]);
}

// Tap input k (a flat token index, s0 <= k + H) of output token t of sequence n (starts at flat s0, batch row at
// flat tb): x inside the sequence, else the cache row, else zero.
__device__ __forceinline__ void tap_input(const FwdParams& p, int64_t n, int64_t s0, int64_t xb, int64_t tb, int64_t k,
                                          int64_t c0, int nc, bool vec, float (&v)[kVec]) {
  const int H = p.W - 1;
  if (k >= s0) return load_ch(p.x, xb + (k - tb) * p.x_t, p.tx, vec, nc, v);
  if (p.cin != nullptr) {
    const int64_t base = p.seq[p.N + 1 + n] * p.ci_n + c0 * p.ci_c + (H + k - s0) * p.ci_j;
#pragma unroll
    for (int q = 0; q < kVec; ++q) v[q] = q < nc ? load_f32(p.cin, base + q * p.ci_c, p.tci) : 0.f;
    return;
  }
#pragma unroll
  for (int q = 0; q < kVec; ++q) v[q] = 0.f;
}

// One thread: channels c0 .. c0+7 of the tiles blockIdx.x / cblocks + i * cols. W is the kernel width (compile
// time, so the window and taps stay in registers).
template <int W, int kIo>
__global__ void __launch_bounds__(kConvThreads, W <= 4 ? 4 : 1)
    conv_fwd_kernel(FwdParams p, int64_t cvecs, int64_t cblocks) {
  constexpr int H = W - 1;
  constexpr int kTile = conv_tile(W, kIo);
  constexpr int R = kTile + H;  // window rows
  constexpr bool kVecIo = kIo != io_scalar;
  const int64_t cblock = int64_t(blockIdx.x) % cblocks;
  const int64_t cols = int64_t(gridDim.x) / cblocks;
  int64_t tile = int64_t(blockIdx.x) / cblocks;
  if (tile >= p.tiles) return;  // uniform over the block

  // Taps: the block's channels staged through shared memory tap-major (sw[j][c], fp32), read coalesced from w (one
  // element per thread per step) and all in flight at once; per thread 8 W scattered loads would each touch 32 lines.
  __shared__ float sw[W][kConvThreads * kVec];
  {
    const int64_t cb0 = cblock * kConvThreads * kVec;
    const int cnt = int(min(int64_t(kConvThreads) * kVec, p.C - cb0)) * W;  // the block's (channel, tap) pairs
    const auto off = [&](int e) { return (cb0 + e / W) * p.w_c + (e % W) * p.w_j; };
    float tmp[kVec * W];
    if (p.tw == el_f32) {
      const float* w = static_cast<const float*>(p.w);
#pragma unroll
      for (int i = 0; i < kVec * W; ++i) {
        const int e = int(threadIdx.x) + i * int(blockDim.x);
        tmp[i] = e < cnt ? w[off(e)] : 0.f;
      }
    } else {  // 16-bit: every load issued before the first conversion
      const uint16_t* w = static_cast<const uint16_t*>(p.w);
      uint16_t h[kVec * W];
#pragma unroll
      for (int i = 0; i < kVec * W; ++i) {
        const int e = int(threadIdx.x) + i * int(blockDim.x);
        h[i] = e < cnt ? w[off(e)] : uint16_t(0);
      }
#pragma unroll
      for (int i = 0; i < kVec * W; ++i)
        tmp[i] = p.tw == el_bf16 ? __uint_as_float(uint32_t(h[i]) << 16) : __half2float(__ushort_as_half(h[i]));
    }
#pragma unroll
    for (int i = 0; i < kVec * W; ++i) {
      const int e = int(threadIdx.x) + i * int(blockDim.x);
      if (e < cnt) sw[e % W][e / W] = tmp[i];
    }
  }
  __syncthreads();
  const int64_t v = cblock * blockDim.x + threadIdx.x;
  if (v >= cvecs) return;
  const int64_t c0 = v * kVec;
  const int nc = kVecIo || p.C - c0 >= kVec ? kVec : int(p.C - c0);
  const int64_t* starts = p.seq;
  float wt[W][kVec];  // taps, fp32
#pragma unroll
  for (int j = 0; j < W; ++j)
#pragma unroll
    for (int k = 0; k < kVec; ++k) wt[j][k] = k < nc ? sw[j][threadIdx.x * kVec + k] : 0.f;

  int64_t n = sequence_of(starts, p.N, tile * p.tile);  // tiles only grow: n then only advances
  for (; tile < p.tiles; tile += cols) {
    const int64_t r0 = tile * p.tile;
    const int ntok = int(min(p.tile, p.tokens - r0));
    const int64_t b = p.B > 1 ? r0 / p.T : 0, tb = b * p.T;  // batch row of r0 and its first flat token
    const int64_t xb = b * p.x_b + c0, yb = b * p.y_b + c0;
    // The window's rows r0 - H + i (those in r0's batch row), all issued before any is used.
    ConvRow<kIo> raw[R];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int64_t k = r0 - H + i;
      if (i < H + ntok && k >= tb) load_row<kIo>(p.x, xb + (k - tb) * p.x_t, p.tx, nc, raw[i]);
    }
    while (starts[n + 1] <= r0) ++n;  // the sequence holding r0 (skips zero-length ones)
    const int64_t s0 = starts[n];
    if (r0 - H >= s0 && r0 + ntok <= starts[n + 1]) {
      // Slide a window of W unpacked rows along the tile (unrolled: the shifts are register renames).
      float win[W][kVec], acc[kVec];
#pragma unroll
      for (int j = 0; j < H; ++j) unpack_row<kIo>(raw[j], p.tx, win[j]);
#pragma unroll
      for (int u = 0; u < kTile; ++u) {
        if (u >= ntok) break;
        unpack_row<kIo>(raw[u + H], p.tx, win[H]);
        conv_out<W>(wt, win, p.silu, acc);
        store_ch(p.y, yb + (r0 + u - tb) * p.y_t, p.ty, kVecIo, nc, acc);
#pragma unroll
        for (int j = 0; j < H; ++j)
#pragma unroll
          for (int q = 0; q < kVec; ++q) win[j][q] = win[j + 1][q];
      }
      continue;
    }
    // Per token: the sequence (and batch row) of each output token, its taps from x, the cache or zero.
    for (int u = 0; u < ntok; ++u) {
      const int64_t t = r0 + u;
      while (starts[n + 1] <= t) ++n;
      const int64_t s = starts[n];
      const int64_t bt = p.B > 1 ? s / p.T : 0, tbt = bt * p.T;  // a sequence never crosses a batch row
      const int64_t xbt = bt * p.x_b + c0, ybt = bt * p.y_b + c0;
      float win[W][kVec], acc[kVec];
#pragma unroll
      for (int j = 0; j < W; ++j) tap_input(p, n, s, xbt, tbt, t - H + j, c0, nc, kVecIo, win[j]);
      conv_out<W>(wt, win, p.silu, acc);
      store_ch(p.y, ybt + (t - tbt) * p.y_t, p.ty, kVecIo, nc, acc);
    }
  }
}

// Input k (counted from the sequence start) of channel c, for the cache write-back.
__device__ __forceinline__ float conv_input(const FwdParams& p, int64_t xb, int64_t t0, int64_t row, int64_t k, int64_t c) {
  const int H = p.W - 1;
  if (k >= 0) return load_f32(p.x, xb + (t0 + k) * p.x_t + c, p.tx);
  if (p.cin != nullptr && H + k >= 0) return load_f32(p.cin, row * p.ci_n + c * p.ci_c + (H + k) * p.ci_j, p.tci);
  return 0.f;
}

// 1-D grid: block = (sequence n, channel block).
__global__ void conv_cache_kernel(FwdParams p, int64_t cblocks) {
  const int64_t n = int64_t(blockIdx.x) / cblocks;
  const int64_t c = (int64_t(blockIdx.x) % cblocks) * blockDim.x + threadIdx.x;
  if (c >= p.C) return;
  const int64_t s0 = p.seq[n], len = p.seq[n + 1] - s0, row = p.seq[p.N + 1 + n];
  const int64_t b = p.T > 0 ? s0 / p.T : 0, t0 = s0 - b * p.T, xb = b * p.x_b;  // T = 0: only cache values
  const int H = p.W - 1;
  float v[kConvMaxWidth - 1];
  for (int j = 0; j < H; ++j) v[j] = conv_input(p, xb, t0, row, len - H + j, c);
  for (int j = 0; j < H; ++j) store_f32(p.cout, row * p.co_n + c * p.co_c + j * p.co_j, p.tco, v[j]);
}

// Launch 1 over `cblocks` channel blocks x tile columns: one wave of resident blocks (the runtime's occupancy
// calculator), each column walking its tiles.
// The resident blocks per SM of 128-thread blocks are asked once per instance (sm_90a only: the same on every
// device this binary runs on); smaller blocks (C < 1024) ask each call.
template <int W, int kIo>
void launch_io(const FwdParams& p, int threads, int64_t cvecs, int64_t cblocks, int sms, cudaStream_t s) {
  static std::atomic<int> full_blocks{0};
  int per_sm = threads == kConvThreads ? full_blocks.load(std::memory_order_relaxed) : 0;
  if (per_sm == 0) {
    KIMI_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, conv_fwd_kernel<W, kIo>, threads, 0));
    per_sm = std::max(per_sm, 1);
    if (threads == kConvThreads) full_blocks.store(per_sm, std::memory_order_relaxed);
  }
  // Columns: at most one wave, as few as give every column the same number of tiles (+-1 -> none short of work).
  const int64_t wave = std::max<int64_t>(int64_t(per_sm) * sms / cblocks, 1);
  const int64_t per_col = (p.tiles + wave - 1) / wave;
  const int64_t cols = (p.tiles + per_col - 1) / per_col;
  if (cols * cblocks > int64_t(0x7fffffff)) throw Error("cuda short_conv_fwd: grid too large");
  conv_fwd_kernel<W, kIo><<<unsigned(cols * cblocks), threads, 0, s>>>(p, cvecs, cblocks);
}

template <int W>
void launch_fwd(const FwdParams& p, int io, int threads, int64_t cvecs, int64_t cblocks, int sms, cudaStream_t s) {
  if (io == io_vec16) launch_io<W, io_vec16>(p, threads, cvecs, cblocks, sms, s);
  else if (io == io_vec32) launch_io<W, io_vec32>(p, threads, cvecs, cblocks, sms, s);
  else launch_io<W, io_scalar>(p, threads, cvecs, cblocks, sms, s);
}

int sm_count(int device) {
  int sms = 0;
  KIMI_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return std::max(sms, 1);
}

}  // namespace

void short_conv_fwd(TensorView x, TensorView w, TensorView cache_in, TensorView cache_out,
                    const std::vector<int64_t>& offsets, bool varlen, const std::vector<int64_t>& rows,
                    ConvActivation act, TensorView y, const Context& ctx) {
  (void)varlen;  // offsets are flat token indices either way (b * T + t)
  const int64_t N = int64_t(offsets.size()) - 1, C = x.shape[2], T = x.shape[1];
  if (N <= 0 || C == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  refuse_capture(s, "short_conv_fwd");
  const DeviceGuard device_guard(x.device.index);
  constexpr int kThreads = kConvThreads;
  constexpr int64_t kBlocksPerSm = 8;   // few tokens: tiles shrink until the grid has this many blocks per SM
  const int64_t tokens = offsets.back();  // flat tokens of x (B * T, or the packed total)
  const int64_t cvecs = (C + kVec - 1) / kVec, cblocks = (cvecs + kThreads - 1) / kThreads;
  const int sms = sm_count(x.device.index);
  if (N * ((C + kThreads - 1) / kThreads) > int64_t(0x7fffffff)) throw Error("cuda short_conv_fwd: grid too large");
  std::vector<int64_t> table(size_t(2 * N + 1));
  std::copy(offsets.begin(), offsets.end(), table.begin());
  std::copy(rows.begin(), rows.end(), table.begin() + N + 1);
  FwdParams p{};
  p.x = x.data, p.tx = elem_type(x.dtype), p.x_b = x.strides[0], p.x_t = x.strides[1];
  p.y = y.data, p.ty = elem_type(y.dtype), p.y_b = y.strides[0], p.y_t = y.strides[1];
  p.w = w.data, p.tw = elem_type(w.dtype), p.w_c = w.strides[0], p.w_j = w.strides[w.ndim - 1];
  p.W = int(w.shape[w.ndim - 1]);
  if (cache_in.present())
    p.cin = cache_in.data, p.tci = elem_type(cache_in.dtype), p.ci_n = cache_in.strides[0], p.ci_c = cache_in.strides[1],
    p.ci_j = cache_in.strides[2];
  if (cache_out.present())
    p.cout = cache_out.data, p.tco = elem_type(cache_out.dtype), p.co_n = cache_out.strides[0],
    p.co_c = cache_out.strides[1], p.co_j = cache_out.strides[2];
  p.N = N, p.tokens = tokens, p.B = x.shape[0], p.T = T, p.C = C, p.silu = act == ConvActivation::silu;
  // Batch strides matter only with B > 1 (flat tokens of one batch row never reach the next).
  const bool vec = vec8_aligned(x.data) && vec8_aligned(y.data) && vec8_step(C) && vec8_step(p.x_t) &&
                   vec8_step(p.y_t) && (x.shape[0] == 1 || (vec8_step(p.x_b) && vec8_step(p.y_b)));
  const int io = !vec ? io_scalar : p.tx == el_f32 ? io_vec32 : io_vec16;
  const int64_t want_tiles = (kBlocksPerSm * sms + cblocks - 1) / cblocks;
  p.tile = std::clamp<int64_t>(tokens / want_tiles, 1, conv_tile(p.W, io));
  p.tiles = (tokens + p.tile - 1) / p.tile;
  const Scratch d_table = upload(table, s);
  p.seq = d_table.get<int64_t>();
  if (tokens > 0) {
    const int threads = int(std::min<int64_t>(cvecs, kThreads));
    switch (p.W) {
      case 1: launch_fwd<1>(p, io, threads, cvecs, cblocks, sms, s); break;
      case 2: launch_fwd<2>(p, io, threads, cvecs, cblocks, sms, s); break;
      case 3: launch_fwd<3>(p, io, threads, cvecs, cblocks, sms, s); break;
      case 4: launch_fwd<4>(p, io, threads, cvecs, cblocks, sms, s); break;
      case 5: launch_fwd<5>(p, io, threads, cvecs, cblocks, sms, s); break;
      case 6: launch_fwd<6>(p, io, threads, cvecs, cblocks, sms, s); break;
      case 7: launch_fwd<7>(p, io, threads, cvecs, cblocks, sms, s); break;
      case 8: launch_fwd<8>(p, io, threads, cvecs, cblocks, sms, s); break;
      default: throw Error("cuda short_conv_fwd: kernel width " + std::to_string(p.W) + " outside [1, 8]");
    }
    KIMI_CUDA_CHECK(cudaGetLastError());
  }
  if (cache_out.present() && p.W > 1) {
    const int64_t cb = (C + kThreads - 1) / kThreads;
    conv_cache_kernel<<<unsigned(N * cb), kThreads, 0, s>>>(p, cb);
    KIMI_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace kimi::cuda
