// The KDA block's streaming kernels on CUDA (short_conv_fwd, the norms, kda_gate / kda_beta, the runtime's add_into)
// against the CPU backend at the models' widths, on a CUDA device (registered in a CUDA build only,
// tests/cuda_tests.h; skipped there without a device, run on the GPU machine):
//   - short_conv_fwd, C = 4096 (32 heads x 128), W = 4, SiLU, f32, bf16 and f16: T = 1 and 7 (one sequence, and a
//     [3, 7, C] batch), [3, 1499] and [2, 2051] batches (4-token tiles crossing batch rows), C = 300 / 1000 / 2056
//     (a per-element path, partial channel blocks; bf16 taps at 2056),
//     8192 tokens packed as sequences of odd lengths including lengths below W - 1 and zero, with
//     cache_in / cache_out pools addressed by shuffled slots and written in place; x and y as slices of wider rows
//     (a q / k / v slice of a fused projection: the 16-byte path) and with odd row strides (the per-element path).
//     y within tol_for(dtype) (relative RMS) of the CPU, the cache pools bit for bit (they hold copied inputs), and
//     GPU prefill(T) == GPU prefill(T - n) + n short_conv_update steps bit for bit (the same fp32 arithmetic), T up
//     to 4099 (the 4-token tiles and the per-token path at the sequence start).
//   - rms_norm / add_rms_norm (sum over x) at D = 2304 and 4096, gated_rms_norm (with and without z) and l2_norm at
//     [T, 32, 128], kda_gate (both forms) and kda_beta at [T, 32, 128] / [T, 32], for T = 8192 and decode-sized
//     T = 1, 7, 32, 128; aligned views (the vectorized row launch) and, up to T = 128, padded rows (strided vector
//     launch) and unaligned ones (one warp per row); D = 8192
//     (one row per block) and D = 40000 (past the vector launch).
//   - add_into: bit for bit with the CPU (one f32 add), aligned and odd row strides.
//   - The same kernels at decode widths captured in a CUDA graph and replayed on new inputs: bit-identical to eager
//     calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kimi/device.h"
#include "kimi/ops/conv.h"
#include "kimi/ops/kda.h"
#include "kimi/ops/norm.h"
#include "model/add_into.h"
#include "tensor_testutil.h"
#include "verify/cases/case.h"

#ifdef KIMI_WITH_CUDA
#include <cuda_runtime.h>

namespace kimi {
namespace {

using testutil::copy_to;
using testutil::host_values;

const Device gpu = Device::cuda(0);
const Device cpu = Device::cpu();
constexpr auto kSilu = ConvActivation::silu;

Tensor uniform(DType dt, std::vector<int64_t> shape, uint64_t seed, double lo = -2, double hi = 2) {
  Tensor h(dt, std::span<const int64_t>(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < h.numel(); ++i) store_from_f32(h.data(), dt, i, float(u(rng)));
  return h;
}

Tensor ints(const std::vector<int64_t>& v) {
  Tensor h(DType::i64, {int64_t(v.size())});
  std::memcpy(h.data(), v.data(), v.size() * sizeof(int64_t));
  return h;
}

size_t mismatches(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = host_values(a), y = host_values(b);
  size_t bad = x.size() != y.size();
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) bad += !(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])));
  return bad;
}

double rel(const Tensor& got, const Tensor& ref) { return verify::rel_err(host_values(got), host_values(ref)); }

bool finite(const Tensor& t) {
  for (double v : host_values(t))
    if (!std::isfinite(v)) return false;
  return true;
}

// A host buffer and its device copy: the same values on both backends.
struct Pair {
  Tensor h, d;
  explicit Pair(Tensor host) : h(std::move(host)), d(copy_to(h, Device::cuda(0))) {}
  const Tensor& on(Device dev) const { return dev.type == DeviceType::cpu ? h : d; }
};

class CudaElementwise : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (these run on the GPU machine)";
  }
};

// ---------------------------------------------------------------------------------------------------------------
// short_conv_fwd

struct ConvCase {
  std::string name;
  DType dt;
  int64_t B, C;
  std::vector<int64_t> lens;  // packed with cu_seqlens when non-empty (B = 1), else B rows of T = total
  int64_t T;
  int64_t x_pad, y_pad;       // extra elements per row (x, y slices of wider rows)
  bool caches;                // cache_in = cache_out (in place) in a pool addressed by shuffled slots
  DType wdt = DType::f32;     // the taps' dtype
};

