// GPU benchmark: kimi::latent_moe (kimi/ops/moe.h) at real widths, through the public API on CUDA tensors, CUDA
// events, median of 20 timed calls after 3 warm-ups (bench_util.h median_ms), on a non-default stream.
//   Kimi-Linear-48B MoE layer: d 2304, 256 experts top-8 (scaling 2.446), I 1024, 1 shared expert, SiLU, bf16
//     experts, no latent; decode T = 1, 2, 4, 8, 16, 32, 64, 128 and 2048, 8192 (prefill on the tensor-core path,
//     also as a replayed CUDA graph).
//   K3 latent MoE layer: d 7168, latent 3584 + RMSNorm, 896 experts top-16, I 3072, MXFP4 experts, 2 shared
//     (6144), SiTU; decode T = 1 .. 128 as above and 1024, 4096 (prefill); bf16 x takes the tensor-core path at
//     every T outside the touched path (MXFP4 decoded into bf16 tiles in shared memory).
// Decode rows run the layer once per decode path, forced with ScopedExpertPathOptions (src/cuda/moe/options.h:
// `touched`, the grid over the touched experts with the shared expert fused where it can be; `tensor cores`, the
// grouped wgmma GEMM; `grouped`, the FFMA grid over every expert), each captured in a CUDA graph and replayed: ms
// per layer, and GB/s and % of the copy rate on the touched experts' bytes (the routed experts' floor; the
// router, latent and shared weights come on top), then the path the default rule picks (touched at T <=
// touched_max_tokens, else tensor cores) and the fastest, so the rule's threshold can be read off one run (the
// touched path with its default register tile: in flight at T = 1, streaming above); a second line times the
// routed experts' two launches alone per path and tile (kimi::cuda::experts_touched with each TouchedTile,
// experts_wgmma on a random bf16 zg with its automatic kernel and with the cp.async kernel forced,
// experts_grouped; on the row's routing, grouped on the host, no shared expert), separating the expert kernels
// from the router, grouping, shared expert and launches around them.
// `kimi_bench_moe decode` prints the decode rows only.
// Then the routed experts alone (kimi::cuda::experts_wgmma with each grouped GEMM kernel, ExpertPathOptions::
// grouped_gemm: cp.async, grouped_gemm.cuh, and warp-specialized, grouped_gemm_ws.cuh, where it applies (stacked
// dense bf16 experts), against experts_gemm, the per-expert cuBLAS loop, on the same grouped rows: uniform random
// top-k routing, bf16 z) at Kimi-Linear's shapes (T = 2048, 8192) and K3's latent shapes with MXFP4 and with bf16
// experts (T = 1024, 4096): time, TFLOP/s (both launches and the M-tile scan) and the ratios.
// `kimi_bench_moe experts` prints these rows only.
// `kimi_bench_moe mlp` times cuda::mlp alone with each GLU path forced (options.h MlpGluPath) at the Kimi-Linear
// dense (d 2304, I 9216) and shared (I 1024) and K3 shared (d 7168, I 6144) shapes, T = 512, 2048, 8192.
// Experts are stacked (one pool per projection, as place_weights builds them), filled on the device by tiling a
// random block. Decode shapes are timed eagerly and as a replayed CUDA graph (the capture also checks that the
// path never waits on the host). Prints time, the experts the routing touched, the weight bytes one call must
// read (router, latent projections, shared MLP, touched experts: the floor of a bandwidth-bound step) and that
// rate against the H200's copy bandwidth; prefill prints the experts' TFLOP/s (2 * T*K * 3 * I * Dl per call).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cuda/moe/experts.h"
#include "cuda/moe/options.h"
#include "kimi/device.h"
#include "kimi/ops/moe.h"

