// CUDA residual add of the model runtime: out[t, :] += y[t, :] (f32 [T, d], out rows strided).
// Grid: x tiles the columns (kThreads each), y strides over the T rows (grid-stride past 65535 rows). A thread
// owns 4 consecutive columns (one 16-byte float4 of out and of y) when d, out's row stride and both base
// addresses allow it (d and the stride multiples of 4, bases 16-byte aligned), else one column: a pure stream of
// 2 reads and 1 write per element at 16 bytes per access. No host tables: capturable into a CUDA graph.
#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/check.cuh"
#include "cuda/grid.cuh"
#include "cuda/model/add_into.h"
#include "cuda/pdl.cuh"

namespace kimi::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void add_into_kernel(float* __restrict__ out, int64_t out_ld, const float* __restrict__ y, int64_t T,
                                int64_t d) {
  const int64_t col = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (col >= d) return;
  for (int64_t t = blockIdx.y; t < T; t += gridDim.y) out[t * out_ld + col] += y[t * d + col];
}

__global__ void add_into4_kernel(float4* __restrict__ out, int64_t out_ld4, const float4* __restrict__ y, int64_t T,
                                 int64_t d4) {
  pdl_launch_dependents();  // pdl.cuh: launched with programmatic_launch
  pdl_wait();
  const int64_t col = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (col >= d4) return;
  for (int64_t t = blockIdx.y; t < T; t += gridDim.y) {
    float4 o = out[t * out_ld4 + col];
    const float4 v = y[t * d4 + col];
    o.x += v.x, o.y += v.y, o.z += v.z, o.w += v.w;
    out[t * out_ld4 + col] = o;
  }
}

}  // namespace

void add_into(TensorView out, TensorView y, const Context& ctx) {
  const int64_t T = y.size(0), d = y.size(1);
  if (T == 0 || d == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(out.device.index);
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (d % 4 == 0 && out.stride(0) % 4 == 0 && aligned(out.data) && aligned(y.data)) {
    const dim3 grid = grid_cols_rows(d / 4, T, kThreads, "add_into");
    programmatic_launch(add_into4_kernel, grid, dim3(kThreads), 0, s, static_cast<float4*>(out.data),
                        out.stride(0) / 4, static_cast<const float4*>(y.data), T, d / 4);
    KIMI_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const dim3 grid = grid_cols_rows(d, T, kThreads, "add_into");
  add_into_kernel<<<grid, kThreads, 0, s>>>(static_cast<float*>(out.data), out.stride(0),
                                            static_cast<const float*>(y.data), T, d);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
