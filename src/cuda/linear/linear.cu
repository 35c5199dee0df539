// Launchers of src/cuda/linear/linear.h: y = x W^T (+ beta y), MXFP4 dequantize / quantize.
//
// linear, per M (docs/ops/linear.md has the reasoning and the measurements):
//   M <= 16 (decode): the weights stream once. bf16 x with dense bf16 W, 16-byte aligned rows and k % 8 == 0:
//     gemv_mma_kernel (tensor cores, gemv_mma.cuh); otherwise gemv_kernel (dense f32/bf16/f16 or MXFP4 decoded in
//     registers, FFMA) against f32 or bf16 x read as they are (other dtypes and unaligned rows are first converted to
//     an aligned f32 scratch copy), except bf16 x with dense bf16 W at M > 4, which takes the one cuBLAS GEMM below.
//   M > 16 (and the exception above): cuBLAS (src/cuda/blas.h) on an operand dtype chosen so that the result is as
//     accurate as fp32:
//     W f32                -> SGEMM (fp32, no TF32); x converted to f32 when needed;
//     W bf16 or MXFP4      -> bf16 tensor-core GEMMs (MXFP4 dequantized exactly into bf16 panels of rows);
//                             x bf16 is used as is; x f32 is split into 3 bf16 parts (x = x0 + x1 + x2
//                             exactly) and x f16 into 2, one GEMM per part accumulating in f32;
//     W f16                -> f16 GEMM when x is f16, else W converted to f32 panels and SGEMM.
//   Every GEMM accumulates in fp32. y is the GEMM's output when it is f32 (or, for one GEMM, the operand
//   dtype); otherwise the parts accumulate in an f32 scratch and finish_kernel rounds y once.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/blas.h"
#include "cuda/check.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/grid.cuh"
#include "cuda/linear/convert.cuh"
#include "cuda/linear/gemv.cuh"
#include "cuda/linear/gemv_mma.cuh"
#include "cuda/linear/linear.h"
#include "cuda/linear/mxfp4.cuh"
#include "cuda/scratch.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kPanelBytes = int64_t(64) << 20;  // converted weight rows per GEMM panel (64 MiB)

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Row stride of a 2-D view in elements; a single row may have any stride, so report `cols` for it.
int64_t row_stride(const TensorView& t, int64_t cols) { return t.size(0) > 1 ? t.stride(0) : cols; }