namespace {

using kimi::DType;
using kimi::TensorView;
using kimi::bench::DevBuf;

struct LayerShape {
  const char* name;
  int64_t d, latent, e, k, inter, shared;  // latent 0: none
  bool mxfp4, situ;
  float scaling;
};

// A device buffer of `bytes` holding a random block (bf16 in [lo, hi), or bytes in [lo, hi]) tiled over it.
std::unique_ptr<DevBuf> filled(size_t bytes, bool bf16, double lo, double hi, std::mt19937& rng) {
  auto b = std::make_unique<DevBuf>(bytes, std::vector<uint8_t>{});
  const size_t blk = std::min<size_t>(bytes, size_t(16) << 20);
  std::vector<uint8_t> src;
  if (bf16) {
    src = kimi::bench::random_bf16(blk / 2, rng, float(lo), float(hi));
  } else {
    std::uniform_int_distribution<int> u{int(lo), int(hi)};
    src.resize(blk);
    for (auto& v : src) v = uint8_t(u(rng));
  }
  DevBuf block(blk, src);
  for (size_t off = 0; off < bytes; off += blk)
    CK(cudaMemcpy(static_cast<char*>(b->p) + off, block.p, std::min(blk, bytes - off), cudaMemcpyDeviceToDevice));
  return b;
}

struct Layer {
  std::vector<std::unique_ptr<DevBuf>> keep;
  std::vector<kimi::MlpWeights> experts;
  kimi::MlpWeights shared;
  kimi::LatentMoeWeights w;
  double fixed_bytes = 0, expert_bytes = 0;  // weight bytes read by every call / per touched expert

  Layer(const LayerShape& s, std::mt19937& rng) : experts(size_t(s.e)) {
    const kimi::Device dev = kimi::Device::cuda(0);
    const auto dense = [&](int64_t out, int64_t in) {
      const double a = 1.7 / std::sqrt(double(in));
      keep.push_back(filled(size_t(out * in * 2), true, -a, a, rng));
      fixed_bytes += double(out * in * 2);
      return kimi::Weight{TensorView(keep.back()->p, DType::bf16, {out, in}, dev), {}};
    };
    w.router = dense(s.e, s.d);
    keep.push_back(std::make_unique<DevBuf>(size_t(s.e) * 4, kimi::bench::random_f32(size_t(s.e), rng, -0.05f, 0.05f)));
    w.router_bias = TensorView(keep.back()->p, DType::f32, {s.e}, dev);
    const int64_t dl = s.latent ? s.latent : s.d;
    if (s.latent) {
      w.latent_down = dense(dl, s.d);
      w.latent_up = dense(s.d, dl);
      keep.push_back(filled(size_t(dl) * 2, true, 0.9, 1.1, rng));
      w.latent_norm = TensorView(keep.back()->p, DType::bf16, {dl}, dev);
    }
    shared = kimi::MlpWeights{dense(s.shared, s.d), dense(s.shared, s.d), dense(s.d, s.shared)};
    w.shared = &shared;
    kimi::Weight kimi::MlpWeights::*projs[3] = {&kimi::MlpWeights::gate, &kimi::MlpWeights::up,
                                                &kimi::MlpWeights::down};
    for (int p = 0; p < 3; ++p) {
      const int64_t out = p < 2 ? s.inter : dl, in = p < 2 ? dl : s.inter;
      if (s.mxfp4) {
        keep.push_back(filled(size_t(s.e * out * in / 2), false, 0, 255, rng));
        const char* pw = static_cast<const char*>(keep.back()->p);
        keep.push_back(filled(size_t(s.e * out * in / 32), false, 118, 122, rng));
        const char* ps = static_cast<const char*>(keep.back()->p);
        for (int64_t e = 0; e < s.e; ++e)
          experts[size_t(e)].*projs[p] = kimi::Weight{
              TensorView(const_cast<char*>(pw) + e * out * in / 2, DType::u8, {out, in / 2}, dev),
              TensorView(const_cast<char*>(ps) + e * out * in / 32, DType::u8, {out, in / 32}, dev)};
        expert_bytes += double(out * in / 2 + out * in / 32);
      } else {
        const double a = 1.7 / std::sqrt(double(in));
        keep.push_back(filled(size_t(s.e * out * in * 2), true, -a, a, rng));
        const char* pw = static_cast<const char*>(keep.back()->p);
        for (int64_t e = 0; e < s.e; ++e)
          experts[size_t(e)].*projs[p] =
              kimi::Weight{TensorView(const_cast<char*>(pw) + e * out * in * 2, DType::bf16, {out, in}, dev), {}};
        expert_bytes += double(out * in * 2);
      }
    }
    w.experts = experts;
  }
};

// Median ms of one replay of a CUDA graph of fn() captured on st.
template <class F>
double graph_ms(F&& fn, cudaStream_t st) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  fn();
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  const double ms = kimi::bench::median_ms([&] { CK(cudaGraphLaunch(ge, st)); }, 3, 20, st);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return ms;
}

