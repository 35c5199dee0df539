// Harness cases for kimi/ops/mla.h against src/verify/oracle/mla.h (explicit fp64 attention).
#include <cmath>
#include <random>

#include "kimi/ops/mla.h"
#include "verify/oracle/mla.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"

namespace kimi::verify {

namespace {
struct Cfg {
  const char* name;
  int64_t H, R, P, Dn, Dv;
  bool gate;
};
// k3-tiny (SPEC 13) with the K3 output gate; Kimi-Linear MLA (H=32 scaled to 8 / 2), no gate.
constexpr Cfg kK3Tiny{"k3-tiny", 4, 64, 16, 32, 32, true};
constexpr Cfg kKimiLinear8{"kimi-linear H=8", 8, 512, 64, 128, 128, false};
constexpr Cfg kKimiLinear2{"kimi-linear H=2", 2, 512, 64, 128, 128, false};
// More heads than one CUDA decode head group (32): a full group and a partial one; odd Dv, R+P not a multiple of 32.
constexpr Cfg kWide{"wide H=36", 36, 64, 13, 16, 24, true};

oracle::MlaSizes sizes(const Cfg& c) { return {c.H, c.R, c.Dn, c.P, c.Dv}; }
double default_scale(const Cfg& c) { return 1.0 / std::sqrt(double(c.Dn + c.P)); }

// Realistic ranges: the latent is RMS-normalized (unit RMS), W_kvb keeps unit variance, gate logits +-4.
void fill_w(Buf& w, std::mt19937_64& rng, int64_t r) {
  const double a = std::sqrt(3.0 / double(r));
  w.uniform(rng, -a, a);
}

using oracle::Vec;
Vec slice(const std::vector<double>& v, int64_t begin, int64_t count) {
  return Vec(v.begin() + begin, v.begin() + begin + count);
}

struct Prefill {
  Cfg cfg;
  int64_t B, T;
  std::vector<int64_t> lens;  // varlen (B = 1, T = sum) when not empty
  int64_t pad;                // strided q / o
};

std::string prefill_str(const Prefill& p) {
  std::string s = std::string(p.cfg.name) + " B=" + std::to_string(p.B) + " T=" + std::to_string(p.T);
  if (!p.lens.empty()) {
    s += " varlen [";
    for (size_t i = 0; i < p.lens.size(); ++i) s += (i ? "," : "") + std::to_string(p.lens[i]);
    s += "]";
  }
  if (p.cfg.gate) s += " gate";
  if (p.pad) s += " strided";
  return s;
}

Result run_prefill(const Prefill& p, DType dt, Scale scale, Device dev) {
  const Cfg& c = p.cfg;
  std::mt19937_64 rng(11 + p.T * 7 + c.R + c.H);
  const int64_t Dq = c.Dn + c.P;
  Buf q(dev, dt, {p.B, p.T, c.H, Dq}, p.pad), lat(dev, dt, {p.B, p.T, c.R}), kpe(dev, dt, {p.B, p.T, c.P});
  Buf w(dev, dt, {c.H * (c.Dn + c.Dv), c.R}), o(dev, dt, {p.B, p.T, c.H, c.Dv}, p.pad);
  Buf gate(dev, dt, {p.B, p.T, c.gate ? c.H * c.Dv : 1});
  Buf cu(Device::cpu(), DType::i32, {int64_t(p.lens.size()) + 1});
  q.uniform(rng, -2, 2);
  lat.uniform(rng, -1.7, 1.7);
  kpe.uniform(rng, -1.5, 1.5);
  fill_w(w, rng, c.R);
  gate.uniform(rng, -4, 4);
  std::vector<int64_t> off{0};
  for (int64_t l : p.lens) off.push_back(off.back() + l);
  cu.set_ints(off);
  const TensorView gv = c.gate ? gate.view() : TensorView{};
  const TensorView cv = p.lens.empty() ? TensorView{} : cu.view();
  const double ms = time_call(scale, dev, [&] { mla_prefill(q, lat, kpe, Weight{w, {}}, gv, cv, std::nullopt, o); });

  // Oracle per sequence on the dtype-rounded inputs.
  const auto qf = q.to_f64(), lf = lat.to_f64(), pf = kpe.to_f64(), wf = w.to_f64(), gf = gate.to_f64();
  std::vector<std::pair<int64_t, int64_t>> seqs;  // (first token over B*T, length)
  if (p.lens.empty())
    for (int64_t b = 0; b < p.B; ++b) seqs.push_back({b * p.T, p.T});
  else
    for (size_t i = 0; i < p.lens.size(); ++i) seqs.push_back({off[i], p.lens[i]});
  std::vector<double> ref(size_t(p.B * p.T * c.H * c.Dv));
  for (auto [m0, len] : seqs) {
    std::vector<int64_t> pos(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) pos[size_t(i)] = i;
    const Vec g = c.gate ? slice(gf, m0 * c.H * c.Dv, len * c.H * c.Dv) : Vec{};
    const Vec y = oracle::mla_attention(slice(qf, m0 * c.H * Dq, len * c.H * Dq), pos, slice(lf, m0 * c.R, len * c.R),
                                        slice(pf, m0 * c.P, len * c.P), len, wf, c.gate ? &g : nullptr, sizes(c),
                                        default_scale(c));
    std::copy(y.begin(), y.end(), ref.begin() + m0 * c.H * c.Dv);
  }
  Compare cmp;
  cmp.output("o", o, ref);
  return cmp.result(ms);
}

struct Decode {
  Cfg cfg;
  int64_t Nc, L;
  std::vector<int64_t> lens, slots;  // slots empty: row n
  int64_t pad = 0;                    // strided cache rows
};

std::string decode_str(const Decode& d) {
  std::string s = std::string(d.cfg.name) + " N=" + std::to_string(d.lens.size()) + " Nc=" + std::to_string(d.Nc) +
                  " L=" + std::to_string(d.L) + " lens [";
  for (size_t i = 0; i < d.lens.size(); ++i) s += (i ? "," : "") + std::to_string(d.lens[i]);
  s += "]";
  if (!d.slots.empty()) s += " slots";
  if (d.cfg.gate) s += " gate";
  if (d.pad) s += " strided";
  return s;
}

Result run_decode(const Decode& d, DType dt, Scale scale, Device dev) {
  const Cfg& c = d.cfg;
  const int64_t N = int64_t(d.lens.size()), Dq = c.Dn + c.P, RP = c.R + c.P;
  std::mt19937_64 rng(23 + d.L * 3 + c.R + N);
  Buf q(dev, dt, {N, c.H, Dq}), cache(dev, dt, {d.Nc, d.L, RP}, d.pad), w(dev, dt, {c.H * (c.Dn + c.Dv), c.R});
  Buf gate(dev, dt, {N, c.gate ? c.H * c.Dv : 1}), o(dev, dt, {N, c.H, c.Dv});
  Buf lens(Device::cpu(), DType::i32, {N}), slots(Device::cpu(), DType::i32, {N});
  q.uniform(rng, -2, 2);
  // Every cache row holds data (rows past lens[n] too): reading them would change the result.
  std::vector<double> cv(size_t(d.Nc * d.L * RP));
  std::uniform_real_distribution<double> lat(-1.7, 1.7), pe(-1.5, 1.5);
  for (size_t i = 0; i < cv.size(); ++i) cv[i] = int64_t(i % size_t(RP)) < c.R ? lat(rng) : pe(rng);
  cache.set(cv);
  fill_w(w, rng, c.R);
  gate.uniform(rng, -4, 4);
  lens.set_ints(d.lens);
  std::vector<int64_t> sl = d.slots;
  if (sl.empty())
    for (int64_t n = 0; n < N; ++n) sl.push_back(n);
  slots.set_ints(sl);
  const TensorView gv = c.gate ? gate.view() : TensorView{};
  const TensorView sv = d.slots.empty() ? TensorView{} : slots.view();
  const double ms =
      time_call(scale, dev, [&] { mla_decode(q, cache, lens, sv, Weight{w, {}}, gv, std::nullopt, o); });

  const auto qf = q.to_f64(), cf = cache.to_f64(), wf = w.to_f64(), gf = gate.to_f64();
  std::vector<double> ref;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t len = d.lens[size_t(n)];
    Vec latent, kpe;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t base = (sl[size_t(n)] * d.L + j) * RP;
      latent.insert(latent.end(), cf.begin() + base, cf.begin() + base + c.R);
      kpe.insert(kpe.end(), cf.begin() + base + c.R, cf.begin() + base + RP);
    }
    const Vec g = c.gate ? slice(gf, n * c.H * c.Dv, c.H * c.Dv) : Vec{};
    const Vec y = oracle::mla_attention(slice(qf, n * c.H * Dq, c.H * Dq), {len - 1}, latent, kpe, len, wf,
                                        c.gate ? &g : nullptr, sizes(c), default_scale(c));
    ref.insert(ref.end(), y.begin(), y.end());
  }
  Compare cmp;
  cmp.output("o", o, ref);
  return cmp.result(ms);
}

