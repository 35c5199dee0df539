// CUDA row gather (kimi/ops/gather.h): out[n, :] = src[rows[n], :], converted through f32.
//
// Grid: x covers the D columns of a row in tiles of kThreads, y strides over the N output rows (grid-stride,
// so N may exceed the 65535 limit of gridDim.y). Every thread converts one element per row it visits; loads
// and stores are coalesced along the row. The row table (host, already bounds-checked by the operator) is
// uploaded to stream-ordered scratch, hence no CUDA graph capture.
#include <algorithm>

#include "cuda/check.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/gather/gather.h"
#include "cuda/grid.cuh"
#include "cuda/scratch.cuh"

namespace kimi::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void gather_rows_kernel(const void* __restrict__ src, int src_t, int64_t src_ld,
                                   const int64_t* __restrict__ rows, int64_t n_rows, void* __restrict__ out,
                                   int out_t, int64_t out_ld, int64_t d) {
  const int64_t col = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (col >= d) return;
  for (int64_t n = blockIdx.y; n < n_rows; n += gridDim.y) {
    const float v = load_f32(src, rows[n] * src_ld + col, src_t);
    store_f32(out, n * out_ld + col, out_t, v);
  }
}

}  // namespace

void gather_rows(TensorView src, const std::vector<int64_t>& rows, TensorView out, const Context& ctx) {
  const int64_t N = int64_t(rows.size()), D = src.size(1);
  if (N == 0 || D == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  refuse_capture(s, "gather_rows");
  const DeviceGuard device_guard(src.device.index);
  const dim3 grid = grid_cols_rows(D, N, kThreads, "gather_rows");
  const Scratch table = upload(rows, s);
  gather_rows_kernel<<<grid, kThreads, 0, s>>>(src.data, elem_type(src.dtype), src.stride(0), table.get<int64_t>(), N,
                                               out.data, elem_type(out.dtype), out.stride(0), D);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