// Bytes of int32 values, for a DevBuf.
std::vector<uint8_t> bytes_of(const std::vector<int32_t>& v) {
  return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                              reinterpret_cast<const uint8_t*>(v.data() + v.size()));
}

// Routing ids [T * K] (slot order: token i's slots i K .. i K + K - 1) grouped by expert on the host as group.cuh
// groups them on the device: offsets [E + 1] (expert e's grouped rows offsets[e] .. offsets[e + 1] - 1),
// token_of_row [T * K] (the slots in order within an expert), and the touched experts ascending, padded with 0 to
// min(E, T K) entries, then their count (ExpertRows::active, n_active).
struct HostGrouping {
  std::vector<int32_t> offsets, token_of_row, active;
  HostGrouping(const std::vector<int32_t>& ids, int64_t e, int64_t k)
      : offsets(size_t(e) + 1, 0), token_of_row(ids.size()) {
    for (const int32_t id : ids) ++offsets[size_t(id) + 1];
    for (int64_t x = 0; x < e; ++x) {
      if (offsets[size_t(x) + 1] > 0) active.push_back(int32_t(x));
      offsets[size_t(x) + 1] += offsets[size_t(x)];
    }
    std::vector<int32_t> cur(offsets.begin(), offsets.end() - 1);
    for (size_t i = 0; i < ids.size(); ++i) token_of_row[size_t(cur[size_t(ids[i])]++)] = int32_t(int64_t(i) / k);
    const size_t touched = active.size();
    active.resize(std::min(size_t(e), ids.size()), 0);
    active.push_back(int32_t(touched));  // n_active after the list
  }
};

// A HostGrouping uploaded, and the ExpertRows over it.
struct GroupedRows {
  HostGrouping host;
  DevBuf offsets, token_of_row, active;
  int64_t slots, tokens;

  GroupedRows(const std::vector<int32_t>& ids, int64_t e, int64_t k)
      : host(ids, e, k),
        offsets(host.offsets.size() * 4, bytes_of(host.offsets)),
        token_of_row(host.token_of_row.size() * 4, bytes_of(host.token_of_row)),
        active(host.active.size() * 4, bytes_of(host.active)),
        slots(int64_t(ids.size())),
        tokens(slots / k) {}

  // Without the touched list (the grouped, tensor-core and cuBLAS paths).
  kimi::cuda::ExpertRows rows() const {
    return {static_cast<const int32_t*>(offsets.p), static_cast<const int32_t*>(token_of_row.p), slots, tokens};
  }
  // With the touched list (the touched path).
  kimi::cuda::ExpertRows touched_rows() const {
    kimi::cuda::ExpertRows r = rows();
    r.active = static_cast<const int32_t*>(active.p);
    r.n_active = r.active + (host.active.size() - 1);
    return r;
  }
};

