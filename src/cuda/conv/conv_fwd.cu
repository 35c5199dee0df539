// CUDA short-conv prefill (kimi/ops/conv.h short_conv_fwd, SPEC 4) in two launches on the stream:
//   1. outputs, a streaming pass over x: y[t, c] = act(sum_{j=0..W-1} w[c, j] * in(t - (W-1) + j, c))
//      where in(k, c) is x for k >= 0 (k counted from the sequence start), cache_in[n, c, W-1+k] for
//      -(W-1) <= k < 0, else 0; accumulated in fp32 in tap order j = 0 .. W-1 (the CPU kernel's order and
//      conv_step.cuh's, so prefill and decode agree);
//   2. cache write-back, one thread per (sequence, channel): cache_out[n, c, :] = in(len-(W-1) .. len-1, c),
//      every value read before any is written, so cache_out may be cache_in (zero-length sequences pass
//      cache_in through, zeros without one). Launch 2 runs after launch 1 has read cache_in.
//
// Launch 1's shape: a thread owns 8 consecutive channels (one 16-byte vector of bf16 / f16, two of f32) and a
// tile of `tile` consecutive flat tokens; it keeps the W-1 previous inputs of its 8 channels in registers (the
// halo: read from x, or from the cache before a sequence's start) and slides them along the tile, so x is read
// once plus W-1 halo rows per tile (neighbouring tiles' rows: L2 hits) and y written once, in 16-byte accesses.
// A tile may cross sequence boundaries (packed varlen): the thread finds the sequence of its first token by a
// binary search of the sequence starts and restarts the halo at each boundary it crosses. Blocks: channel
// vectors fastest (a warp reads 32 x 16 contiguous bytes of one token row), tiles over the flat tokens. `tile`
// shrinks for few tokens (decode-sized calls) so that the grid still fills the GPU.
// Unaligned views (C, a row stride or a base address not a multiple of 8 elements / 16 bytes) take the same
// kernel with per-element loads and a channel guard.
//
// x, y: [B, T, C] (packed B = 1 with cu_seqlens), rows any strides, C contiguous; flat token r is (r / T, r % T);
// w [C, W] / [C, 1, W]; caches [N_c, C, W-1] any strides, sequence n at row rows[n]; float dtypes as codes
// (src/cuda/elementwise.cuh). Device table (one upload of 2N+1 values, nothing per token): [N+1] flat start
// of each sequence (starts[N] = all tokens), then [N] cache rows.
#include <algorithm>
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
  int64_t N, tokens, T, C;
  int64_t tile;        // flat tokens per thread
  int W, silu, vec;    // vec: 16-byte accesses allowed (C, strides and bases multiples of 8 elements)
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

