// Harness cases for kimi/ops/kda_decode.h: the fused decode step against the fp64 oracles of its parts
// (src/verify/oracle: short_conv, kda, gated_rms_norm) on the dtype-rounded inputs, for a batch of sequences in
// scattered slots of conv-cache and state pools. Outputs compared: y, the whole state pool and the three
// whole conv-cache pools (rows outside the slots must come back unchanged).
// The test cases cover, on every backend: both state layouts, both gate forms, z present and absent, f32 /
// bf16 (and f16) activations, odd N * H, K != V, head dims that are not multiples of 4 (scalar state access)
// and up to 256 (several V tiles in the CUDA kernel), conv widths 1 (no caches), 2, 3, 4, strided activation
// rows, a given scale, slots as a tensor on the tensors' device (the CUDA-graph form, i32), host slots of more
// than 256 sequences (uploaded on CUDA), and absent slots.
#include <cmath>
#include <random>

#include "kimi/ops/kda_decode.h"
#include "verify/oracle/conv.h"
#include "verify/oracle/kda.h"
#include "verify/oracle/norm.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"

namespace kimi::verify {

namespace {

struct DecodeCfg {
  int64_t N, H, K, V, S;
  bool bounded, vk, gated;
  int64_t W = 4;
  bool dev_slots = false;  // slots i32 on the tensors' device, else i64 on the host
  bool no_slots = false;   // slots absent (rows 0 .. N-1)
  int64_t pad = 0;         // row padding of the activations (strided rows)
  float scale = 0.f;       // > 0: given, else the default K^-0.5
  bool f16 = false;        // also an f16 case
};

// [S, H, a, b] <-> [S, H, b, a]
std::vector<double> swap_last2(const std::vector<double>& x, int64_t a, int64_t b) {
  std::vector<double> y(x.size());
  for (size_t m = 0; m < x.size() / size_t(a * b); ++m)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j) y[m * size_t(a * b) + size_t(j * a + i)] = x[m * size_t(a * b) + size_t(i * b + j)];
  return y;
}

Result run_decode(const DecodeCfg& c, DType dt, Scale scale, Device dev, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t N = c.N, H = c.H, K = c.K, V = c.V, S = c.S, P = H * K, Pv = H * V, W = c.W, pad = c.pad;
  Buf xq(dev, dt, {N, P}, pad), xk(dev, dt, {N, P}, pad), xv(dev, dt, {N, Pv}, pad), f(dev, dt, {N, P}, pad);
  Buf b(dev, dt, {N, H}, pad), z(dev, dt, {N, Pv}, pad), y(dev, dt, {N, Pv}, 3);
  Buf wq(dev, DType::f32, {P, 1, W}), wk(dev, DType::f32, {P, 1, W}), wv(dev, DType::f32, {Pv, 1, W});
  // W = 1: no cache; the caches' shape [S, C, 0] stands in for the oracle and the comparison
  Buf cq(dev, DType::f32, {S, P, W - 1}), ck(dev, DType::f32, {S, P, W - 1}), cv(dev, DType::f32, {S, Pv, W - 1});
  Buf A_log(dev, DType::f32, {H}), dt_bias(dev, DType::f32, {P}), o_norm(dev, DType::f32, {V});
  Buf state(dev, DType::f32, c.vk ? std::vector<int64_t>{S, H, V, K} : std::vector<int64_t>{S, H, K, V});
  for (Buf* t : {&xq, &xk, &xv, &z, &cq, &ck, &cv, &state}) t->uniform(rng, -1, 1);
  for (Buf* t : {&wq, &wk, &wv}) t->uniform(rng, -0.5, 0.5);
  f.uniform(rng, -8, 8), b.uniform(rng, -4, 4), A_log.uniform(rng, -2, 1), dt_bias.uniform(rng, -8, 8);
  o_norm.uniform(rng, 0.5, 1.5);
  // slots: the sequences in reverse order over every other pool row (S >= 2N - 1; absent: rows 0 .. N-1)
  Buf slots(c.dev_slots ? dev : Device::cpu(), c.dev_slots ? DType::i32 : DType::i64, {N});
  std::vector<int64_t> sl(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) sl[size_t(n)] = c.no_slots ? n : (S - 1 - 2 * n) % S;
  slots.set_ints(sl);

  // oracle: gather the slot rows, run the parts, scatter back into copies of the pools
  const std::vector<double> st0 = c.vk ? swap_last2(state.to_f64(), V, K) : state.to_f64();  // kv layout
  std::vector<double> pool_q = cq.to_f64(), pool_k = ck.to_f64(), pool_v = cv.to_f64(), pool_s = st0;
  auto conv = [&](const Buf& x, const Buf& w, std::vector<double>& pool, int64_t C) {
    std::vector<double> rows(size_t(N * C * (W - 1)));
    for (int64_t n = 0; n < N; ++n)
      std::copy_n(pool.begin() + sl[size_t(n)] * C * (W - 1), C * (W - 1), rows.begin() + n * C * (W - 1));
    const oracle::ConvResult r =
        oracle::short_conv(x.to_f64(), std::vector<int64_t>(size_t(N), 1), C, w.to_f64(), W, &rows, true);
    for (int64_t n = 0; n < N; ++n)
      std::copy_n(r.cache.begin() + n * C * (W - 1), C * (W - 1), pool.begin() + sl[size_t(n)] * C * (W - 1));
    return r.y;
  };
  oracle::KdaProblem p;
  p.B = N, p.T = 1, p.H = H, p.K = K, p.V = V;
  p.q = conv(xq, wq, pool_q, P), p.k = conv(xk, wk, pool_k, P), p.v = conv(xv, wv, pool_v, Pv);
  p.g = f.to_f64(), p.beta = b.to_f64();
  p.use_gate = true, p.bounded = c.bounded, p.A_log = A_log.to_f64(), p.dt_bias = dt_bias.to_f64();
  p.beta_sigmoid = p.l2norm = true;
  if (c.scale > 0.f) p.scale = c.scale;
  p.h0.resize(size_t(N * H * K * V));
  for (int64_t n = 0; n < N; ++n)
    std::copy_n(st0.begin() + sl[size_t(n)] * H * K * V, H * K * V, p.h0.begin() + n * H * K * V);
  const oracle::KdaResult r = oracle::kda(p);
  for (int64_t n = 0; n < N; ++n)
    std::copy_n(r.ht.begin() + n * H * K * V, H * K * V, pool_s.begin() + sl[size_t(n)] * H * K * V);
  const std::vector<double> zv = z.to_f64();
  const std::vector<double> yref = oracle::gated_rms_norm(r.o, c.gated ? &zv : nullptr, o_norm.to_f64(), N * H, V, 1e-5);

  KdaDecodeArgs a;
  a.x_q = xq, a.x_k = xk, a.x_v = xv, a.conv_q = wq, a.conv_k = wk, a.conv_v = wv;
  if (W > 1) a.cache_q = cq, a.cache_k = ck, a.cache_v = cv;
  a.f = f, a.b = b;
  a.gate = KdaGate{c.bounded ? GateForm::bounded : GateForm::softplus, A_log, dt_bias, -5.f};
  if (c.gated) a.z = z;
  a.o_norm = o_norm, a.norm_eps = 1e-5f, a.state = state, a.y = y;
  if (!c.no_slots) a.slots = slots;
  if (c.scale > 0.f) a.scale = c.scale;
  a.state_layout = c.vk ? StateLayout::vk : StateLayout::kv;
  // The step updates the pools in place: one timed call (no warm-up repeats), the one compared.
  const double ms = time_call(Scale::test, dev, [&] { kda_decode_step(a); });
  Compare cmp;
  cmp.output("y", y, yref);
  cmp.output("state", state, c.vk ? swap_last2(pool_s, K, V) : pool_s);
  if (W > 1) {
    cmp.output("cache_q", cq, pool_q);
    cmp.output("cache_k", ck, pool_k);
    cmp.output("cache_v", cv, pool_v);
  }
  (void)scale;
  return cmp.result(ms);
}

}  // namespace

