// Launchers of src/cuda/norm/norm.h: row maps (cuda/rows.cuh) -> dispatch dtypes -> launch. Each takes the
// vectorized row launch (norm_vec.cuh: 16-byte accesses, the row in registers) when every view is vec8_view and D
// fits it, else its one-warp-per-row kernel (any alignment).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <optional>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/norm/add_rms_norm.cuh"
#include "cuda/norm/l2_norm.cuh"
#include "cuda/norm/norm.h"
#include "cuda/norm/gated_rms_norm.cuh"
#include "cuda/norm/norm_vec.cuh"
#include "cuda/norm/rms_norm.cuh"
#include "cuda/rows.cuh"
#include "cuda/scratch.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda {

namespace {
template <class F>
void with_type(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(__nv_bfloat16{});
    case DType::f16: return f(__half{});
    default: throw Error("cuda: unsupported dtype " + std::string(dtype_name(t)));
  }
}
}  // namespace

void rms_norm(TensorView x, TensorView w, float eps, TensorView y, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(x.device.index);
  const RowLaunch l = row_launch("rms_norm", x);
  if (l.rows == 0) return;
  const VecRowLaunch v = vec_row_launch("rms_norm", l.rows, x.size(-1));
  if (v.ok && vec8_view(x) && vec8_view(w) && vec8_view(y)) {
    programmatic_launch(rms_norm_vec_kernel, dim3(v.blocks), dim3(v.threads), 0, s, x.data, elem_type(x.dtype),
                        vec_row_map(x), w.data, elem_type(w.dtype), y.data, elem_type(y.dtype), vec_row_map(y), l.rows,
                        int(x.size(-1)), eps, v.lanes);
    KIMI_CUDA_CHECK(cudaGetLastError());
    return;
  }
  with_type(x.dtype, [&](auto xt) {
    with_type(w.dtype, [&](auto wt) {
      with_type(y.dtype, [&](auto yt) {
        using TX = decltype(xt);
        using TW = decltype(wt);
        using TY = decltype(yt);
        rms_norm_kernel<TX, TW, TY><<<l.blocks, kRowWarps * 32, 0, s>>>(static_cast<const TX*>(x.data), row_map(x),
                                                                     static_cast<const TW*>(w.data),
                                                                     static_cast<TY*>(y.data), row_map(y), l.rows,
                                                                     int(x.size(-1)), eps);
      });
    });
  });
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void gated_rms_norm(TensorView o, TensorView z, TensorView w, float eps, TensorView y, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(o.device.index);
  const RowLaunch l = row_launch("gated_rms_norm", o);
  if (l.rows == 0) return;
  const VecRowLaunch v = vec_row_launch("gated_rms_norm", l.rows, o.size(-1));
  if (v.ok && vec8_view(o) && vec8_view(z) && vec8_view(w) && vec8_view(y)) {
    gated_rms_norm_vec_kernel<<<v.blocks, v.threads, 0, s>>>(
        o.data, elem_type(o.dtype), vec_row_map(o), z.present() ? z.data : nullptr, z.present() ? elem_type(z.dtype) : 0,
        vec_row_map(z), w.data, elem_type(w.dtype), y.data, elem_type(y.dtype), vec_row_map(y), l.rows, int(o.size(-1)), eps,
        v.lanes);
    KIMI_CUDA_CHECK(cudaGetLastError());
    return;
  }
  gated_rms_norm_kernel<<<l.blocks, kRowWarps * 32, 0, s>>>(
      o.data, elem_type(o.dtype), row_map(o), z.present() ? z.data : nullptr, z.present() ? elem_type(z.dtype) : 0,
      row_map(z), w.data, elem_type(w.dtype), y.data, elem_type(y.dtype), row_map(y), l.rows, int(o.size(-1)), eps);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void add_rms_norm(TensorView x, TensorView residual, TensorView w, float eps, TensorView sum, TensorView y,
                  const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(x.device.index);
  const RowLaunch l = row_launch("add_rms_norm", x);
  if (l.rows == 0) return;
  const VecRowLaunch v = vec_row_launch("add_rms_norm", l.rows, x.size(-1));
  if (v.ok && vec8_view(x) && vec8_view(residual) && vec8_view(w) && vec8_view(sum) && vec8_view(y)) {
    add_rms_norm_vec_kernel<<<v.blocks, v.threads, 0, s>>>(
        x.data, elem_type(x.dtype), vec_row_map(x), residual.data, elem_type(residual.dtype), vec_row_map(residual), w.data,
        elem_type(w.dtype), sum.data, elem_type(sum.dtype), vec_row_map(sum), y.data, elem_type(y.dtype), vec_row_map(y),
        l.rows, int(x.size(-1)), eps, v.lanes);
    KIMI_CUDA_CHECK(cudaGetLastError());
    return;
  }
  add_rms_norm_kernel<<<l.blocks, kRowWarps * 32, 0, s>>>(
      x.data, elem_type(x.dtype), row_map(x), residual.data, elem_type(residual.dtype), row_map(residual), w.data,
      elem_type(w.dtype), sum.data, elem_type(sum.dtype), row_map(sum), y.data, elem_type(y.dtype), row_map(y), l.rows,
      int(x.size(-1)), eps);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void l2_norm(TensorView x, TensorView y, float eps, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(x.device.index);
  const RowLaunch l = row_launch("l2_norm", x);
  if (l.rows == 0) return;
  const VecRowLaunch v = vec_row_launch("l2_norm", l.rows, x.size(-1));
  if (v.ok && vec8_view(x) && vec8_view(y)) {
    l2_norm_vec_kernel<<<v.blocks, v.threads, 0, s>>>(x.data, elem_type(x.dtype), vec_row_map(x), y.data,
                                                      elem_type(y.dtype), vec_row_map(y), l.rows, int(x.size(-1)), eps,
                                                      v.lanes);
    KIMI_CUDA_CHECK(cudaGetLastError());
    return;
  }
  l2_norm_kernel<<<l.blocks, kRowWarps * 32, 0, s>>>(x.data, elem_type(x.dtype), row_map(x), y.data,
                                                      elem_type(y.dtype), row_map(y), l.rows, int(x.size(-1)), eps);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