// The routed experts' two launches alone on routing ids (slot order) of a decode row, per path: the grouping of
// group.cuh done on the host (offsets, token_of_row, the touched experts ascending) and uploaded, a random f32 z,
// no shared expert (experts_wgmma on a random bf16 zg in grouped order, with its automatic kernel and with the
// cp.async kernel forced); each timed as a replayed graph. Returns {touched in-flight tile, touched streaming tile,
// tensor cores (automatic kernel), tensor cores (cp.async kernel), grouped} ms.
std::array<double, 5> experts_alone(const LayerShape& s, const Layer& L, int64_t t, const std::vector<int32_t>& ids,
                                    cudaStream_t st, std::mt19937& rng) {
  const int64_t dl = s.latent ? s.latent : s.d, slots = t * s.k;
  const GroupedRows grouped_rows(ids, s.e, s.k);
  DevBuf z(size_t(t * dl) * 4, kimi::bench::random_f32(size_t(t * dl), rng, -1, 1));
  DevBuf zg(size_t(slots * dl) * 2, kimi::bench::random_bf16(size_t(slots * dl), rng, -1, 1));
  DevBuf ye(size_t(slots * dl) * 4, {});
  kimi::cuda::ExpertRows rows = grouped_rows.rows();
  const kimi::cuda::ExpertLayout layout = kimi::cuda::expert_layout(L.w.experts);
  kimi::GluParams act_p;
  act_p.act = s.situ ? kimi::GluAct::situ : kimi::GluAct::silu;
  const double grouped = graph_ms(
      [&] {
        kimi::cuda::experts_grouped(static_cast<const float*>(z.p), dl, L.w.experts, layout, rows, act_p,
                                    static_cast<float*>(ye.p), st);
      },
      st);
  // the tensor-core path with one grouped GEMM kernel forced (options.h GroupedGemmKernel)
  const auto wgmma_ms = [&](kimi::cuda::GroupedGemmKernel kernel) {
    const kimi::cuda::ScopedExpertPathOptions scope(kimi::cuda::ExpertPathOptions{.grouped_gemm = kernel});
    return graph_ms(
        [&] {
          kimi::cuda::experts_wgmma(zg.p, dl, L.w.experts, layout, rows, act_p, ye.p, kimi::DType::f32, st);
        },
        st);
  };
  const double tensor_cores = wgmma_ms(kimi::cuda::GroupedGemmKernel::automatic);
  const double cp_async = wgmma_ms(kimi::cuda::GroupedGemmKernel::cp_async);
  rows = grouped_rows.touched_rows();
  const auto touched_ms = [&](kimi::cuda::TouchedTile tile) {
    const kimi::cuda::ScopedExpertPathOptions scope(kimi::cuda::ExpertPathOptions{.touched_tile = tile});
    return graph_ms(
        [&] {
          kimi::cuda::experts_touched(static_cast<const float*>(z.p), dl, L.w.experts, layout, rows, act_p, nullptr,
                                      static_cast<float*>(ye.p), st);
        },
        st);
  };
  return {touched_ms(kimi::cuda::TouchedTile::in_flight), touched_ms(kimi::cuda::TouchedTile::streaming), tensor_cores,
          cp_async, grouped};
}

// One latent_moe call of layer L on t tokens x [t, d] (random bf16 in [-1, 1)) into out [t, d], the routing ids
// [t, k] and weights [t, k], on a stream of its own (destroyed with the object).
struct LayerCall {
  DevBuf x, out, ids, wts;
  TensorView xv, ov, iv, wv;
  cudaStream_t st = nullptr;
  kimi::Context ctx;
  kimi::GluParams act;
  kimi::RouterParams router;
  const Layer& L;

  LayerCall(const LayerShape& s, const Layer& layer, int64_t t, std::mt19937& rng)
      : x(size_t(t * s.d) * 2, kimi::bench::random_bf16(size_t(t * s.d), rng, -1, 1)),
        out(size_t(t * s.d) * 2, {}),
        ids(size_t(t * s.k) * 4, {}),
        wts(size_t(t * s.k) * 4, {}),
        xv(x.p, DType::bf16, {t, s.d}, kimi::Device::cuda(0)),
        ov(out.p, DType::bf16, {t, s.d}, kimi::Device::cuda(0)),
        iv(ids.p, DType::i32, {t, s.k}, kimi::Device::cuda(0)),
        wv(wts.p, DType::f32, {t, s.k}, kimi::Device::cuda(0)),
        router{int(s.k), true, s.scaling},
        L(layer) {
    CK(cudaStreamCreate(&st));
    ctx.cuda_stream = st;
    act.act = s.situ ? kimi::GluAct::situ : kimi::GluAct::silu;
  }
  ~LayerCall() { CK(cudaStreamDestroy(st)); }
  LayerCall(const LayerCall&) = delete;
  LayerCall& operator=(const LayerCall&) = delete;

