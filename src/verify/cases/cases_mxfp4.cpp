// Harness cases for kimi/ops/mxfp4.h against the fp64 decode and reference quantizer of
// src/verify/oracle/mxfp4.h. Both operators are exact: tolerance 0.
#include <cmath>
#include <random>

#include "kimi/ops/mxfp4.h"
#include "verify/oracle/mxfp4.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"

namespace kimi::verify {

namespace {
struct Shape {
  int64_t o, i;
  int64_t pad;  // row padding of every tensor (strided views) when > 0
};

std::string shape_str(const Shape& s) {
  return "O=" + std::to_string(s.o) + " I=" + std::to_string(s.i) + (s.pad ? " strided" : "");
}

std::vector<double> as_f64(const std::vector<int>& v) { return {v.begin(), v.end()}; }

// Random packed codes and scales in 120..134: every value is exact in f32, bf16 and f16, so the
// dequantized tensor must equal the fp64 decode bit for bit.
Result run_dequant(const Shape& s, DType dt, Scale scale, Device dev) {
  std::mt19937_64 rng(11 + s.o * 977 + s.i);
  Buf packed(dev, DType::u8, {s.o, s.i / 2}, s.pad), sc(dev, DType::u8, {s.o, s.i / 32}, s.pad);
  Buf w(dev, dt, {s.o, s.i}, s.pad);
  std::uniform_int_distribution<int64_t> byte(0, 255), expo(120, 134);
  std::vector<int64_t> pv(static_cast<size_t>(s.o * s.i / 2)), sv(static_cast<size_t>(s.o * s.i / 32));
  for (auto& v : pv) v = byte(rng);
  for (auto& v : sv) v = expo(rng);
  packed.set_ints(pv);
  sc.set_ints(sv);
  const double ms = time_call(scale, dev, [&] { mxfp4_dequant(packed, sc, w); });
  const std::vector<uint8_t> pb(pv.begin(), pv.end());
  Compare cmp;
  cmp.output("w", w, oracle::mxfp4_decode(oracle::unpack_codes(pb, s.o, s.i), std::vector<int>(sv.begin(), sv.end()),
                                          s.o, s.i));
  return cmp.result(ms);
}

// Weights built to exercise every rounding decision: blocks of random magnitude 2^-12..2^12 (and
// 2^-130 for f32, which clamps the scale to e = 0), all-zero blocks, and "grid" blocks whose values
// are exact E2M1 magnitudes, midpoints (ties) and out-of-range values at a known scale.
std::vector<float> make_weights(std::mt19937_64& rng, const Shape& s, DType dt) {
  std::vector<float> w(static_cast<size_t>(s.o * s.i));
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<int> kind(0, 9), ex(-12, 12), pick(0, 16), sgn(0, 1);
  const double grid[17] = {0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 7.75};
  for (int64_t b = 0; b < s.o * s.i / 32; ++b) {
    float* v = w.data() + b * 32;
    const int k = kind(rng);
    const int e = ex(rng);
    if (k == 0) {
      for (int j = 0; j < 32; ++j) v[j] = 0.f;
    } else if (k <= 4) {  // grid block: amax = 4 or 6 (times 2^e) fixes the scale at 2^e
      for (int j = 0; j < 32; ++j) v[j] = float((sgn(rng) ? -1 : 1) * std::ldexp(grid[pick(rng)], e));
      v[k % 32] = float(std::ldexp(k % 2 ? 6.0 : 4.0, e));
      // (7 and 7.75 keep floor(log2(amax)) = e + 2 too: they test saturation at 6.)
    } else if (k == 5 && dt == DType::f32) {  // tiny block: e clamps to 0
      for (int j = 0; j < 32; ++j) v[j] = float(u(rng) * std::ldexp(1.0, -128));
    } else {
      for (int j = 0; j < 32; ++j) v[j] = float(u(rng) * std::ldexp(1.0, e));
    }
  }
  return w;
}

Result run_quant(const Shape& s, DType dt, Scale scale, Device dev) {
  std::mt19937_64 rng(13 + s.o * 977 + s.i);
  Buf w(dev, dt, {s.o, s.i}, s.pad), packed(dev, DType::u8, {s.o, s.i / 2}, s.pad);
  Buf sc(dev, DType::u8, {s.o, s.i / 32}, s.pad);
  w.set(make_weights(rng, s, dt));
  const double ms = time_call(scale, dev, [&] { mxfp4_quant(w, packed, sc); });
  const std::vector<double> wv = w.to_f64();  // as stored (rounded to dt)
  std::vector<int> codes, scales;
  oracle::mxfp4_encode(wv, s.o, s.i, codes, scales);
  const std::vector<uint8_t> pref = oracle::pack_codes(codes, s.o, s.i);
  Compare cmp;
  cmp.output("packed", packed, std::vector<double>(pref.begin(), pref.end()));
  cmp.output("scale", sc, as_f64(scales));
  Result r = cmp.result(ms);
  // The format's bound (docs/ops/mxfp4.md): |dequant(quant(w)) - w| <= max(amax(block), 2^-126) / 4
  // (the 2^-126 term covers blocks below 2^-125 whose scale is clamped at e = 0).
  const auto gp = packed.to_ints(), gs = sc.to_ints();
  const std::vector<uint8_t> gpb(gp.begin(), gp.end());
  const std::vector<double> dq =
      oracle::mxfp4_decode(oracle::unpack_codes(gpb, s.o, s.i), std::vector<int>(gs.begin(), gs.end()), s.o, s.i);
  double worst = 0;  // max over blocks of max|err| / bound
  for (int64_t b = 0; b < s.o * s.i / 32; ++b) {
    double amax = 0, e = 0;
    for (int64_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(wv[size_t(b * 32 + j)]));
    for (int64_t j = 0; j < 32; ++j) e = std::max(e, std::fabs(dq[size_t(b * 32 + j)] - wv[size_t(b * 32 + j)]));
    worst = std::max(worst, e / (std::max(amax, std::ldexp(1.0, -126)) / 4));
  }
  r.detail += " max err / bound = " + std::to_string(worst);
  if (!(worst <= 1.0)) r.err = std::max(r.err, worst);  // a broken bound fails the case
  return r;
}
}  // namespace

void add_mxfp4_cases(CaseList& list, Scale scale) {
  std::vector<Shape> shapes;
  if (scale == Scale::test) {
    shapes = {{1, 32, 0}, {3, 64, 0}, {5, 96, 3}, {17, 256, 0}, {2, 2304, 1}};
  } else {  // Kimi-Linear experts (w1/w3 [1024, 2304], w2 [2304, 1024]) and a K3 latent expert [3072, 3584]
    shapes = {{1024, 2304, 0}, {2304, 1024, 0}, {3072, 3584, 0}};
  }
  for (const Shape& s : shapes) {
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      if (scale == Scale::check && dt == DType::f16) continue;
      list.push_back({"mxfp4_dequant", shape_str(s), dt, 0.0, [=](Device dev) { return run_dequant(s, dt, scale, dev); }});
      list.push_back({"mxfp4_quant", shape_str(s), dt, 0.0, [=](Device dev) { return run_quant(s, dt, scale, dev); }});
    }
  }
}

}  // namespace kimi::verify