void convert(const void* src, DType ts, int64_t lds, void* dst, DType td, int64_t ldd, int64_t rows, int64_t cols,
             cudaStream_t s, float beta = 0.f) {
  if (rows * cols == 0) return;
  programmatic_launch(convert_kernel, dim3(grid_1d(rows * cols, kThreads, "linear")), dim3(kThreads), 0, s, src,
                      elem_type(ts), lds, dst, elem_type(td), ldd, rows, cols, beta);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

// Rows per warp group NR and chunks in flight per row U: about 128 bytes of weights in flight per lane at small M
// (16-byte dense chunks, 8-byte MXFP4 ones); at M >= 8 four rows share each x load (x traffic through L1 would
// otherwise bound it) with fewer chunks in flight. Warps per group ks: enough groups for ~16 warps per SM
// (kGemvTargetWarps on an H200's 132 SMs), else K split over 2 or 4 warps, as long as each warp keeps whole rounds.
constexpr int64_t kGemvTargetWarps = 2048;

template <int MT, class WF, class XT>
void launch_gemv(std::span<const GemvArgs> jobs, cudaStream_t s) {
  constexpr bool mx = std::is_same_v<WF, Mxfp4W>;
  constexpr int NR = MT <= 4 ? 2 : 4;
  constexpr int U = MT <= 2 ? (mx ? 8 : 4) : MT <= 4 ? (mx ? 4 : 2) : (mx ? 2 : 1);
  GemvBatch b{};
  b.count = int(jobs.size());
  int64_t blocks = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {  // each job's layout is the one a launch of its own would get
    GemvArgs a = jobs[j];
    const int64_t groups = (a.n + NR - 1) / NR, chunks = a.k / WF::kChunk;
    a.ks = 1;
    while (a.ks < 4 && groups * a.ks < kGemvTargetWarps && chunks >= int64_t(64) * a.ks * U) a.ks *= 2;
    blocks += grid_1d(groups, kGemvWarps / a.ks, "linear");
    b.job[j] = a;
    b.block_end[j] = blocks;
  }
  if (blocks > int64_t(0x7fffffff)) throw Error("cuda linear: grid too large (" + std::to_string(blocks) + " blocks)");
  programmatic_launch(gemv_kernel<MT, NR, U, WF, XT>, dim3(unsigned(blocks)), dim3(kGemvThreads), 0, s, b);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

template <class WF, class XT>
void gemv_for_m(std::span<const GemvArgs> jobs, cudaStream_t s) {
  const int m = jobs[0].m;  // every job of a launch has the same M
  if (m <= 1) return launch_gemv<1, WF, XT>(jobs, s);
  if (m <= 2) return launch_gemv<2, WF, XT>(jobs, s);
  if (m <= 4) return launch_gemv<4, WF, XT>(jobs, s);
  if (m <= 8) return launch_gemv<8, WF, XT>(jobs, s);
  return launch_gemv<16, WF, XT>(jobs, s);
}

template <class WF>
void gemv_for_x(std::span<const GemvArgs> jobs, bool x_bf16, cudaStream_t s) {
  if (x_bf16) return gemv_for_m<WF, __nv_bfloat16>(jobs, s);
  return gemv_for_m<WF, float>(jobs, s);
}

// Tensor-core GEMV (gemv_mma.cuh): MB token blocks of 8, U steps of 32 columns in flight per lane (a 128-register
// budget: a step holds 8 registers of weights and 4 MB of x). Warps per row tile ks: doubled while the launch has
// fewer than kGemvMmaTargetWarps warps for the job (about one 8-warp CTA per SM of an H200's 132, leaving room for
// the next kernel's CTA to start under PDL) and each warp keeps >= 4 steps.
constexpr int64_t kGemvMmaTargetWarps = 1024;

template <int MB>
void launch_gemv_mma(std::span<const GemvArgs> jobs, cudaStream_t s) {
  constexpr int U = MB == 1 ? 6 : 4;
  GemvBatch b{};
  b.count = int(jobs.size());
  int64_t blocks = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {  // each job's layout is the one a launch of its own would get
    GemvArgs a = jobs[j];
    const int64_t tiles = (a.n + kGemvMmaRows - 1) / kGemvMmaRows, steps = (a.k + kGemvMmaStep - 1) / kGemvMmaStep;
    a.ks = 1;
    while (a.ks < kGemvMmaWarps && tiles * a.ks < kGemvMmaTargetWarps && steps >= int64_t(8) * a.ks) a.ks *= 2;
    blocks += grid_1d(tiles, kGemvMmaWarps / a.ks, "linear");
    b.job[j] = a;
    b.block_end[j] = blocks;
  }
  if (blocks > int64_t(0x7fffffff)) throw Error("cuda linear: grid too large (" + std::to_string(blocks) + " blocks)");
  programmatic_launch(gemv_mma_kernel<MB, U>, dim3(unsigned(blocks)), dim3(kGemvMmaThreads), 0, s, b);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

// Whether the tensor-core GEMV is allowed (KIMI_CUDA_GEMV=ffma in the environment: no, for A/B measurement against
// the FFMA GEMV and cuBLAS; read once).
bool gemv_mma_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("KIMI_CUDA_GEMV");
    return !(e && std::strcmp(e, "ffma") == 0);
  }();
  return on;
}

// Whether gemv_mma_kernel can run x W^T: bf16 x and dense bf16 W with 16-byte aligned rows, k % 8 == 0.
bool mma_fits(const TensorView& x, const Weight& w) {
  if (x.dtype != DType::bf16 || w.is_mxfp4() || w.w.dtype != DType::bf16 || !gemv_mma_enabled()) return false;
  const int64_t m = x.size(0), n = w.out_features(), k = w.in_features();
  return k % 8 == 0 && aligned(x.data, 16) && (m == 1 || row_stride(x, k) % 8 == 0) && aligned(w.w.data, 16) &&
         (n == 1 || row_stride(w.w, k) % 8 == 0);
}

// What selects the GEMV kernel and its template besides M: the weight format, whether x is read as bf16, and
// whether the tensor-core kernel runs it.
struct GemvKey {
  DType w;  // the dense dtype, or u8 for MXFP4
  bool x_bf16;
  int m;
  bool mma;
  bool operator==(const GemvKey&) const = default;
};

// One projection as a GEMV job. x as 16-byte aligned f32 or bf16 rows (vector loads): itself when it already is,
// else a converted f32 copy in xs (which must outlive the launch).
GemvArgs gemv_job(TensorView x, const Weight& w, TensorView y, float beta, std::optional<Scratch>& xs, GemvKey& key,
                  cudaStream_t s) {
  const int64_t m = x.size(0), n = w.out_features(), k = w.in_features();
  const void* xp = x.data;
  int64_t ldx = row_stride(x, k);
  const int64_t per16 = x.dtype == DType::f32 ? 4 : 8;  // elements per 16 bytes
  bool x_bf16 = x.dtype == DType::bf16;
  if ((x.dtype != DType::f32 && x.dtype != DType::bf16) || !aligned(x.data, 16) || (m > 1 && ldx % per16 != 0)) {
    ldx = (k + 3) / 4 * 4;
    xs.emplace(size_t(m * ldx) * sizeof(float), s);
    convert(x.data, x.dtype, row_stride(x, k), xs->get(), DType::f32, ldx, m, k, s);
    xp = xs->get<float>();
    x_bf16 = false;
  }
  GemvArgs a{};
  a.x = xp;
  a.ldx = ldx;
  a.m = int(m);
  a.w = w.w.data;
  a.n = n;
  a.k = k;
  a.y = y.data;
  a.ty = elem_type(y.dtype);
  a.ldy = row_stride(y, n);
  a.beta = beta;
  key = GemvKey{w.is_mxfp4() ? DType::u8 : w.w.dtype, x_bf16, int(m), mma_fits(x, w)};
  if (w.is_mxfp4()) {
    a.ldw = row_stride(w.w, k / 2);
    a.scale = static_cast<const uint8_t*>(w.scale.data);
    a.lds = row_stride(w.scale, k / 32);
    a.vec = aligned(w.w.data, 8) && (n == 1 || a.ldw % 8 == 0);
    return a;
  }
  const int64_t es = int64_t(dtype_size(w.w.dtype));
  a.ldw = row_stride(w.w, k);
  a.vec = aligned(w.w.data, 16) && (n == 1 || (a.ldw * es) % 16 == 0);
  return a;
}

// One launch for jobs that share a key.
void launch_gemv_jobs(std::span<const GemvArgs> jobs, const GemvKey& key, cudaStream_t s) {
  if (key.mma) return key.m <= 8 ? launch_gemv_mma<1>(jobs, s) : launch_gemv_mma<2>(jobs, s);
  switch (key.w) {
    case DType::u8: return gemv_for_x<Mxfp4W>(jobs, key.x_bf16, s);
    case DType::f32: return gemv_for_x<DenseW<float>>(jobs, key.x_bf16, s);
    case DType::bf16: return gemv_for_x<DenseW<__nv_bfloat16>>(jobs, key.x_bf16, s);
    case DType::f16: return gemv_for_x<DenseW<__half>>(jobs, key.x_bf16, s);
    default: throw Error("cuda linear: unsupported weight dtype " + std::string(dtype_name(key.w)));
  }
}

// Whether linear streams this projection through a GEMV: M <= 16, except bf16 x with dense bf16 W at M > 4 that
// the tensor-core GEMV cannot take (unaligned rows, k % 8 != 0), where one cuBLAS tensor-core GEMM reads the
// weights faster than the FFMA GEMV (M = 8: 1.5-2.4x, docs/gpu/2026-12-02-h200-gemv.txt).
bool takes_gemv(const TensorView& x, const Weight& w) {
  const int64_t m = x.size(0);
  const bool one_bf16_gemm = x.dtype == DType::bf16 && w.w.dtype == DType::bf16 && !w.is_mxfp4();
  return m <= kGemvMaxM && (m <= 4 || !one_bf16_gemm || mma_fits(x, w));
}

void linear_gemv(TensorView x, const Weight& w, TensorView y, float beta, cudaStream_t s) {
  std::optional<Scratch> xs;
  GemvKey key{};
  const GemvArgs a = gemv_job(x, w, y, beta, xs, key, s);
  launch_gemv_jobs(std::span<const GemvArgs>(&a, 1), key, s);
}

void linear_gemm(TensorView x, const Weight& w, TensorView y, float beta, cudaStream_t s) {
  const int64_t m = x.size(0), n = w.out_features(), k = w.in_features();
  const bool mx = w.is_mxfp4();
  const DType wdt = mx ? DType::bf16 : w.w.dtype;  // MXFP4 decodes exactly into bf16
  // Operand dtype and the number of bf16 parts x is split into.
  DType ot = DType::f32;
  int parts = 1;
  if (wdt == DType::bf16) {
    ot = DType::bf16;
    parts = x.dtype == DType::bf16 ? 1 : x.dtype == DType::f16 ? 2 : 3;
  } else if (wdt == DType::f16 && x.dtype == DType::f16) {
    ot = DType::f16;
  }
  const int64_t oes = int64_t(dtype_size(ot));

  // x operand(s): [parts, m, k] contiguous, or x itself.
  const void* xo = x.data;
  int64_t ldxo = row_stride(x, k);
  std::optional<Scratch> xs;
  if (parts > 1) {
    xs.emplace(size_t(parts * m * k * 2), s);
    split_kernel<<<grid_1d(m * k, kThreads, "linear"), kThreads, 0, s>>>(
        x.data, elem_type(x.dtype), row_stride(x, k), xs->get<__nv_bfloat16>(), parts, m, k);
    KIMI_CUDA_CHECK(cudaGetLastError());
    xo = xs->get();
    ldxo = k;
  } else if (x.dtype != ot || ldxo < k) {
    xs.emplace(size_t(m * k * oes), s);
    convert(x.data, x.dtype, row_stride(x, k), xs->get(), ot, k, m, k, s);
    xo = xs->get();
    ldxo = k;
  }

  // Output: y itself when the GEMMs can write it, else an f32 accumulator finished into y.
  const bool direct = y.dtype == DType::f32 || (parts == 1 && y.dtype == ot);
  std::optional<Scratch> acc;
  void* c = y.data;
  DType ct = y.dtype;
  int64_t ldc = row_stride(y, n);
  if (!direct) {
    acc.emplace(size_t(m * n) * sizeof(float), s);
    c = acc->get();
    ct = DType::f32;
    ldc = n;
  }
  const float beta0 = direct ? beta : 0.f;

  // Weight panels: MXFP4 dequantized, dense converted (f16 -> f32) or repacked (rows closer than k).
  const int64_t ldw_in = row_stride(w.w, mx ? k / 2 : k);
  const bool panel = mx || w.w.dtype != ot || ldw_in < k;
  const int64_t panel_rows = panel ? std::min(n, std::max<int64_t>(kPanelBytes / (k * oes), 64)) : n;
  std::optional<Scratch> wp;
  if (panel) wp.emplace(size_t(panel_rows * k * oes), s);
  for (int64_t r0 = 0; r0 < n; r0 += panel_rows) {
    const int64_t rows = std::min(panel_rows, n - r0);
    const void* wo = static_cast<const char*>(w.w.data) + r0 * ldw_in * int64_t(w.w.element_size());
    int64_t ldwo = ldw_in;
    if (mx) {
      mxfp4_dequant_kernel<<<grid_1d(rows * k / 2, kThreads, "linear"), kThreads, 0, s>>>(
          static_cast<const uint8_t*>(wo), ldw_in, static_cast<const uint8_t*>(w.scale.at({r0, 0})),
          row_stride(w.scale, k / 32), wp->get(), elem_type(ot), k, rows, k / 2);
      KIMI_CUDA_CHECK(cudaGetLastError());
    } else if (panel) {
      convert(wo, w.w.dtype, ldw_in, wp->get(), ot, k, rows, k, s);
    }
    if (panel) {
      wo = wp->get();
      ldwo = k;
    }
    void* cr = static_cast<char*>(c) + r0 * int64_t(dtype_size(ct));
    for (int p = 0; p < parts; ++p)
      blas::gemm_xwt(s, m, rows, k, static_cast<const char*>(xo) + p * m * k * oes, ot, ldxo, wo, ot, ldwo, cr, ct,
                     ldc, p == 0 ? beta0 : 1.f);
  }
  if (!direct) {
    finish_kernel<<<grid_1d(m * n, kThreads, "linear"), kThreads, 0, s>>>(acc->get<float>(), y.data,
                                                                             elem_type(y.dtype), row_stride(y, n),
                                                                             beta, m, n);
    KIMI_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

void linear(TensorView x, const Weight& w, TensorView y, float beta, const Context& ctx) {
  const int64_t m = x.size(0), n = w.out_features(), k = w.in_features();
  if (m == 0 || n == 0) return;
  const DeviceGuard device_guard(x.device.index);
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  if (k == 0) {  // an empty sum: y = 0 (beta 0) or y unchanged
    if (beta == 0.f) {
      finish_kernel<<<grid_1d(m * n, kThreads, "linear"), kThreads, 0, s>>>(nullptr, y.data, elem_type(y.dtype),
                                                                               row_stride(y, n), 0.f, m, n);
      KIMI_CUDA_CHECK(cudaGetLastError());
    }
    return;
  }
  if (takes_gemv(x, w)) return linear_gemv(x, w, y, beta, s);
  linear_gemm(x, w, y, beta, s);
}

void linear_many(std::span<const LinearJob> jobs, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  std::vector<std::optional<Scratch>> xs(jobs.size());  // converted x copies, alive until every launch is queued
  std::vector<std::pair<GemvKey, std::vector<GemvArgs>>> groups;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const LinearJob& j = jobs[i];
    if (j.x.size(0) == 0 || j.w.out_features() == 0 || j.w.in_features() == 0 || !takes_gemv(j.x, j.w)) {
      cuda::linear(j.x, j.w, j.y, j.beta, ctx);
      continue;
    }
    const DeviceGuard device_guard(j.x.device.index);
    GemvKey key{};
    const GemvArgs a = gemv_job(j.x, j.w, j.y, j.beta, xs[i], key, s);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& e) {
      return e.first == key && e.second.size() < size_t(kGemvMaxJobs);
    });
    if (g == groups.end()) g = groups.insert(groups.end(), {key, {}});
    g->second.push_back(a);
  }
  if (groups.empty()) return;
  const DeviceGuard device_guard(jobs[0].x.device.index);
  for (const auto& [key, args] : groups) launch_gemv_jobs(args, key, s);
}