  void operator()() const { kimi::latent_moe(xv, L.w, router, act, 1e-5f, ov, iv, wv, 0.f, ctx); }

  // The routing ids of the last call, [t * k] in slot order.
  std::vector<int32_t> host_ids() const {
    std::vector<int32_t> h(size_t(iv.numel()));
    CK(cudaMemcpy(h.data(), ids.p, h.size() * 4, cudaMemcpyDeviceToHost));
    return h;
  }
};

// The decode rows: the same call (same x, same routing) once per decode path, forced, each as a replayed graph.
void run_decode(const LayerShape& s, const Layer& L, int64_t t, std::mt19937& rng) {
  using kimi::cuda::DecodeExpertPath;
  const LayerCall call(s, L, t, rng);
  const cudaStream_t st = call.st;

  // touched, tensor cores, grouped FFMA; each forced and checked in the record
  const char* names[3] = {"touched", "tensor cores", "grouped"};
  const DecodeExpertPath paths[3] = {DecodeExpertPath::touched, DecodeExpertPath::tensor_cores,
                                     DecodeExpertPath::grouped};
  double ms[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    kimi::cuda::ExpertPathRecord rec;
    const kimi::cuda::ScopedExpertPathOptions scope(kimi::cuda::ExpertPathOptions{.decode = paths[i], .record = &rec});
    call();  // warms up outside the capture
    CK(cudaStreamSynchronize(st));
    const int64_t ran = i == 0 ? rec.touched : i == 1 ? rec.wgmma : rec.grouped;
    if (ran != 1) {
      std::printf("decode %-11s T=%-4lld: the forced %s path did not run (touched: E > kGroupMaxExperts; tensor "
                  "cores: not bf16 x with bf16 or MXFP4 experts)\n",
                  s.name, (long long)t, names[i]);
      return;
    }
    ms[i] = graph_ms(call, st);
  }

  const std::vector<int32_t> h = call.host_ids();
  const size_t touched = std::set<int32_t>(h.begin(), h.end()).size();
  const double bytes = double(touched) * L.expert_bytes;  // the touched experts' weights
  const kimi::cuda::ExpertPath rule = kimi::cuda::expert_path(t, t * s.k, DType::bf16, L.w.experts);
  const char* rule_name = rule == kimi::cuda::ExpertPath::touched   ? names[0]
                          : rule == kimi::cuda::ExpertPath::wgmma   ? names[1]
                          : rule == kimi::cuda::ExpertPath::grouped ? names[2]
                                                                    : "cuBLAS";
  const int fastest = int(std::min_element(ms, ms + 3) - ms);
  const auto rate = [&](double m) { return bytes / (m * 1e-3); };
  const auto pct = [&](double m) { return 100.0 * rate(m) / kimi::bench::kCopyBytesPerS; };
  std::printf("decode %-11s T=%-4lld E=%lld K=%lld  %4zu experts %6.3f GB (%5.2f rows each) | touched %7.3f ms "
              "%5.0f GB/s (%3.0f%%) | tensor cores %7.3f ms %5.0f GB/s (%3.0f%%) | grouped %7.3f ms %5.0f GB/s "
              "(%3.0f%%) | rule: %s, fastest: %s\n",
              s.name, (long long)t, (long long)s.e, (long long)s.k, touched, bytes / 1e9,
              double(t * s.k) / double(touched), ms[0], rate(ms[0]) / 1e9, pct(ms[0]), ms[1], rate(ms[1]) / 1e9,
              pct(ms[1]), ms[2], rate(ms[2]) / 1e9, pct(ms[2]), rule_name, names[fastest]);
  const std::array<double, 5> e = experts_alone(s, L, t, h, st, rng);
  std::printf("       routed experts alone (2 launches, no shared; %% of copy): touched in-flight tile %7.3f ms "
              "(%3.0f%%) | touched streaming tile %7.3f ms (%3.0f%%) | tensor cores %7.3f ms (%3.0f%%), cp.async "
              "kernel %7.3f ms (%3.0f%%) | grouped %7.3f ms (%3.0f%%)\n",
              e[0], pct(e[0]), e[1], pct(e[1]), e[2], pct(e[2]), e[3], pct(e[3]), e[4], pct(e[4]));
}

