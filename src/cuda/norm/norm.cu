// Launchers of src/cuda/norm/norm.h: validate -> dispatch dtypes -> launch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <optional>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/norm/norm.h"
#include "cuda/norm/gated_rms_norm.cuh"
#include "cuda/norm/rms_norm.cuh"
#include "cuda/scratch.cuh"

namespace kimi::cuda {

namespace {
// Element offsets of every row of a [..., D] view (leading dims any strides), uploaded once per call.
std::vector<int64_t> row_offsets(const TensorView& t) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < t.ndim; ++d) rows *= t.shape[d];
  std::vector<int64_t> off(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rem = r, o = 0;
    for (int d = t.ndim - 2; d >= 0; --d) {
      o += (rem % t.shape[d]) * t.strides[d];
      rem /= t.shape[d];
    }
    off[size_t(r)] = o;
  }
  return off;
}

template <class F>
void with_type(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(__nv_bfloat16{});
    case DType::f16: return f(__half{});
    default: throw Error("cuda: unsupported dtype " + std::string(dtype_name(t)));
  }
}
constexpr int kWarps = 8;  // rows per CTA: one warp per row

// The launch of a row-wise norm: the capture guard, the device, the grid (one warp per row), and the row
// offsets of every present view (all with the first view's rows) uploaded back to back.
struct RowLaunch {
  int64_t rows = 0;
  std::optional<Scratch> offsets;  // view i's offsets at get<int64_t>() + i * rows
  unsigned blocks = 0;
};

RowLaunch row_launch(const char* op, std::initializer_list<TensorView> views, cudaStream_t s) {
  RowLaunch l;
  std::vector<int64_t> all;
  for (const TensorView& v : views) {
    if (!v.present()) continue;
    const std::vector<int64_t> off = row_offsets(v);
    all.insert(all.end(), off.begin(), off.end());
    if (l.rows == 0) l.rows = int64_t(off.size());
  }
  if (l.rows == 0) return l;
  refuse_capture(s, op);
  KIMI_CUDA_CHECK(cudaSetDevice(views.begin()->device.index));
  const int64_t blocks = (l.rows + kWarps - 1) / kWarps;
  if (blocks > int64_t(0x7fffffff)) throw Error(std::string("cuda ") + op + ": grid too large");
  l.blocks = unsigned(blocks);
  l.offsets.emplace(upload(all, s));
  return l;
}
}  // namespace

void rms_norm(TensorView x, TensorView w, float eps, TensorView y, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const RowLaunch l = row_launch("rms_norm", {x, y}, s);
  if (l.rows == 0) return;
  const int64_t* off = l.offsets->get<int64_t>();
  with_type(x.dtype, [&](auto xt) {
    with_type(w.dtype, [&](auto wt) {
      with_type(y.dtype, [&](auto yt) {
        using TX = decltype(xt);
        using TW = decltype(wt);
        using TY = decltype(yt);
        rms_norm_kernel<TX, TW, TY><<<l.blocks, kWarps * 32, 0, s>>>(static_cast<const TX*>(x.data), off,
                                                                     static_cast<const TW*>(w.data),
                                                                     static_cast<TY*>(y.data), off + l.rows, l.rows,
                                                                     int(x.size(-1)), eps);
      });
    });
  });
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void gated_rms_norm(TensorView o, TensorView z, TensorView w, float eps, TensorView y, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const RowLaunch l = row_launch("gated_rms_norm", {o, y, z}, s);  // z's offsets only when present
  if (l.rows == 0) return;
  const int64_t* off = l.offsets->get<int64_t>();
  gated_rms_norm_kernel<<<l.blocks, kWarps * 32, 0, s>>>(
      o.data, elem_type(o.dtype), off, z.present() ? z.data : nullptr, z.present() ? elem_type(z.dtype) : 0,
      off + 2 * l.rows, w.data, elem_type(w.dtype), y.data, elem_type(y.dtype), off + l.rows, l.rows, int(o.size(-1)),
      eps);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
