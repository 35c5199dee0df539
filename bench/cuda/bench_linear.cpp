// GPU benchmark: kimi::linear (y = x W^T) on CUDA tensors at Kimi K3 and Kimi-Linear shapes, CUDA events. Weights
// rotate over enough copies (>= 256 MiB) that every call reads them from HBM, not L2 (the H200 has 50 MiB of L2).
// Decode (M = 1, 2, 4, 8, 16, bf16 x: the GEMVs of src/cuda/linear/) on K3 7168 -> 2048 and 2048 -> 7168 and
// Kimi-Linear 2304 -> 4096, 4096 -> 2304 and an expert's 2304 -> 1024; then x f32 and MXFP4 weights (K3 latent
// routed expert w1 [3072, 3584]) at M = 1 and 8, the Kimi-Linear lm_head [163840, 2304] at M = 1 and 8, and
// prefill (M = 512, 4096: cuBLAS) on the K3 shapes.
// Decode lines: 'single' = median of 30 calls timed alone (launch latency included); 'queued' = per call in 20 calls
// queued behind a host gate and run back to back (bench_util.h queued_ms: the device's time alone, as the decode
// graph replays a step), as TB/s of weight bytes read and the fraction of the H200's copy bandwidth
// (bench_util.h kCopyBytesPerS); the same for the baseline, and kimi / cuBLAS of the queued times (< 1: kimi faster).
// Prefill lines: TFLOP/s = 2 M N K / time of single calls.
// Baseline, same run: cublasGemmEx bf16 x bf16 -> f32 (x already bf16: the plain GEMM a bf16 engine runs).
// KIMI_CUDA_GEMV=ffma in the environment measures the FFMA GEMV instead of the tensor-core one (src/cuda/linear/).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "bench_util.h"
#include "kimi/device.h"
#include "kimi/ops/linear.h"

