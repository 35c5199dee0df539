// CUDA row gather (kimi/ops/gather.h): out[n, :] = src[rows[n], :], converted through f32.
//
// Grid: x covers the D columns of a row in tiles of kThreads, y strides over the N output rows (grid-stride,
// so N may exceed the 65535 limit of gridDim.y). Every thread converts one element per row it visits; loads
// and stores are coalesced along the row. Rows: host values (bounds-checked by the operator) uploaded to
// stream-ordered scratch (no CUDA graph capture), or the device form (src/core/index.h: read in the kernel,
// capturable; a row outside [0, R) writes NaN into its output row).
#include <algorithm>
#include <optional>

#include "cuda/check.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/gather/gather.h"
#include "cuda/grid.cuh"
#include "cuda/index.cuh"
#include "cuda/scratch.cuh"

namespace kimi::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void gather_rows_kernel(const void* __restrict__ src, int src_t, int64_t src_ld, int64_t src_rows,
                                   DevIndex rows, int64_t n_rows, void* __restrict__ out, int out_t, int64_t out_ld,
                                   int64_t d) {
  const int64_t col = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (col >= d) return;
  for (int64_t n = blockIdx.y; n < n_rows; n += gridDim.y) {
    const int64_t r = rows[n];
    const float v = r >= 0 && r < src_rows ? load_f32(src, r * src_ld + col, src_t) : __int_as_float(0x7fc00000);
    store_f32(out, n * out_ld + col, out_t, v);
  }
}

}  // namespace

void gather_rows(TensorView src, const Index& rows, TensorView out, const Context& ctx) {
  const int64_t N = rows.size(), D = src.size(1);
  if (N == 0 || D == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  if (!rows.on_device()) refuse_capture(s, "gather_rows with host rows (pass 'rows' as a CUDA tensor to capture it)");
  const DeviceGuard device_guard(src.device.index);
  const dim3 grid = grid_cols_rows(D, N, kThreads, "gather_rows");
  std::optional<Scratch> table;
  DevIndex idx;
  if (rows.on_device()) {
    idx = dev_index(rows.device);
  } else {
    table.emplace(upload(rows.host, s));
    idx = {table->get(), 1, 1};
  }
  gather_rows_kernel<<<grid, kThreads, 0, s>>>(src.data, elem_type(src.dtype), src.stride(0), src.size(0), idx, N,
                                               out.data, elem_type(out.dtype), out.stride(0), D);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
