// Launchers of src/cuda/norm/norm.h: validate -> dispatch dtypes -> launch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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
}  // namespace

void rms_norm(TensorView x, TensorView w, float eps, TensorView y, const Context& ctx) {
  const auto xo = row_offsets(x), yo = row_offsets(y);
  const int64_t rows = int64_t(xo.size());
  if (rows == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  refuse_capture(s, "rms_norm");
  KIMI_CUDA_CHECK(cudaSetDevice(x.device.index));
  constexpr int kWarps = 8;
  if ((rows + kWarps - 1) / kWarps > int64_t(0x7fffffff)) throw Error("cuda rms_norm: grid too large");
  std::vector<int64_t> all(xo);
  all.insert(all.end(), yo.begin(), yo.end());
  const Scratch d_off = upload(all, s);
  const int64_t* off = d_off.get<int64_t>();
  const dim3 grid(unsigned((rows + kWarps - 1) / kWarps)), block(kWarps * 32);
  with_type(x.dtype, [&](auto xt) {
    with_type(w.dtype, [&](auto wt) {
      with_type(y.dtype, [&](auto yt) {
        using TX = decltype(xt);
        using TW = decltype(wt);
        using TY = decltype(yt);
        rms_norm_kernel<TX, TW, TY><<<grid, block, 0, s>>>(static_cast<const TX*>(x.data), off,
                                                           static_cast<const TW*>(w.data), static_cast<TY*>(y.data),
                                                           off + rows, rows, int(x.size(-1)), eps);
      });
    });
  });
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void gated_rms_norm(TensorView o, TensorView z, TensorView w, float eps, TensorView y, const Context& ctx) {
  const auto oo = row_offsets(o), yo = row_offsets(y);
  const auto zo = z.present() ? row_offsets(z) : std::vector<int64_t>(oo.size(), 0);
  const int64_t rows = int64_t(oo.size());
  if (rows == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  refuse_capture(s, "gated_rms_norm");
  KIMI_CUDA_CHECK(cudaSetDevice(o.device.index));
  constexpr int kWarps = 8;
  if ((rows + kWarps - 1) / kWarps > int64_t(0x7fffffff)) throw Error("cuda gated_rms_norm: grid too large");
  std::vector<int64_t> all(oo);
  all.insert(all.end(), zo.begin(), zo.end());
  all.insert(all.end(), yo.begin(), yo.end());
  const Scratch d_off = upload(all, s);
  const int64_t* off = d_off.get<int64_t>();
  gated_rms_norm_kernel<<<unsigned((rows + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(
      o.data, elem_type(o.dtype), off, z.present() ? z.data : nullptr, z.present() ? elem_type(z.dtype) : 0,
      off + rows, w.data, elem_type(w.dtype), y.data, elem_type(y.dtype), off + 2 * rows, rows, int(o.size(-1)), eps);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
