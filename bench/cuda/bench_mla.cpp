// GPU benchmark: gated MLA (kimi/ops/mla.h) at Kimi shapes (R = 512, P = 64, Dn = Dv = 128), through the public API
// on CUDA tensors, bf16 everywhere, CUDA events, median of timed calls after warm-ups (bench_util.h median_ms:
// decode 20 after 3, prefill 10 after 2).
//   mla_decode: Kimi-Linear (H = 32) and K3-class (H = 64) heads, bf16 queries, f32 (the model's) and bf16 latent
//     caches; N = 1 at len 32768, N = 32 and 128 at len 4096, N = 1 / 32 / 128 at len 512, every sequence at the same
//     length. Each row times the tensor-core kernel (src/cuda/mla/decode_tc.cuh) and the fp32 FFMA kernel
//     (decode.cuh) in the same run (decode_options.h forces each). The cache pool holds enough copies (rotated
//     through `slots` from call to call) that each call reads cache rows not left in L2 by the previous one. Prints
//     time, the cache bytes a call reads (N * len * (R+P) * element size), their rate in GB/s and its fraction of the
//     H200's copy rate (4.25 TB/s); then the tensor-core op's time per stage: the op stopped after the absorb, after
//     the attend, and whole (decode_options.h MlaDecodeStages), differences of medians: absorb (with the host table's
//     upload), attend, merge + project.
//   mla_decode targets (docs/ops/mla.md "CUDA decode"; `kimi_bench_mla target`, also first in the full run): H = 32
//     and 64, N = 32 / 128 at len 4096 and N = 1 at len 32768, bf16 and f32 caches, the tensor-core op as CUDA graph
//     replays with device lens / slots (the model's form). Prints the time, GB/s and % of copy over the bytes the op
//     must move (cache rows + W_kvb + q, gate, o) and over the cache alone, and the stages as differences. bf16
//     cache rows are printed twice: the mma.sync attend (decode_tc.cuh, "tc") and the warpgroup-MMA attend
//     (decode_wg.cuh, "wgmma", forced by MlaDecodePath::wgmma).
//   mla_prefill: K3 (H = 96, gate) and Kimi-Linear (H = 32, no gate) MLA, R = 512, P = 64, Dn = Dv = 128, at one
//     sequence of T = 4096 and 16384 and a varlen batch of 16 x 512, each through the FlashAttention-3 kernel
//     (flash_fa3.cuh, the default), the fused mma.sync kernel (flash.cuh, the default at other head sizes) and the
//     cuBLAS score blocks (prefill_gemm.cu), forced through src/cuda/mla/options.h, in the same run
//     (`kimi_bench_mla prefill`: these rows only). Prints the op's time, the causal attention's rate
//       attention flop = 2 H (Dn + P + Dv) sum_n L_n (L_n + 1) / 2    (Q K^T and P V over the causal pairs)
//     over the whole op's time (which also holds the kv expansion, 2 T H (Dn + Dv) R flop, printed beside it), and
//     the whole op's rate.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "bench_util.h"
#include "cuda/mla/decode_options.h"  // the kernel switch
#include "cuda/mla/options.h"  // the prefill path switch
#include "kimi/ops/mla.h"