void add_kda_decode_cases(CaseList& list, Scale scale) {
  std::vector<DecodeCfg> cfgs;
  if (scale == Scale::test) {
    //      N    H    K    V    S  bounded vk    gated  W  dev_slots no_slots pad scale f16
    cfgs = {{3, 2, 16, 8, 7, true, false, true},
            {2, 3, 24, 16, 4, false, true, true},
            {4, 2, 128, 128, 9, false, false, false},
            {3, 3, 64, 128, 8, true, true, true, 4, true, false, 0, 0.f, true},      // K != V, device slots
            {5, 3, 128, 64, 11, true, false, false, 3, true, false, 2, 0.1f},       // odd N*H, strided, scale
            {3, 5, 20, 10, 6, false, false, true, 2},                               // V % 4 != 0: scalar kv
            {2, 3, 10, 20, 5, true, true, false, 1},                                // K % 4 != 0: scalar vk, W = 1
            {2, 2, 200, 256, 3, true, false, true, 4, true},                        // kv: 2 V tiles, K > 128
            {2, 2, 256, 200, 3, false, true, true, 4, false, true},                 // vk: K = 256, V tail, no slots
            {260, 1, 8, 12, 600, true, false, true, 4, false, false, 1},            // > 256 host slots
            // kv, a partial last V tile on the 16-byte path (lanes past V must not touch the next row: a
            // defect seen once on the H200); the second with device slots scattered over a larger pool
            {3, 4, 64, 32, 6, true, false, true},
            {3, 4, 64, 32, 9, true, false, true, 4, true},
            // the CUDA bulk path (state through shared memory, K V <= 16384 with the row length a multiple of 4):
            // kv row groups past K (K = 36: 8 row groups of 8 rows, 4 of them partly or wholly past K), columns past
            // V (V = 44 of 64); vk a partial K slot and V tail; K > 128 on both layouts (token rows up to 256, vk
            // two K slots per lane); the largest block (64 KB, device slots)
            {3, 3, 36, 44, 7, true, false, true, 4, true},
            {3, 3, 44, 36, 7, false, true, true, 4, true},
            {2, 3, 200, 64, 5, true, false, true, 4, false},
            {2, 3, 160, 96, 5, false, true, true, 4, true},
            {3, 2, 128, 128, 5, true, true, true, 4, true},
            // kv with V above 128 (K V <= 16384): the streaming kernel's widest column tiling (CW = 256, 8 column
            // tiles of 32, 2 row blocks), columns past V (200 of 256) and a row block partly past K (48 of 64)
            {2, 3, 48, 200, 5, false, false, true, 4, true},
            // conv widths above 4 (the streaming bulk kernels' WM = 8 instances; W <= 4 takes WM = 4)
            {2, 3, 32, 64, 5, true, false, true, 6},
            {2, 3, 64, 32, 5, false, true, true, 8, true}};
  } else {
    cfgs = {{8, 96, 128, 128, 17, true, true, true},    // K3 layer, V-first state pool
            {32, 32, 128, 128, 64, false, false, true},  // Kimi-Linear layer, batch 32
            {7, 5, 64, 128, 16, true, false, false, 4, true}};  // K != V, device slots, no output gate
  }
  uint64_t seed = 500;
  for (const DecodeCfg& c : cfgs) {
    std::vector<DType> dts = {DType::f32, DType::bf16};
    if (c.f16) dts.push_back(DType::f16);
    for (DType dt : dts) {
      const std::string shape = "N=" + std::to_string(c.N) + " H=" + std::to_string(c.H) + " K=" + std::to_string(c.K) +
                                " V=" + std::to_string(c.V) + " pool=" + std::to_string(c.S) +
                                (c.bounded ? " bounded" : " softplus") + (c.vk ? " vk" : " kv") + (c.gated ? " gated" : "") +
                                " W=" + std::to_string(c.W) + (c.dev_slots ? " device-slots" : "") +
                                (c.no_slots ? " no-slots" : "") + (c.pad ? " strided" : "") +
                                (c.scale > 0.f ? " scale=" + std::to_string(c.scale) : "");
      const uint64_t sd = seed++;
      list.push_back({"kda_decode_step", shape, dt, tol_for(dt), [=](Device dev) { return run_decode(c, dt, scale, dev, sd); }});
    }
  }
}

}  // namespace kimi::verify
