// CUDA short-conv prefill (kimi/ops/conv.h short_conv_fwd, SPEC 4) in two launches on the stream:
//   1. outputs, one thread per (token, channel):  y[t, c] = act(sum_{j=0..W-1} w[c, j] * in(t - (W-1) + j, c))
//      where in(k, c) is x for k >= 0 (k counted from the sequence start), cache_in[n, c, W-1+k] for
//      -(W-1) <= k < 0, else 0; accumulated in fp32 in tap order (the CPU kernel's order);
//   2. cache write-back, one thread per (sequence, channel): cache_out[n, c, :] = in(len-(W-1) .. len-1, c),
//      every value read before any is written, so cache_out may be cache_in (zero-length sequences pass
//      cache_in through, zeros without one). Launch 2 runs after launch 1 has read cache_in.
// x, y: [B, T, C] (packed B = 1 with cu_seqlens), rows any strides, C contiguous; w [C, W] / [C, 1, W];
// caches [N_c, C, W-1] any strides, sequence n at row rows[n]; float dtypes as codes (src/cuda/elementwise.cuh).
#include <algorithm>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/conv/conv.h"
#include "cuda/elementwise.cuh"
#include "cuda/scratch.cuh"

namespace kimi::cuda {

namespace {

struct FwdParams {
  const void* x; int tx; int64_t x_b, x_t;
  void* y; int ty; int64_t y_b, y_t;
  const void* w; int tw; int64_t w_c, w_j;
  const void* cin; int tci; int64_t ci_n, ci_c, ci_j;
  void* cout; int tco; int64_t co_n, co_c, co_j;
  const int64_t* seq;  // device: [N] b, [N] t0, [N] len, [N] cache row, then per flat token: its sequence, its position
  int64_t N, tokens, C;
  int W, silu;
};

// Input k (counted from the sequence start) of channel c; `row` is the sequence's cache row.
__device__ __forceinline__ float conv_input(const FwdParams& p, int64_t b, int64_t t0, int64_t row, int64_t k, int64_t c) {
  const int H = p.W - 1;
  if (k >= 0) return load_f32(p.x, b * p.x_b + (t0 + k) * p.x_t + c, p.tx);
  if (p.cin != nullptr && H + k >= 0) return load_f32(p.cin, row * p.ci_n + c * p.ci_c + (H + k) * p.ci_j, p.tci);
  return 0.f;
}

// 1-D grid: block = (flat token r, channel block), channel blocks fastest.
__global__ void conv_fwd_kernel(FwdParams p, int64_t cblocks) {
  const int64_t r = int64_t(blockIdx.x) / cblocks;
  const int64_t c = (int64_t(blockIdx.x) % cblocks) * blockDim.x + threadIdx.x;
  if (c >= p.C) return;
  const int64_t n = p.seq[4 * p.N + r];                // the token's sequence
  const int64_t b = p.seq[n], t0 = p.seq[p.N + n], row = p.seq[3 * p.N + n];
  const int64_t k = p.seq[4 * p.N + p.tokens + r];     // its position in the sequence
  const int H = p.W - 1;
  float acc = 0.f;
  for (int j = 0; j < p.W; ++j) acc += load_f32(p.w, c * p.w_c + j * p.w_j, p.tw) * conv_input(p, b, t0, row, k - H + j, c);
  if (p.silu) acc = acc * sigmoid_f32(acc);
  store_f32(p.y, b * p.y_b + (t0 + k) * p.y_t + c, p.ty, acc);
}

// 1-D grid: block = (sequence n, channel block).
__global__ void conv_cache_kernel(FwdParams p, int64_t cblocks) {
  constexpr int kMaxHist = 7;
  const int64_t n = int64_t(blockIdx.x) / cblocks;
  const int64_t c = (int64_t(blockIdx.x) % cblocks) * blockDim.x + threadIdx.x;
  if (c >= p.C) return;
  const int64_t b = p.seq[n], t0 = p.seq[p.N + n], len = p.seq[2 * p.N + n], row = p.seq[3 * p.N + n];
  const int H = p.W - 1;
  float v[kMaxHist];
  for (int j = 0; j < H; ++j) v[j] = conv_input(p, b, t0, row, len - H + j, c);
  for (int j = 0; j < H; ++j) store_f32(p.cout, row * p.co_n + c * p.co_c + j * p.co_j, p.tco, v[j]);
}

}  // namespace

void short_conv_fwd(TensorView x, TensorView w, TensorView cache_in, TensorView cache_out,
                    const std::vector<int64_t>& offsets, bool varlen, const std::vector<int64_t>& rows,
                    ConvActivation act, TensorView y, const Context& ctx) {
  const int64_t N = int64_t(offsets.size()) - 1, C = x.shape[2], T = x.shape[1];
  if (N <= 0 || C == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  refuse_capture(s, "short_conv_fwd");
  const DeviceGuard device_guard(x.device.index);
  constexpr int kThreads = 128;
  const int64_t cblocks = (C + kThreads - 1) / kThreads;
  const int64_t tokens = varlen ? T : x.shape[0] * T;  // flat tokens of x
  if (std::max(tokens, N) * cblocks > int64_t(0x7fffffff)) throw Error("cuda short_conv_fwd: grid too large");
  // Sequence table and, per flat token, its sequence and its position in it.
  std::vector<int64_t> table(size_t(4 * N + 2 * tokens));
  for (int64_t n = 0; n < N; ++n) {
    const int64_t b = varlen ? 0 : n, t0 = varlen ? offsets[size_t(n)] : 0, len = offsets[size_t(n + 1)] - offsets[size_t(n)];
    table[size_t(n)] = b, table[size_t(N + n)] = t0, table[size_t(2 * N + n)] = len, table[size_t(3 * N + n)] = rows[size_t(n)];
    for (int64_t k = 0; k < len; ++k) {
      const int64_t r = varlen ? t0 + k : b * T + k;
      table[size_t(4 * N + r)] = n, table[size_t(4 * N + tokens + r)] = k;
    }
  }
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
  p.N = N, p.tokens = tokens, p.C = C, p.silu = act == ConvActivation::silu;
  const Scratch d_table = upload(table, s);
  p.seq = d_table.get<int64_t>();
  if (tokens > 0) conv_fwd_kernel<<<unsigned(tokens * cblocks), kThreads, 0, s>>>(p, cblocks);
  KIMI_CUDA_CHECK(cudaGetLastError());
  if (cache_out.present() && p.W > 1) {
    conv_cache_kernel<<<unsigned(N * cblocks), kThreads, 0, s>>>(p, cblocks);
    KIMI_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace kimi::cuda