Result run_cache_write(DType dt, DType cache_dt, Scale scale, Device dev) {
  const int64_t N = 3, T = 5, R = 64, P = 16, Nc = 4, L = 12, RP = R + P;
  const std::vector<int64_t> start{0, 7, 3}, sl{2, 0, 3};
  std::mt19937_64 rng(31);
  Buf lat(dev, dt, {N, T, R}, 2), kpe(dev, dt, {N, T, P}), cache(dev, cache_dt, {Nc, L, RP}, 1);
  Buf st(Device::cpu(), DType::i32, {N}), slots(Device::cpu(), DType::i32, {N});
  lat.uniform(rng, -1.7, 1.7);
  kpe.uniform(rng, -1.5, 1.5);
  cache.uniform(rng, -9, 9);  // rows not written must keep these values
  st.set_ints(start);
  slots.set_ints(sl);
  auto ref = cache.to_f64();
  const auto lf = lat.to_f64(), pf = kpe.to_f64();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t row = (sl[size_t(n)] * L + start[size_t(n)] + t) * RP;
      for (int64_t e = 0; e < R; ++e) ref[size_t(row + e)] = round_as(cache_dt, lf[size_t((n * T + t) * R + e)]);
      for (int64_t e = 0; e < P; ++e) ref[size_t(row + R + e)] = round_as(cache_dt, pf[size_t((n * T + t) * P + e)]);
    }
  const double ms = time_call(scale, dev, [&] { mla_cache_write(lat, kpe, cache, st, slots); });
  Compare cmp;
  cmp.output("cache", cache, ref);
  return cmp.result(ms);
}
}  // namespace