void run_conv_case(const ConvCase& k) {
  SCOPED_TRACE(k.name + " " + std::string(dtype_name(k.dt)));
  const int64_t W = 4, H = W - 1, C = k.C;
  const int64_t T = k.lens.empty() ? k.T : std::accumulate(k.lens.begin(), k.lens.end(), int64_t(0));
  const int64_t N = k.lens.empty() ? k.B : int64_t(k.lens.size());
  const Pair xw(uniform(k.dt, {k.B, T, C + k.x_pad}, 11)), w(uniform(k.wdt, {C, 1, W}, 12, -0.6, 0.6));
  Pair yw(uniform(k.dt, {k.B, T, C + k.y_pad}, 13));
  const int64_t Nc = N + 3;
  Pair pool(uniform(k.dt, {Nc, C, H}, 14));
  std::vector<int64_t> slots(static_cast<size_t>(N));
  std::iota(slots.begin(), slots.end(), int64_t(0));
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(15));
  for (int64_t& s : slots) s = Nc - 1 - s;  // rows 3 .. Nc-1 in a shuffled order; rows 0..2 untouched
  const Tensor slot_t = ints(slots);
  const testutil::Varlen vl(k.lens.empty() ? std::vector<int64_t>{1} : k.lens);
  const TensorView cu = k.lens.empty() ? TensorView{} : vl.cu.view();
  for (Device dev : {cpu, gpu}) {
    const TensorView x = xw.on(dev).view().slice(2, k.x_pad, k.x_pad + C);
    const TensorView y = yw.on(dev).view().slice(2, 0, C);
    const TensorView c = k.caches ? pool.on(dev).view() : TensorView{};
    short_conv_fwd(x, w.on(dev), c, c, cu, k.caches ? slot_t.view() : TensorView{}, kSilu, y);
  }
  synchronize(gpu);
  EXPECT_TRUE(finite(yw.d));
  EXPECT_LE(rel(yw.d, yw.h), verify::tol_for(k.dt)) << "y (and the bytes around its view)";
  EXPECT_EQ(mismatches(pool.d, pool.h), 0u) << "cache pool (written rows are copied inputs; others untouched)";
}

TEST_F(CudaElementwise, ShortConvFwdMatchesCpu) {
  // 8192 tokens: lengths below W - 1, zero, odd lengths crossing the kernel's token tiles.
  const std::vector<int64_t> lens{1, 2, 0, 3, 977, 5, 2049, 1, 0, 4093, 7, 1054};
  ASSERT_EQ(std::accumulate(lens.begin(), lens.end(), int64_t(0)), 8192);
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const std::vector<ConvCase> cases{
        {"T=1", dt, 1, 4096, {}, 1, 0, 0, true},
        {"T=7", dt, 1, 4096, {}, 7, 0, 0, true},
        {"[3, 7] batch", dt, 3, 4096, {}, 7, 0, 0, true},
        {"T=7 no cache", dt, 1, 4096, {}, 7, 0, 0, false},
        {"packed 8192", dt, 1, 4096, lens, 0, 0, 0, true},
        {"packed 8192, qkv slice", dt, 1, 4096, lens, 0, 8192, 0, true},
        {"packed 8192, odd row strides", dt, 1, 4096, lens, 0, 3, 5, true},
        {"packed, C = 300 (not a multiple of 8)", dt, 1, 300, {3, 0, 1, 250, 2}, 0, 0, 0, true},
        {"decode-sized: 32 one-token sequences", dt, 1, 4096, std::vector<int64_t>(32, 1), 0, 0, 0, true},
        // Tiles of 4 tokens (>= ~1056 tokens at C = 4096): batch rows whose tiles cross row starts, a partial
        // channel block (C = 1000: 125 vectors) and one of a single vector (C = 2056), 16-bit taps.
        {"[3, 1499] batch", dt, 3, 4096, {}, 1499, 0, 0, true},
        {"[2, 2051] batch, no cache, odd row strides", dt, 2, 4096, {}, 2051, 3, 5, false},
        {"packed, C = 1000", dt, 1, 1000, {5, 3001, 2, 0, 4990, 1}, 0, 0, 0, true},
        {"packed, C = 2056, bf16 taps", dt, 1, 2056, {2, 6001, 3}, 0, 0, 0, true, DType::bf16},
    };
    for (const ConvCase& k : cases) run_conv_case(k);
  }
}

