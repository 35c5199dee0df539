// CUDA short-conv decode step (kimi/ops/conv.h short_conv_update, SPEC 4), one thread per (sequence, channel):
//   y[n, c] = act(conv of cache[row_n, c, :] and x[n, c]), cache row shifted in place (conv_step.cuh; each
//   thread owns its (row, channel)).
// x, y: [N, C] rows of any stride;
// w: [C, W] / [C, 1, W] any strides; cache [Nc, C, W-1] any strides; float dtypes as codes.
#include <vector>

#include "cuda/check.cuh"
#include "cuda/conv/conv.h"
#include "cuda/conv/conv_step.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/scratch.cuh"

namespace kimi::cuda {

namespace {

struct ConvParams {
  const void* x; int tx; int64_t x_n;
  void* y; int ty; int64_t y_n;
  const void* w; int tw; int64_t w_c, w_j;
  void* cache; int tc; int64_t c_r, c_c, c_j;
  const int64_t* rows;  // device [N]
  int64_t N, C;
  int W, silu;
};

__global__ void conv_update_kernel(ConvParams p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.N * p.C) return;
  const int64_t n = i / p.C, c = i % p.C;
  const float x = load_f32(p.x, n * p.x_n + c, p.tx);
  const float y = conv_step(x, p.w, p.tw, c * p.w_c, p.w_j, p.cache, p.tc, p.rows[n] * p.c_r + c * p.c_c, p.c_j, p.W,
                            p.silu != 0);
  store_f32(p.y, n * p.y_n + c, p.ty, y);
}

}  // namespace

void short_conv_update(TensorView x, TensorView w, TensorView cache, const std::vector<int64_t>& rows,
                       ConvActivation act, TensorView y, const Context& ctx) {
  const int64_t N = x.shape[0], C = x.shape[1];
  if (N == 0 || C == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  refuse_capture(s, "short_conv_update");
  const DeviceGuard device_guard(x.device.index);
  constexpr int kThreads = 256;
  const int64_t blocks = (N * C + kThreads - 1) / kThreads;
  if (blocks > int64_t(0x7fffffff)) throw Error("cuda short_conv_update: grid too large");
  ConvParams p{};
  p.x = x.data, p.tx = elem_type(x.dtype), p.x_n = x.strides[0];
  p.y = y.data, p.ty = elem_type(y.dtype), p.y_n = y.strides[0];
  p.w = w.data, p.tw = elem_type(w.dtype), p.w_c = w.strides[0], p.w_j = w.strides[w.ndim - 1];
  p.W = int(w.shape[w.ndim - 1]);
  if (cache.present()) {
    p.cache = cache.data, p.tc = elem_type(cache.dtype);
    p.c_r = cache.strides[0], p.c_c = cache.strides[1], p.c_j = cache.strides[2];
  }
  p.N = N, p.C = C, p.silu = act == ConvActivation::silu;
  const Scratch d_rows = upload(rows, s);
  p.rows = d_rows.get<int64_t>();
  conv_update_kernel<<<unsigned(blocks), kThreads, 0, s>>>(p);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
