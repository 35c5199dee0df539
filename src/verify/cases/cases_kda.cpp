// Harness cases for kimi/ops/kda.h against src/verify/oracle/kda.h.
//
// Inputs in realistic ranges (FlashKDA's sweep): q, k, v ~ U(-1, 1) (q, k L2-normalized in the kernel,
// or on the host when the kernel does not), raw gate f ~ U(-8, 8), dt_bias ~ U(-8, 8), A_log ~ U(-2, 1),
// beta logits ~ U(-4, 4), initial state ~ U(-1, 1). The oracle runs on the dtype-rounded inputs.
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>

#include "kimi/ops/kda.h"
#include "verify/oracle/kda.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"

#include "cuda/kda/options.h"

namespace kimi::verify {

namespace {
enum class Gate { none, softplus, bounded };

struct Cfg {
  int64_t B, T, H, K, V;
  std::vector<int64_t> lens;  // varlen lengths (then B = 1, T = sum)
  Gate gate = Gate::none;
  bool beta_sigmoid = false, l2 = false, h0 = false, vk = false;
  bool qkv_slice = false;  // q, k, v are slices of one [B, T, 3, H, K] tensor (needs K == V)
  int64_t o_pad = 0;       // o as a strided view
  float scale = 0.f;       // 0: default
  int chunk = 64;
  bool alias = false;  // final_state aliases initial_state (one call per case: Scale::test only)
  // CUDA chunk kernels: segments of seg chunks (sequence parallelism, src/cuda/kda/chunk.cuh) forced for the
  // call, 0 = automatic; unset: not a segment case (the default, automatic, applies).
  std::optional<int64_t> seg = std::nullopt;
};

std::string cfg_str(const Cfg& c) {
  std::string s = "B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " H=" + std::to_string(c.H) +
                  " K=" + std::to_string(c.K) + " V=" + std::to_string(c.V);
  if (!c.lens.empty()) {
    s += " varlen[";
    for (size_t i = 0; i < c.lens.size(); ++i) s += (i ? "," : "") + std::to_string(c.lens[i]);
    s += "]";
  }
  s += c.gate == Gate::softplus ? " gate=softplus" : c.gate == Gate::bounded ? " gate=bounded" : "";
  if (c.beta_sigmoid) s += " beta-sigmoid";
  if (c.l2) s += " l2";
  if (c.h0) s += " h0";
  if (c.alias) s += " alias";
  s += c.vk ? " vk" : " kv";
  if (c.qkv_slice) s += " qkv-slice";
  if (c.o_pad) s += " o-strided";
  if (c.scale != 0.f) s += " scale";
  if (c.chunk != 64) s += " C=" + std::to_string(c.chunk);
  if (c.seg) s += " seg=" + (*c.seg == 0 ? std::string("auto") : std::to_string(*c.seg));
  return s;
}

std::vector<double> uniform(std::mt19937_64& rng, size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> x(n);
  for (double& v : x) v = u(rng);
  return x;
}

// Rows of d values scaled to unit L2 norm (what the kernel would do; used when it does not).
void unit_rows(std::vector<double>& x, int64_t d) {
  for (size_t r = 0; r < x.size() / size_t(d); ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += x[r * size_t(d) + size_t(i)] * x[r * size_t(d) + size_t(i)];
    for (int64_t i = 0; i < d; ++i) x[r * size_t(d) + size_t(i)] /= std::sqrt(ss);
  }
}

// [N, H, a, b] <-> [N, H, b, a]
std::vector<double> swap_last(const std::vector<double>& x, int64_t a, int64_t b) {
  std::vector<double> y(x.size());
  for (size_t m = 0; m < x.size() / size_t(a * b); ++m)
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        y[m * size_t(a * b) + size_t(j * a + i)] = x[m * size_t(a * b) + size_t(i * b + j)];
  return y;
}

Result run_kda(const Cfg& c, bool chunk, DType dt, Scale scale, Device dev, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t B = c.B, T = c.T, H = c.H, K = c.K, V = c.V;
  const int64_t N = c.lens.empty() ? B : int64_t(c.lens.size());
  const size_t nk = size_t(B * T * H * K), nv = size_t(B * T * H * V);
  oracle::KdaProblem p;
  p.B = B, p.T = T, p.H = H, p.K = K, p.V = V;
  p.l2norm = c.l2;
  p.beta_sigmoid = c.beta_sigmoid;
  p.scale = c.scale;

  // q, k, v
  std::optional<Buf> qkv, qb, kb, vb;
  TensorView q, k, v;
  if (c.qkv_slice) {
    qkv.emplace(dev, dt, std::vector<int64_t>{B, T, 3, H, K});
    qkv->uniform(rng, -1, 1);
    const TensorView w = qkv->view();
    const std::array<int64_t, 4> shp{B, T, H, K}, str{w.strides[0], w.strides[1], w.strides[3], w.strides[4]};
    for (int part = 0; part < 3; ++part) {
      TensorView x(static_cast<char*>(w.data) + part * w.strides[2] * int64_t(w.element_size()), dt, shp, str,
                   dev);
      (part == 0 ? q : part == 1 ? k : v) = x;
    }
    const std::vector<double> all = qkv->to_f64();
    p.q.resize(nk), p.k.resize(nk), p.v.resize(nv);
    for (int64_t bt = 0; bt < B * T; ++bt)
      for (int64_t e = 0; e < H * K; ++e) {
        p.q[size_t(bt * H * K + e)] = all[size_t((bt * 3 + 0) * H * K + e)];
        p.k[size_t(bt * H * K + e)] = all[size_t((bt * 3 + 1) * H * K + e)];
        p.v[size_t(bt * H * K + e)] = all[size_t((bt * 3 + 2) * H * K + e)];
      }
  } else {
    std::vector<double> qs = uniform(rng, nk, -1, 1), ks = uniform(rng, nk, -1, 1),
                        vs = uniform(rng, nv, -1, 1);
    if (!c.l2) unit_rows(ks, K);
    qb.emplace(dev, dt, std::vector<int64_t>{B, T, H, K});
    kb.emplace(dev, dt, std::vector<int64_t>{B, T, H, K});
    vb.emplace(dev, dt, std::vector<int64_t>{B, T, H, V});
    qb->set(qs), kb->set(ks), vb->set(vs);
    q = *qb, k = *kb, v = *vb;
    p.q = qb->to_f64(), p.k = kb->to_f64(), p.v = vb->to_f64();
  }

  // gate: raw f (fused) or precomputed log decay (f32)
  Buf A_log(dev, DType::f32, {H}), dt_bias(dev, DType::f32, {H, K});
  A_log.uniform(rng, -2, 1);
  dt_bias.uniform(rng, -8, 8);
  p.A_log = A_log.to_f64(), p.dt_bias = dt_bias.to_f64();
  const std::vector<double> f = uniform(rng, nk, -8, 8);
  Buf g(dev, c.gate == Gate::none ? DType::f32 : dt, {B, T, H, K});
  std::optional<KdaGate> gate;
  if (c.gate == Gate::none) {
    g.set(oracle::kda_gate(f, H, K, false, p.A_log, p.dt_bias, -5.0));
  } else {
    g.set(f);
    p.use_gate = true;
    p.bounded = c.gate == Gate::bounded;
    gate = KdaGate{c.gate == Gate::bounded ? GateForm::bounded : GateForm::softplus, A_log, dt_bias, -5.f};
  }
  p.g = g.to_f64();

  // beta: logits, or sigmoid of them
  Buf beta(dev, dt, {B, T, H});
  std::vector<double> bl = uniform(rng, size_t(B * T * H), -4, 4);
  if (!c.beta_sigmoid)
    for (double& x : bl) x = 1.0 / (1.0 + std::exp(-x));
  beta.set(bl);
  p.beta = beta.to_f64();

  // states, varlen offsets, output
  const std::vector<int64_t> st = c.vk ? std::vector<int64_t>{N, H, V, K} : std::vector<int64_t>{N, H, K, V};
  Buf h0(dev, DType::f32, st), ht(dev, DType::f32, st);
  if (c.h0) {
    h0.uniform(rng, -1, 1);
    p.h0 = c.vk ? swap_last(h0.to_f64(), V, K) : h0.to_f64();
  }
  Buf cu(Device::cpu(), DType::i32, {N + 1});
  if (!c.lens.empty()) {
    std::vector<int64_t> off{0};
    for (int64_t l : c.lens) off.push_back(off.back() + l);
    cu.set_ints(off);
    p.cu = off;
  }
  Buf o(dev, dt, {B, T, H, V}, c.o_pad);

  KdaArgs a;
  a.q = q, a.k = k, a.v = v, a.g = g, a.beta = beta, a.o = o;
  a.gate = gate;
  a.beta_sigmoid_in_kernel = c.beta_sigmoid;
  a.qk_l2norm_in_kernel = c.l2;
  if (c.scale != 0.f) a.scale = c.scale;
  if (c.h0) a.initial_state = h0;
  a.final_state = c.alias ? h0 : ht;
  a.state_layout = c.vk ? StateLayout::vk : StateLayout::kv;
  if (!c.lens.empty()) a.cu_seqlens = cu;

  // The CUDA chunk launcher's segment length for this call only (no effect on other backends); the caller's
  // options of this thread (e.g. a test's KdaLaunchRecord) stay in force.
  std::optional<cuda::ScopedKdaLaunchOptions> seg_force;
  if (chunk && c.seg && *c.seg > 0 && dev.type == DeviceType::cuda) {
    cuda::KdaLaunchOptions o = cuda::kda_launch_options(nullptr);
    o.segment_chunks = *c.seg;
    seg_force.emplace(o);
  }
  const double ms = time_call(scale, dev, [&] {
    if (chunk)
      kda_chunk_fwd(a, c.chunk);
    else
      kda_recurrent_fwd(a);
  });
  const oracle::KdaResult ref = oracle::kda(p);
  Compare cmp;
  cmp.output("o", o, ref.o);
  cmp.output("final_state", c.alias ? h0 : ht, c.vk ? swap_last(ref.ht, K, V) : ref.ht);
  Result r = cmp.result(ms);
  r.guards_ok = r.guards_ok && h0.guards_ok() && (!qkv || qkv->guards_ok());
  {  // both errors, whichever is the worst (tests/test_kda_seqpar.cpp prints them)
    char e[96];
    std::snprintf(e, sizeof e, " (o %.3g, final_state %.3g)", rel_err(o.to_f64(), ref.o),
                  rel_err((c.alias ? h0 : ht).to_f64(), c.vk ? swap_last(ref.ht, K, V) : ref.ht));
    r.detail += e;
  }
  return r;
}

std::string gate_str(int64_t rows, int64_t H, int64_t K, bool bounded, bool flat_bias, int64_t pad) {
  return "rows=" + std::to_string(rows) + " H=" + std::to_string(H) + " K=" + std::to_string(K) +
         (bounded ? " bounded" : " softplus") + (flat_bias ? " dt_bias[H*K]" : " dt_bias[H,K]") +
         (pad ? " strided" : "");
}
}  // namespace

void add_kda_cases(CaseList& list, Scale scale) {
  // kda_gate and kda_beta
  struct GateShape {
    int64_t rows, H, K, pad;
  };
  std::vector<GateShape> gs = scale == Scale::test
                                  ? std::vector<GateShape>{{7, 3, 16, 0}, {5, 2, 129, 3}}
                                  : std::vector<GateShape>{{2048, 32, 128, 0}, {512, 96, 128, 0}};
  for (const GateShape& s : gs) {
    for (bool bounded : {false, true}) {
      for (DType dt : {DType::f32, DType::bf16}) {
        const bool flat = bounded;
        list.push_back(
            {"kda_gate", gate_str(s.rows, s.H, s.K, bounded, flat, s.pad), dt, tol_for(DType::f32),
             [=](Device dev) {
               std::mt19937_64 rng(11 + s.rows * 7 + s.K + (bounded ? 1 : 0));
               Buf f(dev, dt, {s.rows, s.H, s.K}, s.pad), g(dev, DType::f32, {s.rows, s.H, s.K}, s.pad);
               Buf A_log(dev, DType::f32, {s.H});
               Buf dt_bias(dev, DType::f32,
                           flat ? std::vector<int64_t>{s.H * s.K} : std::vector<int64_t>{s.H, s.K});
               f.uniform(rng, -8, 8);
               A_log.uniform(rng, -2, 1);
               dt_bias.uniform(rng, -8, 8);
               const KdaGate gate{bounded ? GateForm::bounded : GateForm::softplus, A_log, dt_bias, -5.f};
               const double ms = time_call(scale, dev, [&] { kda_gate(f, gate, g); });
               Compare cmp;
               cmp.output(
                   "g", g,
                   oracle::kda_gate(f.to_f64(), s.H, s.K, bounded, A_log.to_f64(), dt_bias.to_f64(), -5.0));
               return cmp.result(ms);
             }});
      }
    }
  }
  // kda_beta: beta = sigmoid(b) against the fp64 sigmoid; b [shape] with row padding pad_b, beta in out_dt with pad_beta.
  auto beta_case = [&](const std::string& name, std::vector<int64_t> shape, int64_t pad_b, DType dt, DType out_dt,
                       int64_t pad_beta, uint64_t seed) {
    list.push_back({"kda_beta", name, dt, tol_for(out_dt), [=](Device dev) {
                      std::mt19937_64 rng(seed);
                      Buf b(dev, dt, shape, pad_b), beta(dev, out_dt, shape, pad_beta);
                      b.uniform(rng, -8, 8);
                      const double ms = time_call(scale, dev, [&] { kda_beta(b, beta); });
                      std::vector<double> ref = b.to_f64();
                      for (double& x : ref) x = 1.0 / (1.0 + std::exp(-x));
                      Compare cmp;
                      cmp.output("beta", beta, ref);
                      return cmp.result(ms);
                    }});
  };
  if (scale == Scale::test)
    for (DType dt : {DType::f32, DType::bf16}) beta_case("B=3 T=4 H=37 strided out=f32", {3, 4, 37}, 3, dt, DType::f32, 1, 22);
  for (DType dt : {DType::f32, DType::bf16}) {
    const int64_t rows = scale == Scale::test ? 13 : 8192, H = scale == Scale::test ? 5 : 32;
    beta_case("rows=" + std::to_string(rows) + " H=" + std::to_string(H), {rows, H}, 0, dt, dt, 0, uint64_t(21 + rows));
  }

  // recurrent and chunkwise forward
  std::vector<Cfg> cfgs;
  if (scale == Scale::test) {
    cfgs.push_back({2, 17, 2, 16, 16, {}});
    Cfg c2{1, 38, 2, 32, 24, {13, 0, 20, 5}};
    c2.gate = Gate::softplus, c2.beta_sigmoid = c2.l2 = c2.h0 = true;
    cfgs.push_back(c2);
    Cfg c3{2, 37, 3, 24, 16, {}};
    c3.gate = Gate::bounded, c3.beta_sigmoid = c3.l2 = c3.h0 = c3.vk = true, c3.o_pad = 5, c3.chunk = 16;
    cfgs.push_back(c3);
    Cfg c4{1, 70, 2, 32, 32, {}};
    c4.gate = Gate::softplus, c4.beta_sigmoid = c4.l2 = c4.h0 = c4.vk = c4.qkv_slice = true, c4.scale = 0.3f;
    cfgs.push_back(c4);
    Cfg c5{2, 0, 2, 8, 8, {}};
    c5.gate = Gate::softplus, c5.h0 = true;
    cfgs.push_back(c5);
    // Decode (T = 1): the one-token CUDA kernels, full 16-byte tiles and ragged edges, both layouts,
    // both tile shapes (9 * 8 * 4 CTAs >= 2 per SM: BV = 32; 2 * 3 * 4: BV = 16).
    Cfg d1{9, 1, 8, 128, 128, {}};
    d1.gate = Gate::bounded, d1.beta_sigmoid = d1.l2 = d1.h0 = true;
    cfgs.push_back(d1);
    Cfg d2 = d1;
    d2.vk = true, d2.gate = Gate::softplus;
    cfgs.push_back(d2);
    Cfg d3{2, 1, 3, 128, 128, {}};
    d3.gate = Gate::softplus, d3.beta_sigmoid = d3.l2 = d3.h0 = true, d3.o_pad = 3;
    cfgs.push_back(d3);
    d3.alias = true;  // the same case with final_state aliasing initial_state, kv layout
    cfgs.push_back(d3);
    Cfg d4 = d3;
    d4.vk = true, d4.gate = Gate::bounded;
    cfgs.push_back(d4);
    Cfg d5{3, 1, 2, 40, 38, {}};  // ragged K and V; kv rows of 38: scalar state accesses
    d5.gate = Gate::bounded, d5.l2 = d5.h0 = true, d5.scale = 0.3f;
    cfgs.push_back(d5);
    Cfg d6 = d5;
    d6.vk = true;  // vk rows of 40: 16-byte accesses, ragged V
    cfgs.push_back(d6);
    Cfg d6s = d5;
    d6s.vk = true, d6s.K = 42;  // vk rows of 42: scalar
    cfgs.push_back(d6s);
    Cfg d7{2, 1, 2, 200, 72, {}};  // K > 128
    d7.gate = Gate::softplus, d7.beta_sigmoid = d7.l2 = d7.h0 = true;
    cfgs.push_back(d7);
    Cfg d8 = d7;
    d8.vk = true;
    cfgs.push_back(d8);
    Cfg d9{2, 1, 2, 32, 32, {}};  // no initial state, no gate, q, k, v slices of one tensor
    d9.qkv_slice = d9.vk = true;
    cfgs.push_back(d9);
    // kv tilings of the streaming one-token kernels (recurrent_stream.cuh: CW = 32 with KMAX 128 and no initial state
    // (zero-filled block), CW = 256, KMAX 256 with CW = 64)
    Cfg d10{3, 1, 2, 32, 32, {}};
    d10.gate = Gate::bounded, d10.beta_sigmoid = d10.l2 = true;
    cfgs.push_back(d10);
    Cfg d11{2, 1, 2, 64, 256, {}};
    d11.gate = Gate::softplus, d11.beta_sigmoid = d11.l2 = d11.h0 = true;
    cfgs.push_back(d11);
    Cfg d12{2, 1, 2, 200, 64, {}};
    d12.gate = Gate::bounded, d12.beta_sigmoid = d12.l2 = d12.h0 = true;
    cfgs.push_back(d12);
    // Prefill on the CUDA tensor-core chunk kernels (bf16 inputs at K = V in {64, 128}; f32 inputs run the
    // recurrent kernel there): several chunks with ragged tails, both head sizes, both gate forms (bounded:
    // tensor-core diagonal blocks; softplus and a given g: per-pair diagonal blocks), varlen with empty and
    // one-token sequences, strided o, q / k / v slices of one tensor, aliased states.
    Cfg p1{2, 150, 2, 128, 128, {}};
    p1.gate = Gate::bounded, p1.beta_sigmoid = p1.l2 = p1.h0 = p1.vk = true;
    cfgs.push_back(p1);
    Cfg p2{1, 201, 3, 64, 64, {70, 0, 130, 1}};
    p2.gate = Gate::softplus, p2.beta_sigmoid = p2.l2 = p2.h0 = true, p2.o_pad = 3;
    cfgs.push_back(p2);
    Cfg p3{1, 130, 2, 128, 128, {}};
    p3.gate = Gate::softplus, p3.beta_sigmoid = p3.l2 = p3.h0 = p3.vk = p3.qkv_slice = true, p3.scale = 0.3f;
    cfgs.push_back(p3);
    Cfg p4{1, 64, 2, 64, 64, {}};  // a given g, k normalized on the host, zero initial state
    cfgs.push_back(p4);
    Cfg p5{1, 65, 4, 64, 64, {}};
    p5.gate = Gate::bounded, p5.beta_sigmoid = p5.l2 = p5.h0 = p5.alias = true;
    cfgs.push_back(p5);
  } else {
    Cfg a{1, 1024, 8, 128, 128, {}};  // Kimi-Linear heads (H scaled)
    a.gate = Gate::softplus, a.beta_sigmoid = a.l2 = a.h0 = true;
    cfgs.push_back(a);
    Cfg b{1, 256, 32, 128, 128, {}};  // K3 gate
    b.gate = Gate::bounded, b.beta_sigmoid = b.l2 = b.h0 = b.vk = b.qkv_slice = true;
    cfgs.push_back(b);
    Cfg c{1, 1024, 8, 128, 128, {300, 147, 448, 129}};  // SPEC 13 varlen lengths scaled down
    c.gate = Gate::softplus, c.beta_sigmoid = c.l2 = c.h0 = true;
    cfgs.push_back(c);
  }
  // Sequence parallelism of the CUDA chunk walk, forced at small scale (seg = chunks per segment; on the CPU
  // these are ordinary chunk cases): several segments with a ragged last chunk, varlen with short, long and
  // empty sequences, initial state present and absent, final_state aliasing initial_state, both gates, both
  // layouts, K = V = 64 and 128; and 1 x 8192 H2, where the automatic choice takes segments (test_kda_seqpar.cpp
  // checks that). bf16 only (f32 inputs run the recurrent kernel on CUDA).
  std::vector<Cfg> seg_cfgs;
  if (scale == Scale::test) {
    Cfg s1{1, 7 * 64 + 13, 2, 128, 128, {}};  // 8 chunks, segments of 2: two middle maps, ragged last chunk
    s1.gate = Gate::bounded, s1.beta_sigmoid = s1.l2 = s1.h0 = true, s1.seg = 2;
    seg_cfgs.push_back(s1);
    Cfg s2{1, 1000, 2, 64, 64, {100, 900}};  // one short (1 segment) and one long sequence (15 chunks, 5 segments)
    s2.gate = Gate::softplus, s2.beta_sigmoid = s2.l2 = s2.h0 = s2.vk = true, s2.seg = 3;
    seg_cfgs.push_back(s2);
    Cfg s3{2, 300, 3, 64, 64, {}};  // no initial state, every chunk a segment
    s3.gate = Gate::bounded, s3.beta_sigmoid = s3.l2 = s3.vk = true, s3.seg = 1;
    seg_cfgs.push_back(s3);
    Cfg s4{1, 333, 2, 128, 128, {}};  // final_state aliases initial_state, kv
    s4.gate = Gate::softplus, s4.beta_sigmoid = s4.l2 = s4.h0 = s4.alias = true, s4.seg = 2;
    seg_cfgs.push_back(s4);
    Cfg s5 = s4;
    s5.vk = true, s5.gate = Gate::bounded;  // ... and vk
    seg_cfgs.push_back(s5);
    Cfg s6{1, 694, 2, 128, 128, {0, 500, 64, 130}};  // empty, long, one-chunk and two-chunk sequences
    s6.gate = Gate::bounded, s6.beta_sigmoid = s6.l2 = s6.h0 = s6.vk = true, s6.o_pad = 3, s6.seg = 2;
    seg_cfgs.push_back(s6);
    Cfg s7{1, 8192, 2, 128, 128, {}};  // the automatic choice
    s7.gate = Gate::bounded, s7.beta_sigmoid = s7.l2 = s7.h0 = s7.vk = s7.alias = true, s7.seg = 0;
    seg_cfgs.push_back(s7);
  }
  uint64_t seg_seed = 1100;
  for (const Cfg& c : seg_cfgs) {
    const uint64_t sd = seg_seed++;
    list.push_back({"kda_chunk_fwd", cfg_str(c), DType::bf16, tol_for(DType::bf16),
                    [=](Device dev) { return run_kda(c, true, DType::bf16, scale, dev, sd); }});
  }
  uint64_t seed = 100;
  for (const Cfg& c : cfgs) {
    for (bool chunk : {false, true}) {
      for (DType dt : {DType::f32, DType::bf16}) {
        const uint64_t sd = seed++;
        list.push_back({chunk ? "kda_chunk_fwd" : "kda_recurrent_fwd", cfg_str(c), dt, tol_for(dt),
                        [=](Device dev) { return run_kda(c, chunk, dt, scale, dev, sd); }});
      }
    }
  }
}

}  // namespace kimi::verify