void convert_rows(const void* src, DType ts, int64_t lds, void* dst, DType td, int64_t ldd, int64_t rows, int64_t cols,
                  const Context& ctx, float beta) {
  convert(src, ts, lds, dst, td, ldd, rows, cols, static_cast<cudaStream_t>(ctx.cuda_stream), beta);
}

void mxfp4_dequant(TensorView packed, TensorView scale, TensorView w, const Context& ctx) {
  const int64_t rows = w.size(0), in = w.size(1);
  if (rows * in == 0) return;
  const DeviceGuard device_guard(w.device.index);
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  mxfp4_dequant_kernel<<<grid_1d(rows * in / 2, kThreads, "mxfp4_dequant"), kThreads, 0, s>>>(
      static_cast<const uint8_t*>(packed.data), row_stride(packed, in / 2), static_cast<const uint8_t*>(scale.data),
      row_stride(scale, in / 32), w.data, elem_type(w.dtype), row_stride(w, in), rows, in / 2);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void mxfp4_quant(TensorView w, TensorView packed, TensorView scale, const Context& ctx) {
  const int64_t rows = w.size(0), in = w.size(1);
  if (rows * in == 0) return;
  const DeviceGuard device_guard(w.device.index);
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  mxfp4_quant_kernel<<<grid_1d(rows * in / 32, 128, "mxfp4_quant"), 128, 0, s>>>(
      w.data, elem_type(w.dtype), row_stride(w, in), static_cast<uint8_t*>(packed.data), row_stride(packed, in / 2),
      static_cast<uint8_t*>(scale.data), row_stride(scale, in / 32), rows, in / 32);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