// One thread: channels c0 .. c0+7, flat tokens [r0, r0 + tile). W is the kernel width (compile time, so the
// halo and taps stay in registers).
template <int W, bool kVecIo>
__global__ void __launch_bounds__(128, W <= 4 ? 4 : 1) conv_fwd_kernel(FwdParams p, int64_t cvecs, int64_t cblocks) {
  constexpr int H = W - 1;
  constexpr int kUnroll = 4;  // tokens loaded before any is computed: 4 x 16 bytes in flight per thread
  const int64_t v = (int64_t(blockIdx.x) % cblocks) * blockDim.x + threadIdx.x;
  const int64_t tile_i = int64_t(blockIdx.x) / cblocks;
  if (v >= cvecs) return;
  const int64_t c0 = v * kVec;
  const int nc = kVecIo || p.C - c0 >= kVec ? kVec : int(p.C - c0);
  constexpr bool vec = kVecIo;
  const int64_t* starts = p.seq;
  const int64_t* rows = p.seq + p.N + 1;

  float wt[W][kVec];  // taps, fp32
#pragma unroll
  for (int k = 0; k < kVec; ++k)
#pragma unroll
    for (int j = 0; j < W; ++j) wt[j][k] = k < nc ? load_f32(p.w, (c0 + k) * p.w_c + j * p.w_j, p.tw) : 0.f;

  const auto out = [&](const float (&hist)[H > 0 ? H : 1][kVec], const float (&xv)[kVec], int64_t yoff) {
    float acc[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float a = 0.f;
#pragma unroll
      for (int j = 0; j < H; ++j) a += wt[j][k] * hist[j][k];
      a += wt[W - 1][k] * xv[k];
      acc[k] = p.silu ? a * sigmoid_f32(a) : a;
    }
    store_ch(p.y, yoff, p.ty, vec, nc, acc);
  };

  int64_t r = tile_i * p.tile;
  const int64_t r_end = min(r + p.tile, p.tokens);
  int64_t n = r < r_end ? sequence_of(starts, p.N, r) : 0;
  while (r < r_end) {
    while (starts[n + 1] <= r) ++n;  // the sequence holding r (skips zero-length ones)
    const int64_t s0 = starts[n], e = min(starts[n + 1], r_end);
    const int64_t b = s0 / p.T, t0 = s0 - b * p.T;  // a sequence never crosses a batch row
    const int64_t xb = b * p.x_b + c0, yb = b * p.y_b + c0;
    // Halo: the H inputs before r (flat r-H .. r-1), from x inside the sequence, else from its cache row.
    float hist[H > 0 ? H : 1][kVec];
#pragma unroll
    for (int j = 0; j < H; ++j) {
      const int64_t k = r - H + j;
      if (k >= s0) {
        load_ch(p.x, xb + (t0 + k - s0) * p.x_t, p.tx, vec, nc, hist[j]);
      } else if (p.cin != nullptr) {
        const int64_t base = rows[n] * p.ci_n + c0 * p.ci_c + (H + k - s0) * p.ci_j;
#pragma unroll
        for (int q = 0; q < kVec; ++q) hist[j][q] = q < nc ? load_f32(p.cin, base + q * p.ci_c, p.tci) : 0.f;
      } else {
#pragma unroll
        for (int q = 0; q < kVec; ++q) hist[j][q] = 0.f;
      }
    }
    const auto shift_in = [&](const float (&xv)[kVec]) {
#pragma unroll
      for (int j = 0; j + 1 < H; ++j)
#pragma unroll
        for (int q = 0; q < kVec; ++q) hist[j][q] = hist[j + 1][q];
      if constexpr (H > 0) {
#pragma unroll
        for (int q = 0; q < kVec; ++q) hist[H - 1][q] = xv[q];
      }
    };
    int64_t t = t0 + (r - s0);  // time index in the batch row
    const int64_t t_end = t0 + (e - s0);
    for (; t + kUnroll <= t_end; t += kUnroll) {
      float xv[kUnroll][kVec];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) load_ch(p.x, xb + (t + u) * p.x_t, p.tx, vec, nc, xv[u]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        out(hist, xv[u], yb + (t + u) * p.y_t);
        shift_in(xv[u]);
      }
    }
    for (; t < t_end; ++t) {
      float xv[kVec];
      load_ch(p.x, xb + t * p.x_t, p.tx, vec, nc, xv);
      out(hist, xv, yb + t * p.y_t);
      shift_in(xv);
    }
    r = e;
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

template <int W>
void launch_fwd(const FwdParams& p, unsigned blocks, int threads, int64_t cvecs, int64_t cblocks, cudaStream_t s) {
  if (p.vec) conv_fwd_kernel<W, true><<<blocks, threads, 0, s>>>(p, cvecs, cblocks);
  else conv_fwd_kernel<W, false><<<blocks, threads, 0, s>>>(p, cvecs, cblocks);
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
  constexpr int kThreads = 128;         // channel vectors per block (1024 channels)
  constexpr int64_t kMaxTile = 16;      // flat tokens per thread at prefill sizes
  constexpr int64_t kBlocksPerSm = 8;   // the grid to fill before tiles lengthen
  const int64_t tokens = offsets.back();  // flat tokens of x (B * T, or the packed total)
  const int64_t cvecs = (C + kVec - 1) / kVec, cblocks = (cvecs + kThreads - 1) / kThreads;
  const int64_t want_tiles = (kBlocksPerSm * sm_count(x.device.index) + cblocks - 1) / cblocks;
  const int64_t tile = std::clamp<int64_t>(tokens / want_tiles, 1, kMaxTile);
  const int64_t tiles = (tokens + tile - 1) / tile;
  if (std::max(tiles * cblocks, N * ((C + kThreads - 1) / kThreads)) > int64_t(0x7fffffff))
    throw Error("cuda short_conv_fwd: grid too large");
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
  p.N = N, p.tokens = tokens, p.T = T, p.C = C, p.tile = tile, p.silu = act == ConvActivation::silu;
  // Batch strides matter only with B > 1 (flat tokens of one batch row never reach the next).
  p.vec = vec8_aligned(x.data) && vec8_aligned(y.data) && vec8_step(C) && vec8_step(p.x_t) && vec8_step(p.y_t) &&
          (x.shape[0] == 1 || (vec8_step(p.x_b) && vec8_step(p.y_b)));
  const Scratch d_table = upload(table, s);
  p.seq = d_table.get<int64_t>();
  if (tokens > 0) {
    const unsigned blocks = unsigned(tiles * cblocks);
    const int threads = int(std::min<int64_t>(cvecs, kThreads));
    switch (p.W) {
      case 1: launch_fwd<1>(p, blocks, threads, cvecs, cblocks, s); break;
      case 2: launch_fwd<2>(p, blocks, threads, cvecs, cblocks, s); break;
      case 3: launch_fwd<3>(p, blocks, threads, cvecs, cblocks, s); break;
      case 4: launch_fwd<4>(p, blocks, threads, cvecs, cblocks, s); break;
      case 5: launch_fwd<5>(p, blocks, threads, cvecs, cblocks, s); break;
      case 6: launch_fwd<6>(p, blocks, threads, cvecs, cblocks, s); break;
      case 7: launch_fwd<7>(p, blocks, threads, cvecs, cblocks, s); break;
      case 8: launch_fwd<8>(p, blocks, threads, cvecs, cblocks, s); break;
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
