// GPU benchmark: the KDA block's streaming kernels through the public API on CUDA tensors (the product's call
// path: validation, dispatch, launch): short_conv_fwd, gated_rms_norm, rms_norm, add_rms_norm, l2_norm, kda_gate,
// kda_beta, and the runtime's add_into. Each is a pure stream, so the floor is its bytes over the copy rate.
// Shapes: Kimi-Linear's, prefill [8192, d] and decode-sized [32, d], d = 4096 = 32 heads x 128 (and d = 2304, the
// hidden size, for rms_norm / add_rms_norm / add_into). Activations bf16 (x, y, o, z, f, b), weights f32, KDA's g and
// beta f32, add_into f32 (the runtime's residual stream); short_conv_fwd: one sequence, W = 4, SiLU, bf16 cache
// read and written in place, and 10 sequences x 819 tokens packed (cu_seqlens, a cache row each).
// Time: mean per call of 20 calls queued back to back (bench_util.h streamed_ms), median of 20 such runs after 10
// warm-ups. Bytes: every input read once and every output written once (the minimum the op must move); GB/s and
// the fraction of the H200's 4.25 TB/s copy rate (read + written) follow.
// Usage: kimi_bench_elementwise [filter]   (runs the ops whose name contains `filter`; all without one)
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kimi/device.h"
#include "kimi/ops/conv.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/norm.h"
#include "model/add_into.h"

namespace {

using kimi::DType;
using kimi::TensorView;
using kimi::bench::DevBuf;
using kimi::bench::kCopyBytesPerS;
using kimi::bench::random_bf16;
using kimi::bench::random_f32;

const kimi::Device kDev = kimi::Device::cuda(0);

void report(const char* op, const std::string& shape, double bytes, const std::function<void()>& fn) {
  const double ms = kimi::bench::streamed_ms(fn, 10, 20, 20);
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-16s %-22s %9.4f ms %10.1f MB %8.1f GB/s %6.1f%% of copy\n", op, shape.c_str(), ms, bytes / 1e6, gbs,
              100.0 * gbs * 1e9 / kCopyBytesPerS);
  std::fflush(stdout);
}

std::string dims(int64_t T, int64_t d) { return "[" + std::to_string(T) + ", " + std::to_string(d) + "]"; }

void conv(int64_t T, int64_t C, std::mt19937& rng) {
  constexpr int64_t W = 4;
  const size_t n = size_t(T * C);
  DevBuf x(n * 2, random_bf16(n, rng, -2, 2)), y(n * 2, {});
  DevBuf w(size_t(C * W) * 4, random_f32(size_t(C * W), rng, -0.6f, 0.6f));
  DevBuf cache(size_t(C * (W - 1)) * 2, random_bf16(size_t(C * (W - 1)), rng, -2, 2));
  const TensorView xv(x.p, DType::bf16, {1, T, C}, kDev), yv(y.p, DType::bf16, {1, T, C}, kDev);
  const TensorView wv(w.p, DType::f32, {C, 1, W}, kDev), cv(cache.p, DType::bf16, {1, C, W - 1}, kDev);
  const double bytes = double(n) * 4 + double(C * W) * 4 + double(C * (W - 1)) * 4;
  report("short_conv_fwd", dims(T, C), bytes,
         [&] { kimi::short_conv_fwd(xv, wv, cv, cv, {}, {}, kimi::ConvActivation::silu, yv); });
}

// Packed varlen: N sequences of L tokens with cu_seqlens (host offsets) and one cache row each (slots 0 .. N-1).
void conv_varlen(int64_t N, int64_t L, int64_t C, std::mt19937& rng) {
  constexpr int64_t W = 4;
  const int64_t T = N * L;
  const size_t n = size_t(T * C);
  DevBuf x(n * 2, random_bf16(n, rng, -2, 2)), y(n * 2, {});
  DevBuf w(size_t(C * W) * 4, random_f32(size_t(C * W), rng, -0.6f, 0.6f));
  DevBuf cache(size_t(N * C * (W - 1)) * 2, random_bf16(size_t(N * C * (W - 1)), rng, -2, 2));
  std::vector<int64_t> cu(size_t(N + 1));
  for (int64_t i = 0; i <= N; ++i) cu[size_t(i)] = i * L;
  const TensorView xv(x.p, DType::bf16, {1, T, C}, kDev), yv(y.p, DType::bf16, {1, T, C}, kDev);
  const TensorView wv(w.p, DType::f32, {C, 1, W}, kDev), cv(cache.p, DType::bf16, {N, C, W - 1}, kDev);
  const TensorView cuv(cu.data(), DType::i64, {N + 1}, kimi::Device::cpu());
  const double bytes = double(n) * 4 + double(C * W) * 4 + double(N * C * (W - 1)) * 4;
  report("short_conv_fwd", std::to_string(N) + " x " + std::to_string(L) + " packed, " + std::to_string(C), bytes,
         [&] { kimi::short_conv_fwd(xv, wv, cv, cv, cuv, {}, kimi::ConvActivation::silu, yv); });
}

