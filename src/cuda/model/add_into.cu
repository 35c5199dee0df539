// CUDA residual add of the model runtime: out[t, :] += y[t, :] (f32 [T, d], out rows strided).
// Grid: x tiles the d columns (kThreads each), y strides over the T rows (grid-stride past 65535 rows).
// No host tables: capturable into a CUDA graph.
#include <algorithm>
#include <string>

#include "cuda/check.cuh"
#include "cuda/grid.cuh"
#include "cuda/model/add_into.h"

namespace kimi::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void add_into_kernel(float* __restrict__ out, int64_t out_ld, const float* __restrict__ y, int64_t T,
                                int64_t d) {
  const int64_t col = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (col >= d) return;
  for (int64_t t = blockIdx.y; t < T; t += gridDim.y) out[t * out_ld + col] += y[t * d + col];
}

}  // namespace

void add_into(TensorView out, TensorView y, const Context& ctx) {
  const int64_t T = y.size(0), d = y.size(1);
  if (T == 0 || d == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(out.device.index);
  const dim3 grid = grid_cols_rows(d, T, kThreads, "add_into");
  add_into_kernel<<<grid, kThreads, 0, s>>>(static_cast<float*>(out.data), out.stride(0),
                                            static_cast<const float*>(y.data), T, d);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