namespace {

using kimi::DType;
using kimi::TensorView;
using kimi::bench::DevBuf;
using kimi::bench::random_bf16;

constexpr int64_t H = 64, R = 512, P = 64, Dn = 128, Dv = 128, Dq = Dn + P, RP = R + P;

// Time per call of mla_decode at one shape, ms. Eager (graph = false): host lens / slots, one call between two events
// (the host's launch work included, as the per-stage differences have always been measured). Graph: device lens /
// slots (the model's capturable form), `copies` calls (each over its own pool rows) captured into one CUDA graph on a
// non-blocking stream, the graph replayed and its time divided by the calls: the device time of the op with the
// launch gaps a captured decode step has (programmatic launches keep their overlap in the graph).
double decode_ms(int64_t heads, int64_t N, int64_t len, DType cache_dt, kimi::cuda::MlaDecodePath path,
                 kimi::cuda::MlaDecodeStages stages = kimi::cuda::MlaDecodeStages::all, bool graph = false) {
  std::mt19937 rng(7);
  const kimi::Device dev = kimi::Device::cuda(0);
  const size_t esz = cache_dt == DType::f32 ? 4 : 2;
  const size_t seq_bytes = size_t(len) * RP * esz;
  // Copies of the batch's cache rows so that the pool is >= 256 MB (twice the H200's L2 many times over).
  const int64_t copies = std::max<int64_t>(1, int64_t((size_t(256) << 20) / (size_t(N) * seq_bytes)));
  const int64_t Nc = N * copies;
  const size_t ncache = size_t(Nc) * len * RP;
  // The cache is big: fill it on the device from a small random block instead of from the host.
  DevBuf cache(ncache * esz, {});
  {
    const size_t blk = std::min<size_t>(ncache, size_t(1) << 22);
    const std::vector<uint8_t> src =
        cache_dt == DType::f32 ? kimi::bench::random_f32(blk, rng, -1.5f, 1.5f) : random_bf16(blk, rng, -1.5f, 1.5f);
    DevBuf s(blk * esz, src);
    for (size_t off = 0; off < ncache; off += blk)
      CK(cudaMemcpy(static_cast<char*>(cache.p) + off * esz, s.p, std::min(blk, ncache - off) * esz,
                    cudaMemcpyDeviceToDevice));
  }
  const size_t nq = size_t(N) * heads * Dq, nw = size_t(heads) * (Dn + Dv) * R, ng = size_t(N) * heads * Dv;
  DevBuf q(nq * 2, random_bf16(nq, rng, -2, 2)), w(nw * 2, random_bf16(nw, rng, -0.07f, 0.07f));
  DevBuf g(ng * 2, random_bf16(ng, rng, -4, 4)), o(ng * 2, {});
  std::vector<int32_t> lens(static_cast<size_t>(N), static_cast<int32_t>(len)), slots(static_cast<size_t>(N));
  const TensorView qv(q.p, DType::bf16, {N, heads, Dq}, dev), cv(cache.p, cache_dt, {Nc, len, RP}, dev);
  const TensorView wv(w.p, DType::bf16, {heads * (Dn + Dv), R}, dev), gv(g.p, DType::bf16, {N, heads * Dv}, dev);
  const TensorView ov(o.p, DType::bf16, {N, heads, Dv}, dev);
  const TensorView lv(lens.data(), DType::i32, {N}), sv(slots.data(), DType::i32, {N});
  kimi::cuda::MlaDecodeRecord rec;
  const kimi::cuda::ScopedMlaDecodePath force(path, &rec, stages);
  if (!graph) {
    int64_t call = 0;
    return kimi::bench::median_ms(
        [&] {
          const int64_t c = call++ % copies;
          for (int64_t n = 0; n < N; ++n) slots[size_t(n)] = int32_t(c * N + n);
          kimi::mla_decode(qv, cv, lv, sv, kimi::Weight{wv, {}}, gv, std::nullopt, ov);
        },
        3, 20);
  }
  std::vector<int32_t> all_slots(static_cast<size_t>(Nc));
  for (int64_t i = 0; i < Nc; ++i) all_slots[size_t(i)] = int32_t(i);
  const auto bytes_of = [](const std::vector<int32_t>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  DevBuf lens_d(size_t(N) * 4, bytes_of(lens)), slots_d(size_t(Nc) * 4, bytes_of(all_slots));
  const TensorView lvd(lens_d.p, DType::i32, {N}, dev);
  cudaStream_t st = nullptr;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  kimi::Context ctx;
  ctx.cuda_stream = st;
  for (int64_t c = 0; c < copies; ++c)  // warm: the scratch pool at its peak before capture
    kimi::mla_decode(qv, cv, lvd, TensorView(static_cast<int32_t*>(slots_d.p) + c * N, DType::i32, {N}, dev),
                     kimi::Weight{wv, {}}, gv, std::nullopt, ov, ctx);
  CK(cudaStreamSynchronize(st));
  if (path == kimi::cuda::MlaDecodePath::wgmma && rec.wgmma == 0) {
    std::fprintf(stderr, "kimi_bench_mla: the wgmma attend does not take this shape (decode_wg.h wg_attend_fits)\n");
    std::exit(1);
  }
  cudaGraph_t gr = nullptr;
  cudaGraphExec_t ex = nullptr;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int64_t c = 0; c < copies; ++c)
    kimi::mla_decode(qv, cv, lvd, TensorView(static_cast<int32_t*>(slots_d.p) + c * N, DType::i32, {N}, dev),
                     kimi::Weight{wv, {}}, gv, std::nullopt, ov, ctx);
  CK(cudaStreamEndCapture(st, &gr));
  CK(cudaGraphInstantiate(&ex, gr, 0));
  const double ms = kimi::bench::median_ms([&] { CK(cudaGraphLaunch(ex, st)); }, 2, 10, st) / double(copies);
  CK(cudaGraphExecDestroy(ex));
  CK(cudaGraphDestroy(gr));
  CK(cudaStreamDestroy(st));
  return ms;
}

// Bytes one call must move: the cache rows read, W_kvb (both halves, read once), q, gate and o (bf16).
double decode_op_bytes(int64_t heads, int64_t N, int64_t len, DType cache_dt) {
  const double cache = double(N) * len * RP * (cache_dt == DType::f32 ? 4 : 2);
  return cache + 2.0 * heads * (Dn + Dv) * R + 2.0 * N * heads * (Dq + 2 * Dv);
}

void decode(int64_t heads, int64_t N, int64_t len, DType cache_dt) {
  using kimi::cuda::MlaDecodePath;
  using kimi::cuda::MlaDecodeStages;
  const double tc = decode_ms(heads, N, len, cache_dt, MlaDecodePath::tensor_cores);
  const double ffma = decode_ms(heads, N, len, cache_dt, MlaDecodePath::ffma);
  const double t_absorb = decode_ms(heads, N, len, cache_dt, MlaDecodePath::tensor_cores, MlaDecodeStages::absorb);
  const double t_attend =
      decode_ms(heads, N, len, cache_dt, MlaDecodePath::tensor_cores, MlaDecodeStages::absorb_attend);
  const double bytes = double(N) * len * RP * (cache_dt == DType::f32 ? 4 : 2);
  const auto rate = [&](double ms) { return bytes / (ms * 1e-3); };
  std::printf("kimi mla_decode  H=%-2lld N=%-3lld len=%-6lld cache %-4s %8.1f MB  tensor cores %8.4f ms %7.0f GB/s "
              "(%3.0f%% of copy)  ffma %8.4f ms %6.0f GB/s (%3.0f%%)  tc stages: absorb %.4f attend %.4f "
              "merge+project %.4f ms\n",
              (long long)heads, (long long)N, (long long)len, cache_dt == DType::f32 ? "f32" : "bf16", bytes / 1e6, tc,
              rate(tc) / 1e9, 100.0 * rate(tc) / kimi::bench::kCopyBytesPerS, ffma, rate(ffma) / 1e9,
              100.0 * rate(ffma) / kimi::bench::kCopyBytesPerS, t_absorb, t_attend - t_absorb, tc - t_attend);
}

// The target rows: graph replays (device lens / slots) of the tensor-core op, whole and stopped after the
// absorb / the attend; GB/s over the bytes the op must move (decode_op_bytes) and over the cache alone, each as a
// fraction of the copy rate.
void decode_target(int64_t heads, int64_t N, int64_t len, DType cache_dt,
                   kimi::cuda::MlaDecodePath path = kimi::cuda::MlaDecodePath::tensor_cores) {
  using kimi::cuda::MlaDecodeStages;
  const auto t = [&](MlaDecodeStages st) { return decode_ms(heads, N, len, cache_dt, path, st, /*graph=*/true); };
  const double all = t(MlaDecodeStages::all), ab = t(MlaDecodeStages::absorb), at = t(MlaDecodeStages::absorb_attend);
  const double cache = double(N) * len * RP * (cache_dt == DType::f32 ? 4 : 2);
  const double op = decode_op_bytes(heads, N, len, cache_dt);
  const double copy = kimi::bench::kCopyBytesPerS;
  std::printf("target mla_decode %-5s graph H=%-2lld N=%-3lld len=%-6lld cache %-4s  %8.4f ms  op %7.1f MB %6.0f "
              "GB/s (%3.0f%% of copy)  cache %7.1f MB %6.0f GB/s (%3.0f%%)  stages: absorb %.4f attend %.4f "
              "merge+project %.4f ms\n",
              path == kimi::cuda::MlaDecodePath::wgmma ? "wgmma" : "tc", (long long)heads, (long long)N,
              (long long)len, cache_dt == DType::f32 ? "f32" : "bf16", all, op / 1e6,
              op / (all * 1e-3) / 1e9, 100.0 * op / (all * 1e-3) / copy, cache / 1e6, cache / (all * 1e-3) / 1e9,
              100.0 * cache / (all * 1e-3) / copy, ab, at - ab, all - at);
}

void prefill(int64_t Hp, bool gated, const std::vector<int64_t>& seqs, kimi::cuda::MlaPrefillPath path) {
  std::mt19937 rng(8);
  const kimi::Device dev = kimi::Device::cuda(0);
  int64_t T = 0;
  for (int64_t l : seqs) T += l;
  const size_t nq = size_t(T) * Hp * Dq, nl = size_t(T) * R, np = size_t(T) * P, nw = size_t(Hp) * (Dn + Dv) * R;
  const size_t no = size_t(T) * Hp * Dv;
  DevBuf q(nq * 2, random_bf16(nq, rng, -2, 2)), lat(nl * 2, random_bf16(nl, rng, -1.7f, 1.7f));
  DevBuf pe(np * 2, random_bf16(np, rng, -1.5f, 1.5f)), w(nw * 2, random_bf16(nw, rng, -0.07f, 0.07f));
  DevBuf g(no * 2, random_bf16(no, rng, -4, 4)), o(no * 2, {});
  std::vector<int32_t> cu{0};
  for (int64_t l : seqs) cu.push_back(cu.back() + int32_t(l));
  const TensorView cuv = seqs.size() > 1 ? TensorView(cu.data(), DType::i32, {int64_t(cu.size())}) : TensorView{};
  const TensorView qv(q.p, DType::bf16, {1, T, Hp, Dq}, dev), lv(lat.p, DType::bf16, {1, T, R}, dev);
  const TensorView pv(pe.p, DType::bf16, {1, T, P}, dev), wv(w.p, DType::bf16, {Hp * (Dn + Dv), R}, dev);
  const TensorView gv(g.p, DType::bf16, {1, T, Hp * Dv}, dev), ov(o.p, DType::bf16, {1, T, Hp, Dv}, dev);
  kimi::cuda::MlaLaunchRecord rec;
  const kimi::cuda::ScopedMlaLaunchOptions scope(kimi::cuda::MlaLaunchOptions{.prefill = path, .record = &rec});
  const double ms = kimi::bench::median_ms(
      [&] { kimi::mla_prefill(qv, lv, pv, kimi::Weight{wv, {}}, gated ? gv : TensorView{}, cuv, std::nullopt, ov); },
      2, 10);
  double pairs = 0;
  for (int64_t l : seqs) pairs += double(l) * double(l + 1) / 2;
  const double attn = 2.0 * pairs * Hp * (Dq + Dv), kv = 2.0 * double(T) * Hp * (Dn + Dv) * R;
  const char* ran = rec.prefill_fused > 0       ? "fused"
                    : rec.prefill_fused_fa3 > 0 ? "fa3"
                    : rec.prefill_blocks > 0    ? "blocks"
                                                : "ffma";
  std::printf("kimi mla_prefill %-6s T=%-5lld (%zu x %lld) H=%-2lld R=%lld P=%lld Dn=Dv=%lld bf16%s  %8.3f ms  "
              "attention %6.1f TFLOP/s (%.2f TFLOP causal)  op %6.1f TFLOP/s (+ kv GEMM %.2f TFLOP)\n",
              ran, (long long)T, seqs.size(), (long long)seqs.front(), (long long)Hp, (long long)R, (long long)P,
              (long long)Dn, gated ? " gate" : "     ", ms, attn / (ms * 1e-3) / 1e12, attn / 1e12,
              (attn + kv) / (ms * 1e-3) / 1e12, kv / 1e12);
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("mla_decode: R=%lld P=%lld Dn=Dv=%lld, bf16 q / W_kvb / gate / o; GB/s = cache bytes read per second\n",
              (long long)R, (long long)P, (long long)Dn);
  // `kimi_bench_mla decode H N len f32|bf16`: that one decode row (for a profiler run on one shape).
  if (argc == 6 && std::string_view(argv[1]) == "decode") {
    decode(std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]),
           std::string_view(argv[5]) == "bf16" ? DType::bf16 : DType::f32);
    return 0;
  }
  // `kimi_bench_mla target [H N len f32|bf16 [wgmma]]`: the target rows (graph replays), or that one.
  const auto target_rows = [](int64_t heads, int64_t N, int64_t len, DType dt) {
    decode_target(heads, N, len, dt);
    if (dt == DType::bf16) decode_target(heads, N, len, dt, kimi::cuda::MlaDecodePath::wgmma);
  };
  if ((argc == 2 || argc == 6 || argc == 7) && std::string_view(argv[1]) == "target") {
    if (argc >= 6) {
      const bool wg = argc == 7 && std::string_view(argv[6]) == "wgmma";
      decode_target(std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]),
                    std::string_view(argv[5]) == "bf16" ? DType::bf16 : DType::f32,
                    wg ? kimi::cuda::MlaDecodePath::wgmma : kimi::cuda::MlaDecodePath::tensor_cores);
      return 0;
    }
    for (int64_t heads : {32, 64})
      for (auto [N, len] : {std::pair<int64_t, int64_t>{32, 4096}, {128, 4096}, {1, 32768}})
        for (DType dt : {DType::bf16, DType::f32}) target_rows(heads, N, len, dt);
    return 0;
  }
  const bool prefill_only = argc == 2 && std::string_view(argv[1]) == "prefill";
  if (argc != 1 && !prefill_only) {
    std::fprintf(stderr,
                 "usage: kimi_bench_mla [decode H N len f32|bf16 | target [H N len f32|bf16 [wgmma]] | prefill]\n");
    return 2;
  }
  if (!prefill_only) {
    for (int64_t heads : {32, 64})
      for (auto [N, len] : {std::pair<int64_t, int64_t>{32, 4096}, {128, 4096}, {1, 32768}})
        for (DType dt : {DType::bf16, DType::f32}) target_rows(heads, N, len, dt);
    for (DType cache_dt : {DType::f32, DType::bf16})
      for (int64_t heads : {32, 64})
        for (auto [N, len] :
             {std::pair<int64_t, int64_t>{1, 32768}, {32, 4096}, {128, 4096}, {1, 512}, {32, 512}, {128, 512}})
          decode(heads, N, len, cache_dt);
  }
  std::printf("mla_prefill: attention TFLOP/s = 2 H (Dn + P + Dv) sum_n L_n (L_n + 1) / 2 / op time "
              "(the op time includes the kv expansion GEMM)\n");
  using kimi::cuda::MlaPrefillPath;
  for (auto [Hp, gated] : {std::pair<int64_t, bool>{96, true}, {32, false}})  // K3, Kimi-Linear
    for (const std::vector<int64_t>& seqs :
         {std::vector<int64_t>{4096}, std::vector<int64_t>{16384}, std::vector<int64_t>(16, 512)})
      for (MlaPrefillPath path : {MlaPrefillPath::fused_fa3, MlaPrefillPath::fused, MlaPrefillPath::blocks})
        prefill(Hp, gated, seqs, path);
  return 0;
}
