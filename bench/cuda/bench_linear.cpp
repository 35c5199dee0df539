// GPU benchmark: kimi::linear (y = x W^T) on CUDA tensors at Kimi K3 shapes, CUDA events, median of 30
// timed calls after 5 warm-ups. Weights rotate over enough copies (>= 256 MiB) that every call reads them
// from HBM, not L2 (the H200 has 50 MiB of L2).
//   bf16 W [2048, 7168] and [7168, 2048] (K3 hidden 7168 <-> 2048-wide projections), x bf16 and f32;
//   MXFP4 W [3072, 3584] (a K3 latent routed expert's w1), x f32.
// M = 1, 8 (decode: GEMV kernel) prints TB/s = (weight + x + y bytes) / time against the H200's copy
// bandwidth (bench_util.h kCopyBytesPerS), for one call timed alone and per call in a stream of 20 calls queued back
// to back (as in a model's step: the host's launch overhead hidden); M = 512, 4096 (cuBLAS) prints TFLOP/s =
// 2 M N K / time. Kimi-Linear shapes (hidden 2304: the lm_head [163840, 2304], a KDA projection [4096, 2304], an
// expert's w1 [1024, 2304]) at M = 1.
// Baseline, same run: cublasGemmEx bf16 x bf16 -> f32 (x already bf16: the plain GEMM a bf16 engine runs).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
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

// The baseline over the same rotating weight copies.
double cublas_bf16_ms(int64_t m, int64_t n, int64_t k, const void* x, const std::vector<std::unique_ptr<DevBuf>>& w,
                      void* y, int calls) {
  static cublasHandle_t h = [] {
    cublasHandle_t hh;
    cublasCreate(&hh);
    return hh;
  }();
  const float alpha = 1.f, beta = 0.f;
  size_t c = 0;
  const auto call = [&] {
        const void* wc = w[c]->p;
        c = (c + 1) % w.size();
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha, wc, CUDA_R_16BF, int(k), x,
                     CUDA_R_16BF, int(k), &beta, y, CUDA_R_32F, int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      };
  return calls > 1 ? kimi::bench::streamed_ms(call, 5, 5, calls) : kimi::bench::median_ms(call, 5, 30);
}

void run(const char* name, int64_t m, int64_t n, int64_t k, bool mxfp4, DType xt) {
  std::mt19937 rng(7);
  const kimi::Device dev = kimi::Device::cuda(0);
  const size_t wbytes = mxfp4 ? size_t(n * k / 2 + n * k / 32) : size_t(n * k * 2);
  const int copies = int(std::max<size_t>(1, (kRotateBytes + wbytes - 1) / wbytes));
  std::vector<std::unique_ptr<DevBuf>> w, sc;
  for (int c = 0; c < copies; ++c) {
    if (mxfp4) {
      w.push_back(std::make_unique<DevBuf>(size_t(n * k / 2), random_bytes(size_t(n * k / 2), rng, 0, 255)));
      sc.push_back(std::make_unique<DevBuf>(size_t(n * k / 32), random_bytes(size_t(n * k / 32), rng, 118, 124)));
    } else {
      w.push_back(std::make_unique<DevBuf>(size_t(n * k * 2), kimi::bench::random_bf16(size_t(n * k), rng, -0.02f, 0.02f)));
    }
  }
  const size_t xs = size_t(kimi::dtype_size(xt));
  DevBuf x(size_t(m * k) * xs, xt == DType::f32 ? kimi::bench::random_f32(size_t(m * k), rng, -1, 1)
                                                 : kimi::bench::random_bf16(size_t(m * k), rng, -1, 1));
  DevBuf y(size_t(m * n) * xs, {});
  const kimi::TensorView xv(x.p, xt, {m, k}, dev), yv(y.p, xt, {m, n}, dev);
  int c = 0;
  const auto call = [&] {
        kimi::Weight wt;
        if (mxfp4) {
          wt.w = kimi::TensorView(w[size_t(c)]->p, DType::u8, {n, k / 2}, dev);
          wt.scale = kimi::TensorView(sc[size_t(c)]->p, DType::u8, {n, k / 32}, dev);
        } else {
          wt.w = kimi::TensorView(w[size_t(c)]->p, DType::bf16, {n, k}, dev);
        }
        c = (c + 1) % copies;
        kimi::linear(xv, wt, yv);
      };
  const bool decode = m <= 16;
  const double ms = kimi::bench::median_ms(call, 5, 30);
  const double ms_streamed = decode ? kimi::bench::streamed_ms(call, 5, 5, 20) : 0;
  const double bytes = double(wbytes) + double(m * k + m * n) * double(xs);
  const double flops = 2.0 * double(m) * double(n) * double(k);
  std::printf("linear %-22s M=%-5lld N=%-5lld K=%-5lld x %-4s  %8.4f ms  ", name, (long long)m, (long long)n,
              (long long)k, xt == DType::f32 ? "f32" : "bf16", ms);
  if (decode) {
    std::printf("%6.2f TB/s (%3.0f%% of copy)  streamed %8.4f ms %6.2f TB/s (%3.0f%% of copy)",
                bytes / (ms * 1e-3) / 1e12, 100.0 * bytes / (ms * 1e-3) / kimi::bench::kCopyBytesPerS, ms_streamed,
                bytes / (ms_streamed * 1e-3) / 1e12,
                100.0 * bytes / (ms_streamed * 1e-3) / kimi::bench::kCopyBytesPerS);
  } else {
    std::printf("%7.1f TFLOP/s", flops / (ms * 1e-3) / 1e12);
  }
  if (!mxfp4) {  // baseline: plain cuBLAS bf16 GEMM, bf16 x, f32 y
    DevBuf xb(size_t(m * k) * 2, kimi::bench::random_bf16(size_t(m * k), rng, -1, 1)), yb(size_t(m * n) * 4, {});
    const double base = cublas_bf16_ms(m, n, k, xb.p, w, yb.p, 1);
    std::printf("  | cuBLAS bf16 %8.4f ms, kimi / cuBLAS %.2f", base, ms / base);
    if (decode) {
      const double base_s = cublas_bf16_ms(m, n, k, xb.p, w, yb.p, 20);
      std::printf("; streamed cuBLAS %8.4f ms (%3.0f%% of copy), kimi / cuBLAS %.2f", base_s,
                  100.0 * bytes / (base_s * 1e-3) / kimi::bench::kCopyBytesPerS, ms_streamed / base_s);
    }
  }
  std::printf("\n");
}

}  // namespace

int main() {
  if (kimi::cuda_device_count() == 0) {
    std::printf("bench_linear: no CUDA device\n");
    return 0;
  }
  for (int64_t m : {1, 8, 512, 4096}) {
    run("bf16 W 7168->2048", m, 2048, 7168, false, DType::bf16);
    run("bf16 W 2048->7168", m, 7168, 2048, false, DType::bf16);
    run("bf16 W 7168->2048", m, 2048, 7168, false, DType::f32);
    run("mxfp4 expert w1", m, 3072, 3584, true, DType::f32);
  }
  for (int64_t m : {1, 8}) {
    run("KL lm_head 2304->163840", m, 163840, 2304, false, DType::bf16);
    run("KL kda proj 2304->4096", m, 4096, 2304, false, DType::bf16);
    run("KL expert 2304->1024", m, 1024, 2304, false, DType::bf16);
    run("mxfp4 expert w1", m, 3072, 3584, true, DType::bf16);
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