// Prefill(T) on the GPU equals prefill(T - n) followed by n short_conv_update steps on the GPU, bit for bit (both
// kernels sum the taps in the same order in fp32 and round once).
TEST_F(CudaElementwise, ShortConvPrefillThenDecodeMatchesFullPrefill) {
  const int64_t C = 4096, W = 4, H = W - 1;
  for (DType dt : {DType::f32, DType::bf16}) {
    for (int64_t T : {1, 2, 3, 7, 40, 1500, 4099}) {  // from ~1056 tokens: tiles of 4 tokens
      for (int64_t n : {1, 3}) {
        if (n > T) continue;
        SCOPED_TRACE(std::string(dtype_name(dt)) + " T=" + std::to_string(T) + " n=" + std::to_string(n));
        const Tensor x = copy_to(uniform(dt, {1, T, C}, uint64_t(T * 10 + n)), gpu);
        const Tensor w = copy_to(uniform(DType::f32, {C, 1, W}, 7, -0.6, 0.6), gpu);
        const Tensor cin = copy_to(uniform(dt, {1, C, H}, 9), gpu);
        Tensor y_full(dt, {1, T, C}, gpu), cache_full(dt, {1, C, H}, gpu);
        short_conv_fwd(x, w, cin, cache_full, {}, {}, kSilu, y_full);
        Tensor y_split(dt, {1, T, C}, gpu), cache = copy_to(cin, gpu);
        if (T - n > 0)
          short_conv_fwd(x.view().slice(1, 0, T - n), w, cache, cache, {}, {}, kSilu, y_split.view().slice(1, 0, T - n));
        for (int64_t t = T - n; t < T; ++t) {
          const TensorView xt = x.view().slice(1, t, t + 1), yt = y_split.view().slice(1, t, t + 1);
          short_conv_update(TensorView(xt.data, dt, {1, C}, gpu), w, cache, {}, kSilu, TensorView(yt.data, dt, {1, C}, gpu));
        }
        synchronize(gpu);
        EXPECT_EQ(mismatches(y_full, y_split), 0u);
        EXPECT_EQ(mismatches(cache_full, cache), 0u);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Row-wise kernels

// Each row-wise test runs the op on both backends from the same inputs into outputs with the same initial bytes and
// compares the whole output buffers (the rows' padding included: it must stay untouched). `pad` extra elements per
// row: 0 contiguous and 8 strided (the vectorized row launch), 1 (one warp per row).
struct RowCase {
  std::string name;
  std::vector<int64_t> shape;  // [..., D] of the logical view
};

std::vector<int64_t> padded(std::vector<int64_t> s, int64_t pad) {
  s.back() += pad;
  return s;
}

TensorView logical(const Tensor& t, int64_t d) { return t.view().slice(t.view().ndim - 1, 0, d); }

const std::vector<int64_t> kTokens{8192, 1, 7, 32, 128};

TEST_F(CudaElementwise, NormsMatchCpu) {
  for (int64_t T : kTokens) {
    for (DType dt : {DType::bf16, DType::f32}) {
      for (int64_t pad : {int64_t(0), int64_t(8), int64_t(1)}) {  // vector launch, strided vector launch, per element
        if (pad != 0 && T > 128) continue;  // the padded layouts at decode sizes only (the host reference's time)
        const std::vector<RowCase> cases{{"D=2304", {T, 2304}}, {"D=4096", {T, 4096}}};
        for (const RowCase& k : cases) {
          SCOPED_TRACE(k.name + " T=" + std::to_string(T) + " pad=" + std::to_string(pad) + " " + std::string(dtype_name(dt)));
          const int64_t D = k.shape.back();
          const Pair x(uniform(dt, padded(k.shape, pad), 21)), r(uniform(dt, padded(k.shape, pad), 22));
          const Pair w(uniform(DType::f32, {D}, 23, 0.5, 1.5));
          Pair y(uniform(dt, padded(k.shape, pad), 24)), y2(uniform(dt, padded(k.shape, pad), 25));
          Pair sum(copy_to(x.h, cpu));  // add_rms_norm writes sum over x
          for (Device dev : {cpu, gpu}) {
            rms_norm(logical(x.on(dev), D), w.on(dev), 1e-5f, logical(y.on(dev), D));
            add_rms_norm(logical(sum.on(dev), D), logical(r.on(dev), D), w.on(dev), 1e-6f, logical(sum.on(dev), D),
                         logical(y2.on(dev), D));
          }
          synchronize(gpu);
          EXPECT_LE(rel(y.d, y.h), verify::tol_for(dt)) << "rms_norm";
          EXPECT_LE(rel(sum.d, sum.h), verify::tol_for(dt)) << "add_rms_norm sum";
          EXPECT_LE(rel(y2.d, y2.h), verify::tol_for(dt)) << "add_rms_norm y";
          EXPECT_TRUE(finite(y.d) && finite(y2.d));
        }
      }
    }
  }
}

TEST_F(CudaElementwise, HeadNormsAndGatesMatchCpu) {
  const int64_t Hh = 32, K = 128;
  for (int64_t T : kTokens) {
    for (DType dt : {DType::bf16, DType::f32}) {
      for (int64_t pad : {int64_t(0), int64_t(8), int64_t(1)}) {
        if (pad != 0 && T > 128) continue;
        SCOPED_TRACE("T=" + std::to_string(T) + " pad=" + std::to_string(pad) + " " + std::string(dtype_name(dt)));
        const Pair o(uniform(dt, {T, Hh, K + pad}, 31)), z(uniform(dt, {T, Hh, K + pad}, 32, -4, 4));
        const Pair w(uniform(DType::f32, {K}, 33, 0.5, 1.5));
        const Pair A(uniform(DType::f32, {Hh}, 34, -1, 1)), dtb(uniform(DType::f32, {Hh * K}, 35, -1, 1));
        const Pair b(uniform(dt, {T, Hh + pad}, 36, -4, 4));
        Pair y(uniform(dt, {T, Hh, K + pad}, 37)), y_nz(uniform(dt, {T, Hh, K + pad}, 38));
        Pair l2(uniform(dt, {T, Hh, K + pad}, 39)), g_soft(uniform(DType::f32, {T, Hh, K + pad}, 40));
        Pair g_bound(uniform(DType::f32, {T, Hh, K + pad}, 41)), beta(uniform(DType::f32, {T, Hh + pad}, 42));
        for (Device dev : {cpu, gpu}) {
          const TensorView ov = logical(o.on(dev), K), zv = logical(z.on(dev), K);
          gated_rms_norm(ov, zv, w.on(dev), 1e-5f, logical(y.on(dev), K));
          gated_rms_norm(ov, {}, w.on(dev), 1e-5f, logical(y_nz.on(dev), K));
          l2_norm(ov, logical(l2.on(dev), K), 1e-6f);
          kda_gate(zv, KdaGate{GateForm::softplus, A.on(dev), dtb.on(dev), -5.f}, logical(g_soft.on(dev), K));
          kda_gate(zv, KdaGate{GateForm::bounded, A.on(dev), dtb.on(dev), -5.f}, logical(g_bound.on(dev), K));
          kda_beta(logical(b.on(dev), Hh), logical(beta.on(dev), Hh));
        }
        synchronize(gpu);
        EXPECT_LE(rel(y.d, y.h), verify::tol_for(dt)) << "gated_rms_norm";
        EXPECT_LE(rel(y_nz.d, y_nz.h), verify::tol_for(dt)) << "gated_rms_norm without z";
        EXPECT_LE(rel(l2.d, l2.h), verify::tol_for(dt)) << "l2_norm";
        EXPECT_LE(rel(g_soft.d, g_soft.h), 1e-5) << "kda_gate softplus (f32 g)";
        EXPECT_LE(rel(g_bound.d, g_bound.h), 1e-5) << "kda_gate bounded (f32 g)";
        EXPECT_LE(rel(beta.d, beta.h), 1e-5) << "kda_beta (f32 beta)";
        EXPECT_TRUE(finite(y.d) && finite(l2.d) && finite(g_soft.d) && finite(g_bound.d) && finite(beta.d));
      }
    }
  }
}

// One row per block (D = 8192: 256 threads per row) and a row past the vector launch (D = 40000: one warp per row).
TEST_F(CudaElementwise, WideRowsMatchCpu) {
  for (int64_t D : {8192, 40000}) {
    SCOPED_TRACE("D=" + std::to_string(D));
    const Pair x(uniform(DType::f32, {3, D}, 51)), w(uniform(DType::bf16, {D}, 52, 0.5, 1.5));
    Pair y(uniform(DType::f32, {3, D}, 53)), l2(uniform(DType::bf16, {3, D}, 54));
    for (Device dev : {cpu, gpu}) {
      rms_norm(x.on(dev), w.on(dev), 1e-5f, y.on(dev));
      l2_norm(x.on(dev), l2.on(dev), 1e-6f);
    }
    synchronize(gpu);
    EXPECT_LE(rel(y.d, y.h), verify::tol_for(DType::f32));
    EXPECT_LE(rel(l2.d, l2.h), verify::tol_for(DType::bf16));
  }
}

TEST_F(CudaElementwise, AddIntoMatchesCpuBitForBit) {
  for (int64_t T : {int64_t(8192), int64_t(1), int64_t(32)}) {
    for (int64_t d : {int64_t(2304), int64_t(4096), int64_t(2301)}) {
      for (int64_t pad : {int64_t(0), int64_t(4), int64_t(1)}) {
        SCOPED_TRACE("T=" + std::to_string(T) + " d=" + std::to_string(d) + " pad=" + std::to_string(pad));
        Pair out(uniform(DType::f32, {T, d + pad}, 61));
        const Pair y(uniform(DType::f32, {T, d}, 62));
        for (Device dev : {cpu, gpu}) model::add_into(out.on(dev).view().slice(1, 0, d), y.on(dev), Context{});
        synchronize(gpu);
        EXPECT_EQ(mismatches(out.d, out.h), 0u);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Graph replay at decode widths

TEST_F(CudaElementwise, DecodeWidthsReplayBitIdentically) {
  const int64_t T = 32, Hh = 32, K = 128, D = 2304;
  Tensor o = copy_to(uniform(DType::bf16, {T, Hh, K}, 71), gpu), z = copy_to(uniform(DType::bf16, {T, Hh, K}, 72), gpu);
  Tensor x = copy_to(uniform(DType::bf16, {T, D}, 73), gpu), r = copy_to(uniform(DType::bf16, {T, D}, 74), gpu);
  Tensor b = copy_to(uniform(DType::bf16, {T, Hh}, 75), gpu), acc = copy_to(uniform(DType::f32, {T, D}, 76), gpu);
  const Tensor yadd = copy_to(uniform(DType::f32, {T, D}, 77), gpu);
  const Tensor wk = copy_to(uniform(DType::f32, {K}, 78, 0.5, 1.5), gpu), wd = copy_to(uniform(DType::f32, {D}, 79), gpu);
  const Tensor A = copy_to(uniform(DType::f32, {Hh}, 80, -1, 1), gpu), dtb = copy_to(uniform(DType::f32, {Hh * K}, 81), gpu);
  Tensor gy(DType::bf16, {T, Hh, K}, gpu), l2(DType::bf16, {T, Hh, K}, gpu), g(DType::f32, {T, Hh, K}, gpu);
  Tensor beta(DType::f32, {T, Hh}, gpu), ry(DType::bf16, {T, D}, gpu), sum(DType::bf16, {T, D}, gpu);
  Tensor ay(DType::bf16, {T, D}, gpu);
  const KdaGate gate{GateForm::softplus, A, dtb, -5.f};
  const auto all = [&](const Context& ctx) {
    gated_rms_norm(o, z, wk, 1e-5f, gy, ctx);
    l2_norm(o, l2, 1e-6f, ctx);
    kda_gate(z, gate, g, ctx);
    kda_beta(b, beta, ctx);
    rms_norm(x, wd, 1e-5f, ry, ctx);
    add_rms_norm(x, r, wd, 1e-6f, sum, ay, ctx);
    model::add_into(acc, yadd, ctx);
  };
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Context ctx;
  ctx.cuda_stream = s;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  all(ctx);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);
  for (int rep = 0; rep < 2; ++rep) {
    copy(o.view(), uniform(DType::bf16, {T, Hh, K}, uint64_t(90 + rep)).view());
    copy(x.view(), uniform(DType::bf16, {T, D}, uint64_t(92 + rep)).view());
    copy(b.view(), uniform(DType::bf16, {T, Hh}, uint64_t(94 + rep)).view());
    const Tensor acc0 = copy_to(acc, gpu);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const Tensor c_gy = copy_to(gy, gpu), c_l2 = copy_to(l2, gpu), c_g = copy_to(g, gpu), c_beta = copy_to(beta, gpu);
    const Tensor c_ry = copy_to(ry, gpu), c_sum = copy_to(sum, gpu), c_ay = copy_to(ay, gpu), c_acc = copy_to(acc, gpu);
    copy(acc.view(), acc0.view());
    all(Context{});
    synchronize(gpu);
    EXPECT_EQ(mismatches(c_gy, gy), 0u) << "gated_rms_norm, replay " << rep;
    EXPECT_EQ(mismatches(c_l2, l2), 0u) << "l2_norm, replay " << rep;
    EXPECT_EQ(mismatches(c_g, g), 0u) << "kda_gate, replay " << rep;
    EXPECT_EQ(mismatches(c_beta, beta), 0u) << "kda_beta, replay " << rep;
    EXPECT_EQ(mismatches(c_ry, ry), 0u) << "rms_norm, replay " << rep;
    EXPECT_EQ(mismatches(c_sum, sum), 0u) << "add_rms_norm sum, replay " << rep;
    EXPECT_EQ(mismatches(c_ay, ay), 0u) << "add_rms_norm y, replay " << rep;
    EXPECT_EQ(mismatches(c_acc, acc), 0u) << "add_into, replay " << rep;
  }
  cudaGraphExecDestroy(exec);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace kimi
#endif  // KIMI_WITH_CUDA