void run(const LayerShape& s, const Layer& L, int64_t t, std::mt19937& rng) {
  const LayerCall call(s, L, t, rng);
  const cudaStream_t st = call.st;
  const double eager = kimi::bench::median_ms(call, 3, 20, st);

  const std::vector<int32_t> h = call.host_ids();
  const size_t touched = std::set<int32_t>(h.begin(), h.end()).size();
  const double bytes = L.fixed_bytes + double(touched) * L.expert_bytes;
  const bool decode = t * s.k <= kimi::cuda::kGroupedMaxRowsPerExpert * s.e;  // a decode path (experts.h)
  // the paths that capture (no host sync): grouped and the tensor-core prefill path
  const bool capturable = kimi::cuda::expert_path(t, t * s.k, DType::bf16, L.w.experts) != kimi::cuda::ExpertPath::gemm;

  const int64_t dl = s.latent ? s.latent : s.d;
  const double flops = 2.0 * double(t * s.k) * 3.0 * double(s.inter) * double(dl);
  std::printf("latent_moe %-11s T=%-5lld E=%lld K=%lld  eager %8.3f ms", s.name, (long long)t, (long long)s.e,
              (long long)s.k, eager);
  if (capturable) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    call();
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    const double graph = kimi::bench::median_ms([&] { CK(cudaGraphLaunch(ge, st)); }, 3, 20, st);
    const double best = std::min(eager, graph);
    std::printf("  graph %8.3f ms  | %4zu experts", graph, touched);
    if (decode)
      std::printf(", %6.3f GB weights: %5.2f TB/s (%3.0f%% of copy bandwidth)", bytes / 1e9,
                  bytes / (best * 1e-3) / 1e12, 100.0 * bytes / (best * 1e-3) / kimi::bench::kCopyBytesPerS);
    else
      std::printf(", whole layer at the experts' %6.1f TFLOP/s", flops / (best * 1e-3) / 1e12);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
  } else {
    std::printf("  (prefill: no graph) | %4zu experts, whole layer at the experts' %6.1f TFLOP/s", touched,
                flops / (eager * 1e-3) / 1e12);
  }
  std::printf("\n");
}