namespace {

using kimi::DType;
using kimi::bench::DevBuf;

constexpr size_t kRotateBytes = size_t(256) << 20;

std::vector<uint8_t> random_bytes(size_t n, std::mt19937& rng, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<uint8_t> b(n);
  for (auto& v : b) v = uint8_t(d(rng));
  return b;
}

// Rotating copies of one projection's weights: dense bf16 [n, k] or MXFP4 packed [n, k/2] + scales [n, k/32].
struct Weights {
  int64_t n, k;
  bool mxfp4;
  size_t bytes;  // of one copy: what a call reads
  std::vector<std::unique_ptr<DevBuf>> w, sc;
};

Weights make_weights(int64_t n, int64_t k, bool mxfp4, std::mt19937& rng) {
  Weights r{n, k, mxfp4, mxfp4 ? size_t(n * k / 2 + n * k / 32) : size_t(n * k * 2), {}, {}};
  const int copies = int(std::max<size_t>(1, (kRotateBytes + r.bytes - 1) / r.bytes));
  for (int c = 0; c < copies; ++c) {
    if (mxfp4) {
      r.w.push_back(std::make_unique<DevBuf>(size_t(n * k / 2), random_bytes(size_t(n * k / 2), rng, 0, 255)));
      r.sc.push_back(std::make_unique<DevBuf>(size_t(n * k / 32), random_bytes(size_t(n * k / 32), rng, 118, 124)));
    } else {
      r.w.push_back(
          std::make_unique<DevBuf>(r.bytes, kimi::bench::random_bf16(size_t(n * k), rng, -0.02f, 0.02f)));
    }
  }
  return r;
}

// The baseline over the same rotating weight copies: one call timed alone (calls = 1) or queued (calls > 1).
double cublas_bf16_ms(int64_t m, const Weights& wt, const void* x, void* y, int calls) {
  static cublasHandle_t h = [] {
    cublasHandle_t hh;
    if (cublasCreate(&hh) != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "bench_linear: cublasCreate failed\n");
      std::exit(1);
    }
    return hh;
  }();
  const float alpha = 1.f, beta = 0.f;
  size_t c = 0;
  const auto call = [&] {
    const void* wc = wt.w[c]->p;
    c = (c + 1) % wt.w.size();
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(wt.n), int(m), int(wt.k), &alpha, wc, CUDA_R_16BF, int(wt.k), x,
                 CUDA_R_16BF, int(wt.k), &beta, y, CUDA_R_32F, int(wt.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  return calls > 1 ? kimi::bench::queued_ms(call, 5, 5, calls) : kimi::bench::median_ms(call, 5, 30);
}

double copy_fraction(size_t bytes, double ms) { return 100.0 * double(bytes) / (ms * 1e-3) / kimi::bench::kCopyBytesPerS; }

void run(const char* name, const Weights& wt, int64_t m, DType xt, std::mt19937& rng) {
  const int64_t n = wt.n, k = wt.k;
  const kimi::Device dev = kimi::Device::cuda(0);
  const size_t xs = size_t(kimi::dtype_size(xt));
  DevBuf x(size_t(m * k) * xs, xt == DType::f32 ? kimi::bench::random_f32(size_t(m * k), rng, -1, 1)
                                                 : kimi::bench::random_bf16(size_t(m * k), rng, -1, 1));
  DevBuf y(size_t(m * n) * xs, {});
  const kimi::TensorView xv(x.p, xt, {m, k}, dev), yv(y.p, xt, {m, n}, dev);
  size_t c = 0;
  const auto call = [&] {
    kimi::Weight w;
    if (wt.mxfp4) {
      w.w = kimi::TensorView(wt.w[c]->p, DType::u8, {n, k / 2}, dev);
      w.scale = kimi::TensorView(wt.sc[c]->p, DType::u8, {n, k / 32}, dev);
    } else {
      w.w = kimi::TensorView(wt.w[c]->p, DType::bf16, {n, k}, dev);
    }
    c = (c + 1) % wt.w.size();
    kimi::linear(xv, w, yv);
  };
  const bool decode = m <= 16;
  const double ms = kimi::bench::median_ms(call, 5, 30);
  std::printf("linear %-22s M=%-4lld N=%-6lld K=%-5lld x %-4s  single %8.4f ms", name, (long long)m, (long long)n,
              (long long)k, xt == DType::f32 ? "f32" : "bf16", ms);
  DevBuf xb(size_t(m * k) * 2, kimi::bench::random_bf16(size_t(m * k), rng, -1, 1)), yb(size_t(m * n) * 4, {});
  if (decode) {
    const double q = kimi::bench::queued_ms(call, 5, 5, 20);
    std::printf("  queued %8.4f ms %5.2f TB/s (%3.0f%% of copy)", q, double(wt.bytes) / (q * 1e-3) / 1e12,
                copy_fraction(wt.bytes, q));
    if (!wt.mxfp4) {
      const double base = cublas_bf16_ms(m, wt, xb.p, yb.p, 20);
      std::printf("  | cuBLAS queued %8.4f ms (%3.0f%% of copy), kimi / cuBLAS %.2f", base,
                  copy_fraction(wt.bytes, base), q / base);
    }
  } else {
    std::printf("  %7.1f TFLOP/s", 2.0 * double(m) * double(n) * double(k) / (ms * 1e-3) / 1e12);
    if (!wt.mxfp4) {
      const double base = cublas_bf16_ms(m, wt, xb.p, yb.p, 1);
      std::printf("  | cuBLAS %8.4f ms, kimi / cuBLAS %.2f", base, ms / base);
    }
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int main() {
  if (kimi::cuda_device_count() == 0) {
    std::printf("bench_linear: no CUDA device\n");
    return 0;
  }
  std::mt19937 rng(7);
  struct Shape {
    const char* name;
    int64_t n, k;
  };
  const Shape decode[] = {{"K3 7168->2048", 2048, 7168},   {"K3 2048->7168", 7168, 2048},
                          {"KL 2304->4096", 4096, 2304},   {"KL 4096->2304", 2304, 4096},
                          {"KL expert 2304->1024", 1024, 2304}};
  for (const Shape& s : decode) {
    const Weights w = make_weights(s.n, s.k, false, rng);
    for (int64_t m : {1, 2, 4, 8, 16}) run(s.name, w, m, DType::bf16, rng);
  }
  {
    const Weights w = make_weights(163840, 2304, false, rng);
    for (int64_t m : {1, 8}) run("KL lm_head 2304->163840", w, m, DType::bf16, rng);
  }
  {
    const Weights w = make_weights(3072, 3584, true, rng);
    for (int64_t m : {1, 8})
      for (DType xt : {DType::bf16, DType::f32}) run("mxfp4 K3 expert w1", w, m, xt, rng);
  }
  {
    const Weights w = make_weights(2048, 7168, false, rng);
    for (int64_t m : {1, 8, 512, 4096}) run("K3 7168->2048", w, m, DType::f32, rng);
    for (int64_t m : {512, 4096}) run("K3 7168->2048", w, m, DType::bf16, rng);
  }
  {
    const Weights w = make_weights(7168, 2048, false, rng);
    for (int64_t m : {512, 4096}) run("K3 2048->7168", w, m, DType::bf16, rng);
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
