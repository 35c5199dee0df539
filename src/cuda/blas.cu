// Implementation of src/cuda/blas.h.
#include "cuda/blas.h"

#include <cublas_v2.h>

#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "cuda/check.cuh"
#include "kimi/error.h"

#define KIMI_CUBLAS_CHECK(expr, what)                                                                   \
  do {                                                                                                  \
    const cublasStatus_t st_ = (expr);                                                                  \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                   \
      throw ::kimi::Error(std::string("cuBLAS error: ") + cublasGetStatusString(st_) + " in " #expr " (" + \
                          (what) + ") at " __FILE__ ":" + std::to_string(__LINE__));                   \
  } while (0)

namespace kimi::cuda::blas {

namespace {

// Every handle's cuBLAS workspace: set by us (cublasSetWorkspace) so that cuBLAS never allocates one itself, which
// it must not do while the stream is being captured into a CUDA graph (32 MiB: cuBLAS's recommendation for Hopper).
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct Bound {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
};

// Never destroyed: a Model held in a static (tests, servers) releases its stream's handle during static
// destruction, possibly after a function-local static here would have been destroyed.
std::mutex& handles_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::map<std::pair<int, cudaStream_t>, Bound>& handles() {
  static auto* h = new std::map<std::pair<int, cudaStream_t>, Bound>;
  return *h;
}

// The handle of the current device bound to stream s (created once per (device, stream), with its workspace).
cublasHandle_t handle(cudaStream_t s) {
  int dev = 0;
  KIMI_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(handles_mutex());
  auto it = handles().find({dev, s});
  if (it != handles().end()) return it->second.handle;
  Bound b;
  KIMI_CUBLAS_CHECK(cublasCreate(&b.handle), "device " + std::to_string(dev));
  try {
    KIMI_CUBLAS_CHECK(cublasSetStream(b.handle, s), "device " + std::to_string(dev));
    // NOTE: default math: with CUBLAS_COMPUTE_32F, f32 GEMMs stay true fp32 (no TF32 down-conversion).
    KIMI_CUBLAS_CHECK(cublasSetMathMode(b.handle, CUBLAS_DEFAULT_MATH), "device " + std::to_string(dev));
    KIMI_CUDA_CHECK(cudaMalloc(&b.workspace, kWorkspaceBytes));
    KIMI_CUBLAS_CHECK(cublasSetWorkspace(b.handle, b.workspace, kWorkspaceBytes), "device " + std::to_string(dev));
  } catch (...) {
    (void)cublasDestroy(b.handle);
    if (b.workspace) (void)cudaFree(b.workspace);
    throw;
  }
  handles().emplace(std::make_pair(dev, s), b);
  return b.handle;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: throw Error("cuda blas: unsupported dtype " + std::string(dtype_name(t)));
  }
}

int as_int(int64_t v, const char* name, const std::string& what) {
  if (v < 0 || v > INT_MAX) throw Error("cuda blas gemm_xwt: " + std::string(name) + " = " + std::to_string(v) +
                                        " does not fit cuBLAS's int32 arguments (" + what + ")");
  return int(v);
}

}  // namespace

void prepare(cudaStream_t s) { (void)handle(s); }

void release(cudaStream_t s) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return;
  const std::lock_guard<std::mutex> lock(handles_mutex());
  auto it = handles().find({dev, s});
  if (it == handles().end()) return;
  (void)cudaStreamSynchronize(s);  // the handle's last GEMMs may still use the workspace
  (void)cublasDestroy(it->second.handle);
  (void)cudaFree(it->second.workspace);
  handles().erase(it);
}

void gemm_xwt(cudaStream_t s, int64_t m, int64_t n, int64_t k, const void* x, DType xt, int64_t ldx, const void* w,
              DType wt, int64_t ldw, void* y, DType yt, int64_t ldy, float beta) {
  const std::string what = "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) + " x " +
                           std::string(dtype_name(xt)) + " w " + std::string(dtype_name(wt)) + " y " +
                           std::string(dtype_name(yt));
  if (xt != wt || (yt != DType::f32 && yt != xt))
    throw Error("cuda blas gemm_xwt: unsupported dtype combination (" + what + ")");
  if (ldx < k || ldw < k || ldy < n) throw Error("cuda blas gemm_xwt: leading dimension too small (" + what + ")");
  const float alpha = 1.f;
  // Row-major y[m, n] = x W^T is column-major y^T[n, m] = W[n, k] (W^T stored as k x n, transposed) * x^T (k x m).
  KIMI_CUBLAS_CHECK(cublasGemmEx(handle(s), CUBLAS_OP_T, CUBLAS_OP_N, as_int(n, "n", what), as_int(m, "m", what),
                                 as_int(k, "k", what), &alpha, w, cuda_type(wt), as_int(ldw, "ldw", what), x,
                                 cuda_type(xt), as_int(ldx, "ldx", what), &beta, y, cuda_type(yt),
                                 as_int(ldy, "ldy", what), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    what);
}

void gemm_batched(cudaStream_t s, int64_t batch, int64_t m, int64_t n, int64_t k, const void* x, DType xt, int64_t ldx,
                  int64_t sx, const void* w, DType wt, int64_t ldw, int64_t sw, bool w_t, void* y, DType yt, int64_t ldy,
                  int64_t sy, float beta) {
  const std::string what = "batch=" + std::to_string(batch) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                           " k=" + std::to_string(k) + " x " + std::string(dtype_name(xt)) + " w " +
                           std::string(dtype_name(wt)) + (w_t ? " (W^T)" : " (W)") + " y " + std::string(dtype_name(yt));
  if (xt != wt || xt == DType::f32 || (yt != DType::f32 && yt != xt))
    throw Error("cuda blas gemm_batched: unsupported dtype combination (" + what + ")");
  if (ldx < k || ldw < (w_t ? k : n) || ldy < n)
    throw Error("cuda blas gemm_batched: leading dimension too small (" + what + ")");
  if (batch == 0 || m == 0 || n == 0) return;
  const float alpha = 1.f;
  // Column-major y^T[n, m] = op(W) x^T: W^T row-major [n, k] is W stored k x n (OP_T); W row-major [k, n] is
  // column-major [n, k] (OP_N).
  KIMI_CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle(s), w_t ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N,
                                               as_int(n, "n", what), as_int(m, "m", what), as_int(k, "k", what), &alpha,
                                               w, cuda_type(wt), as_int(ldw, "ldw", what), sw, x, cuda_type(xt),
                                               as_int(ldx, "ldx", what), sx, &beta, y, cuda_type(yt),
                                               as_int(ldy, "ldy", what), sy, as_int(batch, "batch", what),
                                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    what);
}

}  // namespace kimi::cuda::blas