// The routed experts alone on grouped rows: experts_wgmma (one launch per projection pair, device offsets) and
// experts_gemm (offsets to the host, per-expert cuBLAS), same inputs, both timed here.
void run_experts(const LayerShape& s, const Layer& L, int64_t t, std::mt19937& rng) {
  const int64_t dl = s.latent ? s.latent : s.d, slots = t * s.k;
  std::vector<int32_t> ids(static_cast<size_t>(slots));
  std::vector<int32_t> perm(static_cast<size_t>(s.e));
  for (int64_t e = 0; e < s.e; ++e) perm[size_t(e)] = int32_t(e);
  for (int64_t i = 0; i < t; ++i) {  // k distinct experts per token (partial Fisher-Yates)
    for (int64_t j = 0; j < s.k; ++j) {
      std::uniform_int_distribution<int64_t> u(j, s.e - 1);
      std::swap(perm[size_t(j)], perm[size_t(u(rng))]);
      ids[size_t(i * s.k + j)] = perm[size_t(j)];
    }
  }
  const GroupedRows grouped_rows(ids, s.e, s.k);
  const auto zg = filled(size_t(slots * dl) * 2, true, -1, 1, rng);
  DevBuf ye(size_t(slots * dl) * 4, {});
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  kimi::Context ctx;
  ctx.cuda_stream = st;
  kimi::GluParams act;
  act.act = s.situ ? kimi::GluAct::situ : kimi::GluAct::silu;
  const kimi::cuda::ExpertRows rows = grouped_rows.rows();
  const kimi::cuda::ExpertLayout layout = kimi::cuda::expert_layout(L.w.experts);
  const double flops = 2.0 * double(slots) * 3.0 * double(s.inter) * double(dl);
  const auto tflops = [&](double ms) { return flops / (ms * 1e-3) / 1e12; };
  // experts_wgmma with one grouped GEMM kernel forced (options.h GroupedGemmKernel), ye bf16 as latent_moe writes it
  const auto wgmma_ms = [&](kimi::cuda::GroupedGemmKernel kernel) {
    const kimi::cuda::ScopedExpertPathOptions scope(kimi::cuda::ExpertPathOptions{.grouped_gemm = kernel});
    return kimi::bench::median_ms(
        [&] { kimi::cuda::experts_wgmma(zg->p, dl, L.w.experts, layout, rows, act, ye.p, kimi::DType::bf16, st); },
        3, 20, st);
  };
  const double cp = wgmma_ms(kimi::cuda::GroupedGemmKernel::cp_async);
  const bool ws_applies = kimi::cuda::grouped_gemm_kernel(L.w.experts, layout) ==
                          kimi::cuda::GroupedGemmKernel::warp_specialized;
  const double ws = ws_applies ? wgmma_ms(kimi::cuda::GroupedGemmKernel::warp_specialized) : 0.0;
  const double cb = kimi::bench::median_ms(
      [&] { kimi::cuda::experts_gemm(zg->p, DType::bf16, dl, L.w.experts, rows, act, static_cast<float*>(ye.p), ctx); },
      3, 20, st);
  std::printf("experts    %-11s T=%-5lld E=%lld K=%lld  grouped wgmma cp.async %8.3f ms %6.1f TFLOP/s | ", s.name,
              (long long)t, (long long)s.e, (long long)s.k, cp, tflops(cp));
  if (ws_applies)
    std::printf("warp-specialized %8.3f ms %6.1f TFLOP/s (x%.2f) | ", ws, tflops(ws), cp / ws);
  else
    std::printf("warp-specialized: n/a (MXFP4 or unstacked experts) | ");
  std::printf("per-expert cuBLAS %8.3f ms %6.1f TFLOP/s | best wgmma / cuBLAS x%.2f\n", cb, tflops(cb),
              cb / (ws_applies ? std::min(cp, ws) : cp));
  CK(cudaStreamDestroy(st));
}

// cuda::mlp (the dense MLP, latent_moe's shared expert) with each GLU path forced (options.h MlpGluPath: fused,
// gate + up + GLU in one grouped-GEMM launch; separate, two cuBLAS GEMMs into f32 and glu_kernel), y f32 beta 1 as
// the model adds into the residual: ms, TFLOP/s (2 T * 3 I * d) and the path the automatic rule takes.
void run_mlp(const char* name, int64_t d, int64_t inter, int64_t t, std::mt19937& rng) {
  const kimi::Device dev = kimi::Device::cuda(0);
  const double ad = 1.7 / std::sqrt(double(d)), ai = 1.7 / std::sqrt(double(inter));
  const auto w1 = filled(size_t(inter * d * 2), true, -ad, ad, rng);
  const auto w3 = filled(size_t(inter * d * 2), true, -ad, ad, rng);
  const auto w2 = filled(size_t(d * inter * 2), true, -ai, ai, rng);
  const auto x = filled(size_t(t * d * 2), true, -1, 1, rng);
  DevBuf y(size_t(t * d) * 4, {});
  CK(cudaMemset(y.p, 0, size_t(t * d) * 4));
  const kimi::MlpWeights w{kimi::Weight{TensorView(w1->p, DType::bf16, {inter, d}, dev), {}},
                           kimi::Weight{TensorView(w3->p, DType::bf16, {inter, d}, dev), {}},
                           kimi::Weight{TensorView(w2->p, DType::bf16, {d, inter}, dev), {}}};
  const TensorView xv(x->p, DType::bf16, {t, d}, dev), yv(y.p, DType::f32, {t, d}, dev);
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  kimi::Context ctx;
  ctx.cuda_stream = st;
  const double flops = 2.0 * double(t) * 3.0 * double(inter) * double(d);
  const auto ms_of = [&](kimi::cuda::MlpGluPath path) {
    const kimi::cuda::ScopedExpertPathOptions scope(kimi::cuda::ExpertPathOptions{.mlp_glu = path});
    return kimi::bench::median_ms([&] { kimi::mlp(xv, w, kimi::GluParams{}, yv, 1.f, ctx); }, 3, 20, st);
  };
  const double fused = ms_of(kimi::cuda::MlpGluPath::fused), separate = ms_of(kimi::cuda::MlpGluPath::separate);
  const bool rule = kimi::cuda::glu_wgmma_applies(xv, w);
  std::printf("mlp        %-16s T=%-5lld d=%lld I=%lld  fused %8.3f ms %6.1f TFLOP/s | separate %8.3f ms %6.1f "
              "TFLOP/s | separate / fused x%.2f | rule: %s\n",
              name, (long long)t, (long long)d, (long long)inter, fused, flops / (fused * 1e-3) / 1e12, separate,
              flops / (separate * 1e-3) / 1e12, separate / fused, rule ? "fused" : "separate");
  CK(cudaStreamDestroy(st));
}

}  // namespace

