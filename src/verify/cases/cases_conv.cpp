// Harness cases for kimi/ops/conv.h against src/verify/oracle/conv.h.
#include <algorithm>
#include <numeric>
#include <optional>
#include <random>

#include "kimi/ops/conv.h"
#include "verify/oracle/conv.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"

namespace kimi::verify {

namespace {
using Vec = std::vector<double>;

struct FwdShape {
  int64_t B, T, C, W;
  std::vector<int64_t> lens;  // non-empty: packed [1, total, C] with cu_seqlens
  bool cache_in, cache_out, alias;  // alias: cache_out is the cache_in view (in place)
  bool cache_f32;                   // cache stored in f32 (else in x's dtype)
  int64_t pad;                      // row padding of x (y gets pad + 1): strided views
  bool silu;
  bool w3;  // checkpoint weight [C, 1, W] in f32 (else [C, W] in x's dtype)
  int64_t pool = 0;  // > 0: the caches are pools of this many rows, sequence n at a shuffled cache_slots[n]
};

struct UpdShape {
  int64_t N, Nc, C, W;
  bool slots, cache_f32;
  int64_t pad;
  bool silu;
};

std::string fwd_str(const FwdShape& s) {
  std::string r;
  if (s.lens.empty()) {
    r = "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T);
  } else {
    r = "varlen [";
    for (size_t i = 0; i < s.lens.size(); ++i) r += (i ? "," : "") + std::to_string(s.lens[i]);
    r += "]";
  }
  r += " C=" + std::to_string(s.C) + " W=" + std::to_string(s.W);
  if (s.cache_in) r += " cache_in";
  if (s.cache_out) r += s.alias ? " cache_out=cache_in" : " cache_out";
  if (s.cache_f32) r += "(f32)";
  if (s.pad) r += " strided";
  if (!s.silu) r += " act=none";
  r += s.w3 ? " w[C,1,W]" : " w[C,W]";
  if (s.pool) r += " slots into " + std::to_string(s.pool);
  return r;
}

std::string upd_str(const UpdShape& s) {
  return "N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " W=" + std::to_string(s.W) +
         (s.slots ? " slots into " + std::to_string(s.Nc) : std::string()) + (s.cache_f32 ? " cache f32" : "") +
         (s.pad ? " strided" : "") + (s.silu ? "" : " act=none");
}

Vec rounded(DType t, Vec v) {
  for (double& e : v) e = round_as(t, e);
  return v;
}

Result run_fwd(const FwdShape& s, DType dt, Scale scale, Device dev) {
  std::mt19937_64 rng(11 + uint64_t(s.C) * 7 + uint64_t(s.T) * 131 + uint64_t(s.W) + s.lens.size());
  const bool varlen = !s.lens.empty();
  std::vector<int64_t> lens = s.lens;
  if (!varlen) lens.assign(size_t(s.B), s.T);
  const int64_t total = std::accumulate(lens.begin(), lens.end(), int64_t(0));
  const int64_t B = varlen ? 1 : s.B, T = varlen ? total : s.T, N = int64_t(lens.size()), H = s.W - 1;
  const DType cdt = s.cache_f32 ? DType::f32 : dt;

  Buf x(dev, dt, {B, T, s.C}, s.pad), y(dev, dt, {B, T, s.C}, s.pad ? s.pad + 1 : 0);
  Buf w = s.w3 ? Buf(dev, DType::f32, {s.C, 1, s.W}) : Buf(dev, dt, {s.C, s.W});
  x.uniform(rng, -2, 2);
  w.uniform(rng, -0.6, 0.6);
  std::optional<Buf> cu, cin, cout;
  if (varlen) {
    cu.emplace(Device::cpu(), DType::i32, std::vector<int64_t>{N + 1});
    std::vector<int64_t> off(1, 0);
    for (int64_t l : lens) off.push_back(off.back() + l);
    cu->set_ints(off);
  }
  const int64_t rows = s.pool ? s.pool : N;
  if (s.cache_in) cin.emplace(dev, cdt, std::vector<int64_t>{rows, s.C, H}).uniform(rng, -2, 2);
  if (s.cache_out && !s.alias) cout.emplace(dev, cdt, std::vector<int64_t>{rows, s.C, H}).uniform(rng, -2, 2);
  // slots: sequence n at row slot[n] of the pools (a shuffled subset), else row n
  std::vector<int64_t> slot(static_cast<size_t>(rows));
  std::iota(slot.begin(), slot.end(), int64_t(0));
  std::optional<Buf> slots;
  if (s.pool) {
    std::shuffle(slot.begin(), slot.end(), rng);
    slots.emplace(Device::cpu(), DType::i64, std::vector<int64_t>{N});
    slots->set_ints(std::vector<int64_t>(slot.begin(), slot.begin() + N));
  }
  slot.resize(size_t(N));
  const Vec pool_in = cin ? cin->to_f64() : Vec(), pool_out0 = cout ? cout->to_f64() : Vec();
  Vec cin0;  // the sequences' rows of cache_in, in sequence order
  for (int64_t n = 0; cin && n < N; ++n)
    cin0.insert(cin0.end(), pool_in.begin() + slot[size_t(n)] * s.C * H, pool_in.begin() + (slot[size_t(n)] + 1) * s.C * H);
  const Buf* cache_out = s.alias ? &*cin : cout ? &*cout : nullptr;
  const ConvActivation act = s.silu ? ConvActivation::silu : ConvActivation::none;
  auto call = [&](TensorView cache_out_view) {
    short_conv_fwd(x, w, cin ? cin->view() : TensorView{}, cache_out_view, cu ? cu->view() : TensorView{},
                   slots ? slots->view() : TensorView{}, act, y);
  };
  double ms = 0;
  if (s.alias && scale == Scale::check) {  // in place: time on a scratch output, then run once for real
    Buf scratch(dev, cdt, {rows, s.C, H});
    ms = time_call(scale, dev, [&] { call(scratch); });
    call(cache_out->view());
  } else {
    ms = time_call(s.alias ? Scale::test : scale, dev, [&] { call(cache_out ? cache_out->view() : TensorView{}); });
  }

  const oracle::ConvResult ref =
      oracle::short_conv(x.to_f64(), lens, s.C, w.to_f64(), s.W, cin ? &cin0 : nullptr, s.silu);
  Compare cmp;
  cmp.output("y", y, ref.y);
  if (cache_out) {  // the slots' rows hold the new caches, every other row is unchanged
    Vec want = s.alias ? pool_in : pool_out0;
    const Vec got = rounded(cdt, ref.cache);
    for (int64_t n = 0; n < N; ++n)
      std::copy(got.begin() + n * s.C * H, got.begin() + (n + 1) * s.C * H, want.begin() + slot[size_t(n)] * s.C * H);
    cmp.output("cache_out", *cache_out, want);
  }
  return cmp.result(ms);
}

Result run_update(const UpdShape& s, DType dt, Scale scale, Device dev) {
  std::mt19937_64 rng(23 + uint64_t(s.C) * 7 + uint64_t(s.N) * 131 + uint64_t(s.W));
  const int64_t H = s.W - 1, Nc = s.slots ? s.Nc : s.N;
  const DType cdt = s.cache_f32 ? DType::f32 : dt;
  Buf x(dev, dt, {s.N, s.C}, s.pad), y(dev, dt, {s.N, s.C}), w(dev, DType::f32, {s.C, 1, s.W});
  Buf cache(dev, cdt, {Nc, s.C, H});
  x.uniform(rng, -2, 2);
  w.uniform(rng, -0.6, 0.6);
  cache.uniform(rng, -2, 2);
  std::vector<int64_t> rows(static_cast<size_t>(Nc));
  std::iota(rows.begin(), rows.end(), int64_t(0));
  std::optional<Buf> slots;
  if (s.slots) {
    std::shuffle(rows.begin(), rows.end(), rng);
    rows.resize(size_t(s.N));
    slots.emplace(Device::cpu(), DType::i32, std::vector<int64_t>{s.N});
    slots->set_ints(rows);
  }
  const Vec cache0 = cache.to_f64();
  const ConvActivation act = s.silu ? ConvActivation::silu : ConvActivation::none;
  const TensorView sv = slots ? slots->view() : TensorView{};
  double ms = 0;
  if (scale == Scale::check) {  // the cache is updated in place: time on a scratch copy
    Buf scratch(dev, cdt, {Nc, s.C, H});
    scratch.set(cache0);
    ms = time_call(scale, dev, [&] { short_conv_update(x, w, scratch, sv, act, y); });
  }
  const double ms1 = time_call(Scale::test, dev, [&] { short_conv_update(x, w, cache, sv, act, y); });
  if (scale != Scale::check) ms = ms1;

  // Oracle: each row is a one-token sequence whose cache is its slot's row.
  Vec gathered(size_t(s.N * s.C * H));
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t i = 0; i < s.C * H; ++i) gathered[size_t(n * s.C * H + i)] = cache0[size_t(rows[size_t(n)] * s.C * H + i)];
  const oracle::ConvResult ref = oracle::short_conv(x.to_f64(), std::vector<int64_t>(size_t(s.N), 1), s.C, w.to_f64(),
                                                    s.W, &gathered, s.silu);
  Vec want_cache = cache0;  // rows without a slot stay as they were
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t i = 0; i < s.C * H; ++i)
      want_cache[size_t(rows[size_t(n)] * s.C * H + i)] = round_as(cdt, ref.cache[size_t(n * s.C * H + i)]);
  Compare cmp;
  cmp.output("y", y, ref.y);
  cmp.output("cache", cache, want_cache);
  return cmp.result(ms);
}
}  // namespace