void add_mla_cases(CaseList& list, Scale scale) {
  std::vector<Prefill> prefills;
  std::vector<Decode> decodes;
  if (scale == Scale::test) {
    prefills = {{kK3Tiny, 2, 17, {}, 0},
                {kK3Tiny, 1, 70, {}, 3},  // more than one query block, strided q / o
                {kK3Tiny, 1, 0, {5, 1, 0, 12, 3}, 0},
                {kKimiLinear2, 1, 20, {}, 0},
                {kK3Tiny, 1, 0, {70, 1, 129}, 0},  // several query and key tiles per sequence (CUDA: 64)
                {kWide, 1, 0, {65, 3}, 2}};
    decodes = {{kK3Tiny, 5, 20, {1, 7, 20}, {4, 0, 2}, 3},
               {kK3Tiny, 2, 9, {9, 3}, {}},
               {kKimiLinear2, 3, 16, {16, 5}, {2, 0}},
               // long rows: many 32-row tiles and several splits per sequence on CUDA, R = 512
               {kKimiLinear2, 3, 1100, {1100, 300}, {2, 0}},
               {kWide, 4, 1100, {1100, 1, 300}, {3, 1, 0}, 5}};
  } else {
    prefills = {{kK3Tiny, 2, 1024, {}, 0}, {kKimiLinear8, 1, 512, {}, 0}, {kKimiLinear8, 1, 0, {300, 137, 75}, 0}};
    decodes = {{kK3Tiny, 8, 1024, {1024, 1, 517, 900, 64, 1000, 3, 800}, {7, 6, 5, 4, 3, 2, 1, 0}},
               {kKimiLinear8, 6, 512, {1, 200, 511, 300}, {5, 0, 3, 1}}};
  }
  for (Prefill& p : prefills)
    if (!p.lens.empty()) {
      p.T = 0;
      for (int64_t l : p.lens) p.T += l;
    }
  for (DType dt : {DType::f32, DType::bf16}) {
    for (const Prefill& p : prefills)
      list.push_back({"mla_prefill", prefill_str(p), dt, tol_for(dt),
                      [=](Device dev) { return run_prefill(p, dt, scale, dev); }});
    for (const Decode& d : decodes)
      list.push_back({"mla_decode", decode_str(d), dt, tol_for(dt),
                      [=](Device dev) { return run_decode(d, dt, scale, dev); }});
    list.push_back({"mla_cache_write", "N=3 T=5 R=64 P=16 Nc=4 L=12 slots strided", dt, tol_for(dt),
                    [=](Device dev) { return run_cache_write(dt, dt, scale, dev); }});
  }
  list.push_back({"mla_cache_write", "N=3 T=5 R=64 P=16 f32 -> bf16 cache", DType::bf16, tol_for(DType::bf16),
                  [=](Device dev) { return run_cache_write(DType::f32, DType::bf16, scale, dev); }});
}

}  // namespace kimi::verify