void gated(int64_t T, int64_t H, int64_t K, std::mt19937& rng) {
  const size_t n = size_t(T * H * K);
  DevBuf o(n * 2, random_bf16(n, rng, -2, 2)), z(n * 2, random_bf16(n, rng, -4, 4)), y(n * 2, {});
  DevBuf w(size_t(K) * 4, random_f32(size_t(K), rng, 0.5f, 1.5f));
  const TensorView ov(o.p, DType::bf16, {T, H, K}, kDev), zv(z.p, DType::bf16, {T, H, K}, kDev);
  const TensorView yv(y.p, DType::bf16, {T, H, K}, kDev), wv(w.p, DType::f32, {K}, kDev);
  report("gated_rms_norm", dims(T, H * K), double(n) * 6 + double(K) * 4,
         [&] { kimi::gated_rms_norm(ov, zv, wv, 1e-5f, yv); });
}

void rms(int64_t T, int64_t d, std::mt19937& rng) {
  const size_t n = size_t(T * d);
  DevBuf x(n * 2, random_bf16(n, rng, -2, 2)), r(n * 2, random_bf16(n, rng, -2, 2)), y(n * 2, {}), s(n * 2, {});
  DevBuf w(size_t(d) * 4, random_f32(size_t(d), rng, 0.5f, 1.5f));
  const TensorView xv(x.p, DType::bf16, {T, d}, kDev), rv(r.p, DType::bf16, {T, d}, kDev);
  const TensorView yv(y.p, DType::bf16, {T, d}, kDev), sv(s.p, DType::bf16, {T, d}, kDev);
  const TensorView wv(w.p, DType::f32, {d}, kDev);
  report("rms_norm", dims(T, d), double(n) * 4 + double(d) * 4, [&] { kimi::rms_norm(xv, wv, 1e-5f, yv); });
  report("add_rms_norm", dims(T, d), double(n) * 8 + double(d) * 4,
         [&] { kimi::add_rms_norm(xv, rv, wv, 1e-6f, sv, yv); });
}

void add_into(int64_t T, int64_t d, std::mt19937& rng) {
  const size_t n = size_t(T * d);
  DevBuf out(n * 4, random_f32(n, rng, -1, 1)), y(n * 4, random_f32(n, rng, -1e-3f, 1e-3f));
  const TensorView ov(out.p, DType::f32, {T, d}, kDev), yv(y.p, DType::f32, {T, d}, kDev);
  report("add_into", dims(T, d), double(n) * 12, [&] { kimi::model::add_into(ov, yv, kimi::Context{}); });
}

void heads(int64_t T, int64_t H, int64_t K, std::mt19937& rng) {
  const size_t n = size_t(T * H * K), nb = size_t(T * H);
  DevBuf x(n * 2, random_bf16(n, rng, -2, 2)), y(n * 2, {}), g(n * 4, {});
  DevBuf b(nb * 2, random_bf16(nb, rng, -4, 4)), beta(nb * 4, {});
  DevBuf A(size_t(H) * 4, random_f32(size_t(H), rng, -1, 1)), dt(size_t(H * K) * 4, random_f32(size_t(H * K), rng, -1, 1));
  const TensorView xv(x.p, DType::bf16, {T, H, K}, kDev), yv(y.p, DType::bf16, {T, H, K}, kDev);
  const TensorView gv(g.p, DType::f32, {T, H, K}, kDev), bv(b.p, DType::bf16, {T, H}, kDev);
  const TensorView betav(beta.p, DType::f32, {T, H}, kDev);
  const kimi::KdaGate gate{kimi::GateForm::softplus, TensorView(A.p, DType::f32, {H}, kDev),
                           TensorView(dt.p, DType::f32, {H * K}, kDev), -5.f};
  report("l2_norm", dims(T, H * K), double(n) * 4, [&] { kimi::l2_norm(xv, yv, 1e-6f); });
  report("kda_gate", dims(T, H * K), double(n) * 6 + double(H * K) * 4, [&] { kimi::kda_gate(xv, gate, gv); });
  report("kda_beta", dims(T, H), double(nb) * 6, [&] { kimi::kda_beta(bv, betav); });
}

}  // namespace

int main(int argc, char** argv) {
  const std::string filter = argc > 1 ? argv[1] : "";
  const auto want = [&](const char* op) { return filter.empty() || std::string(op).find(filter) != std::string::npos; };
  std::mt19937 rng(42);
  std::printf("%-16s %-22s %12s %13s %13s %17s\n", "op", "shape", "time", "bytes", "rate", "fraction");
  for (int64_t T : {8192, 32}) {
    if (want("short_conv_fwd")) conv(T, 4096, rng);
    if (want("short_conv_fwd") && T == 8192) conv_varlen(10, 819, 4096, rng);
    if (want("gated_rms_norm")) gated(T, 32, 128, rng);
    for (int64_t d : {4096, 2304})
      if (want("rms_norm")) rms(T, d, rng);
    for (int64_t d : {4096, 2304})
      if (want("add_into")) add_into(T, d, rng);
    if (want("l2_norm") || want("kda_gate") || want("kda_beta")) heads(T, 32, 128, rng);
  }
  return 0;
}