void add_conv_cases(CaseList& list, Scale scale) {
  std::vector<FwdShape> fwd;
  std::vector<UpdShape> upd;
  if (scale == Scale::test) {
    fwd = {
        {2, 17, 33, 4, {}, false, true, false, false, 5, true, true},
        {1, 1, 7, 4, {}, true, true, false, false, 0, true, false},  // T < W-1: shifts into the old cache
        {3, 2, 65, 4, {}, true, true, true, true, 3, true, true},
        {1, 0, 19, 4, {5, 0, 1, 2, 13, 3}, true, true, false, false, 2, true, true},
        {1, 0, 300, 4, {0, 4, 1}, false, true, false, true, 0, true, false},  // zero-length, no cache_in: zeros
        {2, 9, 31, 2, {}, true, true, false, false, 1, false, false},
        {1, 11, 20, 3, {}, true, true, true, false, 0, true, true},
        {1, 0, 21, 3, {2, 1, 7}, true, true, true, true, 0, false, true},
        {1, 64, 256, 4, {}, false, false, false, false, 0, true, true},
        {1, 5, 9, 8, {}, true, true, false, false, 0, true, false},
        // longer than the CPU's 128-token chunks: chunk histories come from x
        {2, 300, 24, 4, {}, true, true, true, false, 2, true, true},
        {1, 0, 40, 4, {130, 0, 257, 2}, true, true, false, false, 0, true, false},
        // cache pools indexed by cache_slots (serving slots): in place and separate, with a zero-length sequence
        {1, 0, 24, 4, {7, 1, 0, 30}, true, true, true, false, 0, true, true, 9},
        {2, 5, 16, 3, {}, true, true, false, false, 1, true, false, 5},
    };
    upd = {
        {5, 8, 37, 4, true, false, 3, true},
        {3, 3, 64, 4, false, true, 0, true},
        {4, 4, 17, 2, false, false, 1, false},
        {2, 9, 300, 3, true, false, 0, true},
    };
  } else {
    // Kimi-Linear q/k/v conv: 32 heads x 128 = 4096 channels, W = 4.
    fwd = {
        {2, 512, 4096, 4, {}, false, true, false, false, 0, true, true},
        {1, 0, 4096, 4, {300, 1, 547, 171, 2}, true, true, true, false, 0, true, true},
    };
    upd = {{64, 96, 4096, 4, true, false, 0, true}};
  }
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    if (scale == Scale::check && dt == DType::f16) continue;
    for (const FwdShape& s : fwd)
      list.push_back({"short_conv_fwd", fwd_str(s), dt, tol_for(dt),
                      [=](Device dev) { return run_fwd(s, dt, scale, dev); }});
    for (const UpdShape& s : upd)
      list.push_back({"short_conv_update", upd_str(s), dt, tol_for(dt),
                      [=](Device dev) { return run_update(s, dt, scale, dev); }});
  }
}

}  // namespace kimi::verify
