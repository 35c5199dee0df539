// CUDA row gather (kimi/ops/gather.h): out[n, :] = src[rows[n], :], converted through f32.
//
// Two kernels, one contract:
//   copy (src and out of one dtype, rows of a multiple of 16 bytes, 16-byte aligned pointers and row strides): a
//     row is 16-byte chunks, one chunk per thread per visit (grid x over a row's chunks, y strides over the N
//     rows); the MoE prefill's gather of expert rows (latent_moe: [T*K, Dl] bf16) and bf16 embedding lookups.
//   convert (otherwise): grid x covers the D columns of a row in tiles of kThreads, y strides over the N output
//     rows. Every thread converts one element per row it visits; loads and stores are coalesced along the row.
// (grid-stride in y, so N may exceed the 65535 limit of gridDim.y.) Rows: host values (bounds-checked by the operator) uploaded to
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

// chunks = 16-byte chunks per row; lds / ldo = row strides in chunks.
__global__ void gather_rows_copy_kernel(const uint4* __restrict__ src, int64_t lds, int64_t src_rows, DevIndex rows,
                                        int64_t n_rows, uint4* __restrict__ out, int64_t ldo, int64_t chunks) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= chunks) return;
  const uint4 nan4 = make_uint4(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);  // NaN in every float dtype
  for (int64_t n = blockIdx.y; n < n_rows; n += gridDim.y) {
    const int64_t r = rows[n];
    out[n * ldo + c] = r >= 0 && r < src_rows ? src[r * lds + c] : nan4;
  }
}

bool copyable(const TensorView& src, const TensorView& out, int64_t n) {
  const int64_t row = src.size(1) * int64_t(dtype_size(src.dtype));
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const auto ld_ok = [&](const TensorView& t, int64_t rows) {
    return rows <= 1 || (t.stride(0) * int64_t(dtype_size(t.dtype))) % 16 == 0;
  };
  return src.dtype == out.dtype && row % 16 == 0 && src.stride(1) == 1 && out.stride(1) == 1 && al(src.data) &&
         al(out.data) && ld_ok(src, src.size(0)) && ld_ok(out, n);
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
  if (copyable(src, out, N)) {
    const int64_t es = int64_t(dtype_size(src.dtype)), chunks = D * es / 16;
    const int64_t lds = src.size(0) > 1 ? src.stride(0) * es / 16 : chunks, ldo = N > 1 ? out.stride(0) * es / 16 : chunks;
    // blocks of a multiple of 32 threads that split a row's chunks evenly (a 2304-wide bf16 row: 2 x 160)
    const int64_t bx = (chunks + kThreads - 1) / kThreads;
    const int threads = int(((chunks + bx - 1) / bx + 31) / 32 * 32);
    gather_rows_copy_kernel<<<grid_cols_rows(chunks, N, threads, "gather_rows"), threads, 0, s>>>(
        static_cast<const uint4*>(src.data), lds, src.size(0), idx, N, static_cast<uint4*>(out.data), ldo, chunks);
  } else {
    gather_rows_kernel<<<grid, kThreads, 0, s>>>(src.data, elem_type(src.dtype), src.stride(0), src.size(0), idx, N,
                                                 out.data, elem_type(out.dtype), out.stride(0), D);
  }
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