int main(int argc, char** argv) {
  if (kimi::cuda_device_count() == 0) {
    std::printf("bench_moe: no CUDA device\n");
    return 0;
  }
  const bool decode_only = argc > 1 && std::string(argv[1]) == "decode";
  const bool experts_only = argc > 1 && std::string(argv[1]) == "experts";
  const bool mlp_only = argc > 1 && std::string(argv[1]) == "mlp";
  if (mlp_only) {
    std::mt19937 rng(7);
    for (int64_t t : {512, 2048, 8192}) {
      run_mlp("kimi-linear dense", 2304, 9216, t, rng);
      run_mlp("kimi-linear shared", 2304, 1024, t, rng);
      run_mlp("k3 shared", 7168, 6144, t, rng);
    }
    return 0;
  }
  const std::vector<int64_t> decode_t = {1, 2, 4, 8, 16, 32, 64, 128};
  std::printf("decode rows: ms per layer (graph replay); GB/s and %% of the copy rate %.2f TB/s on the touched "
              "experts' bytes; default rule: touched at T <= %lld, else tensor cores where they apply\n",
              kimi::bench::kCopyBytesPerS / 1e12, (long long)kimi::cuda::expert_path_options().touched_max_tokens);
  std::mt19937 rng(7);
  {
    const LayerShape s{"kimi-linear", 2304, 0, 256, 8, 1024, 1024, false, false, 2.446f};
    const Layer L(s, rng);
    if (!experts_only)
      for (int64_t t : decode_t) run_decode(s, L, t, rng);
    if (!decode_only) {
      if (!experts_only)
        for (int64_t t : {2048, 8192}) run(s, L, t, rng);
      for (int64_t t : {2048, 8192}) run_experts(s, L, t, rng);
    }
  }
  {
    const LayerShape s{"k3", 7168, 3584, 896, 16, 3072, 6144, true, true, 1.f};
    const Layer L(s, rng);
    if (!experts_only)
      for (int64_t t : decode_t) run_decode(s, L, t, rng);
    if (!decode_only) {
      if (!experts_only)
        for (int64_t t : {1024, 4096}) run(s, L, t, rng);
      for (int64_t t : {1024, 4096}) run_experts(s, L, t, rng);  // MXFP4 on tensor cores against the cuBLAS path
    }
  }
  if (!decode_only) {
    const LayerShape s{"k3-bf16", 7168, 3584, 896, 16, 3072, 64, false, true, 1.f};  // 59 GB of bf16 experts
    const Layer L(s, rng);
    for (int64_t t : {1024, 4096}) run_experts(s, L, t, rng);
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
