// sample_tokens (kimi/ops/sample.h): the definition on the host (greedy ties, the draw, top-k / top-p sets exactly,
// the sampled distribution against the softmax by a chi-square bound), bad input named, and in CUDA builds the
// CUDA kernel against the CPU one (the same tokens on every row), and its capture in a CUDA graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "expect_error.h"
#include "kimi/device.h"
#include "kimi/dtype.h"
#include "kimi/ops/sample.h"
#include "tensor_testutil.h"

#ifdef KIMI_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace kimi {
namespace {

// One row's parameters.
struct Row {
  float temperature = 0.f;
  int32_t top_k = 0;
  float top_p = 1.f;
  uint64_t seed = 0, sequence = 0, step = 0;
};

// The parameter tensors of a batch of rows, on the host.
struct Params {
  Tensor temperature, top_k, top_p, seed, sequence, step;
  explicit Params(const std::vector<Row>& rows)
      : temperature(DType::f32, {int64_t(rows.size())}),
        top_k(DType::i32, {int64_t(rows.size())}),
        top_p(DType::f32, {int64_t(rows.size())}),
        seed(DType::i64, {int64_t(rows.size())}),
        sequence(DType::i64, {int64_t(rows.size())}),
        step(DType::i64, {int64_t(rows.size())}) {
    for (size_t i = 0; i < rows.size(); ++i) {
      temperature.data_as<float>()[i] = rows[i].temperature;
      top_k.data_as<int32_t>()[i] = rows[i].top_k;
      top_p.data_as<float>()[i] = rows[i].top_p;
      seed.data_as<int64_t>()[i] = int64_t(rows[i].seed);
      sequence.data_as<int64_t>()[i] = int64_t(rows[i].sequence);
      step.data_as<int64_t>()[i] = int64_t(rows[i].step);
    }
  }
  SampleParams views() const { return {temperature, top_k, top_p, seed, sequence, step}; }
};

Tensor logits_of(const std::vector<std::vector<float>>& rows, DType dt = DType::f32) {
  const int64_t V = int64_t(rows[0].size());
  Tensor t(dt, {int64_t(rows.size()), V});
  for (size_t n = 0; n < rows.size(); ++n)
    for (int64_t i = 0; i < V; ++i) store_from_f32(t.data(), dt, int64_t(n) * V + i, rows[n][size_t(i)]);
  return t;
}

std::vector<int32_t> sample(const Tensor& logits, const std::vector<Row>& rows) {
  const Params p(rows);
  Tensor out(DType::i32, {int64_t(rows.size())});
  sample_tokens(logits, p.views(), out);
  return {out.data_as<int32_t>(), out.data_as<int32_t>() + rows.size()};
}

// Draws of one row over steps 0..n-1: row r of the batch is the row with step r.
std::vector<int32_t> draws(const std::vector<float>& x, Row r, int n) {
  std::vector<std::vector<float>> xs(size_t(n), x);
  std::vector<Row> rows(size_t(n), r);
  for (int i = 0; i < n; ++i) rows[size_t(i)].step = uint64_t(i);
  return sample(logits_of(xs), rows);
}

// SplitMix64 as kimi/ops/sample.h states it, written here from the header.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t g(uint64_t s, uint64_t i) { return mix64(s + (i + 1) * 0x9E3779B97F4A7C15ull); }

TEST(Sample, GreedyIsTheLowestArgmax) {
  const Tensor l = logits_of({{0.5f, 2.f, 2.f, -1.f, 1.9f}, {-0.f, 0.f, -1.f, -INFINITY, 0.f},
                               {-INFINITY, -3.f, -3.f, -5.f, -4.f}});
  // top_k / top_p / the draw do not matter at temperature 0
  EXPECT_EQ(sample(l, {{0.f}, {0.f, 1, 0.1f, 7}, {0.f, 3, 1.f, 9, 9, 9}}), (std::vector<int32_t>{1, 0, 1}));
  const Tensor b = logits_of({{0.5f, 2.f, 2.f, -1.f, 1.9f}}, DType::bf16);
  EXPECT_EQ(sample(b, {{0.f}}), (std::vector<int32_t>{1}));
}

TEST(Sample, TheDrawIsTheCounterOfTheHeader) {
  // Two equal logits weigh 2^40 each: t = floor(h * 2^41 / 2^64) = h >> 23 is below 2^40 (token 0) iff h < 2^63.
  const uint64_t seed = 0x1234567890abcdefull, seq = 5;
  const std::vector<int32_t> got = draws({1.f, 1.f}, {1.f, 0, 1.f, seed, seq, 0}, 200);
  int ones = 0;
  for (int s = 0; s < 200; ++s) {
    const uint64_t h = g(g(mix64(seed), seq), uint64_t(s));
    ASSERT_EQ(got[size_t(s)], int32_t(h >> 63)) << "step " << s;
    ones += got[size_t(s)];
  }
  EXPECT_GT(ones, 70);
  EXPECT_LT(ones, 130);
  // A row's token depends on its own (seed, sequence, step) only: alone or in a batch, at any position.
  const std::vector<float> x = {0.1f, 0.7f, -0.4f, 0.3f, 0.3f, 1.2f};
  const Row a{1.3f, 0, 1.f, 11, 3, 8}, b{0.7f, 4, 0.8f, 12, 0, 2};
  const std::vector<int32_t> batch = sample(logits_of({x, x, x}), {b, a, b});
  EXPECT_EQ(sample(logits_of({x}), {a})[0], batch[1]);
  EXPECT_EQ(batch[0], batch[2]);
}

// The softmax of x / T over the top_k / top_p set computed plainly in fp64 (sorting by probability, ties by id).
std::map<int32_t, double> nucleus(const std::vector<float>& x, float T, int k, float p) {
  std::vector<int32_t> ids(x.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return x[size_t(a)] > x[size_t(b)]; });
  if (k > 0 && size_t(k) < ids.size()) ids.resize(size_t(k));
  const double m = x[size_t(ids[0])];
  double z = 0;
  for (int32_t i : ids) z += std::exp((x[size_t(i)] - m) / T);
  std::map<int32_t, double> kept;
  double mass = 0, total = 0;
  for (int32_t i : ids) {
    const double w = std::exp((x[size_t(i)] - m) / T);
    if (w > 0) kept[i] = w, total += w, mass += w / z;  // -inf: masked
    if (p < 1.f && mass >= p) break;
  }
  for (auto& [i, w] : kept) w /= total;
  return kept;
}

// Pearson's chi-square of the counts against the probabilities (every token of `want` has an expected count >= 5).
double chi_square(const std::vector<int32_t>& got, const std::map<int32_t, double>& want) {
  std::map<int32_t, int> count;
  for (int32_t t : got) ++count[t];
  double chi = 0;
  for (const auto& [i, p] : want) {
    const double e = p * double(got.size()), d = count[i] - e;
    chi += d * d / e;
  }
  return chi;
}

TEST(Sample, DrawsFollowTheSoftmaxOfTheKeptSet) {
  // 9 tokens with a tie (ids 2 and 6) and a masked one; 40,000 draws per setting. The chi-square bounds are the
  // 0.999 quantiles for the degrees of freedom (kept tokens - 1); the draws are deterministic (counter-based), so
  // the statistic is a fixed number that must sit below its bound.
  const std::vector<float> x = {0.2f, 1.5f, 0.9f, -0.7f, 1.1f, -INFINITY, 0.9f, -0.2f, 0.4f};
  struct Setting {
    float T;
    int k;
    float p;
    size_t kept;
    double bound;  // chi-square 0.999 quantile at kept - 1 degrees of freedom
  };
  for (const Setting s : {Setting{1.f, 0, 1.f, 8, 24.32}, Setting{0.6f, 0, 1.f, 8, 24.32}, Setting{2.f, 4, 1.f, 4, 16.27},
                          Setting{1.f, 0, 0.8f, 5, 18.47}, Setting{1.5f, 6, 0.9f, 6, 20.52}}) {
    const std::map<int32_t, double> want = nucleus(x, s.T, s.k, s.p);
    ASSERT_EQ(want.size(), s.kept) << "T " << s.T << " k " << s.k << " p " << s.p;
    const std::vector<int32_t> got = draws(x, {s.T, s.k, s.p, 99, 1, 0}, 40000);
    for (int32_t t : got) ASSERT_TRUE(want.count(t)) << "token " << t << " outside the kept set";  // exact sets
    for (const auto& [i, p] : want) ASSERT_GT(std::count(got.begin(), got.end(), i), 0) << "token " << i << " never drawn";
    EXPECT_LT(chi_square(got, want), s.bound) << "T " << s.T << " k " << s.k << " p " << s.p;
  }
}

TEST(Sample, TopKAndTopPKeepExactlyTheirSets) {
  const std::vector<float> x = {0.5f, 2.f, 2.f, -1.f, 1.9f};
  for (int32_t t : draws(x, {1.f, 1, 1.f, 1}, 100)) ASSERT_EQ(t, 1);      // top-1 = greedy
  for (int32_t t : draws(x, {1.f, 0, 1e-6f, 1}, 100)) ASSERT_EQ(t, 1);    // a tiny nucleus = greedy
  std::set<int32_t> seen;
  for (int32_t t : draws(x, {1.f, 3, 1.f, 1}, 300)) seen.insert(t);
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2, 4}));  // top-3
  seen.clear();
  for (int32_t t : draws(x, {1.f, 2, 1.f, 1}, 300)) seen.insert(t);
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2}));  // top-2 among the tie 1.9 < 2 = 2
  // The nucleus boundary: probabilities 0.4, 0.3, 0.2, 0.1 (logits ln p). top_p = 0.7 keeps exactly two tokens
  // (0.4 + 0.3 reaches it), 0.71 three.
  const std::vector<float> q = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  seen.clear();
  for (int32_t t : draws(q, {1.f, 0, 0.69f, 1}, 300)) seen.insert(t);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
  seen.clear();
  for (int32_t t : draws(q, {1.f, 0, 0.71f, 1}, 300)) seen.insert(t);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1, 2}));
  // A tie at the top-k boundary keeps the lower ids: ten equal logits, top_k 4.
  seen.clear();
  for (int32_t t : draws(std::vector<float>(10, 0.25f), {1.f, 4, 1.f, 3}, 400)) seen.insert(t);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1, 2, 3}));
  // ... and at the nucleus boundary: five equal logits, top_p 0.5 needs three of them (0.6 >= 0.5).
  seen.clear();
  for (int32_t t : draws(std::vector<float>(5, -2.f), {1.f, 0, 0.5f, 3}, 400)) seen.insert(t);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1, 2}));
}

TEST(Sample, RejectsBadArguments) {
  const Tensor l = logits_of({{0.5f, 2.f, 2.f}, {0.f, 1.f, 2.f}});
  const std::vector<Row> ok = {{1.f}, {0.f}};
  EXPECT_NO_THROW(sample(l, ok));
  EXPECT_KIMI_ERROR(sample(l, {{1.f}, {-1.f}}), "sample_tokens: argument 'temperature': expected a finite value >= 0 "
                                                "(0 = greedy), got -1 in row 1");
  EXPECT_KIMI_ERROR(sample(l, {{INFINITY}, {1.f}}), "'temperature'", "got inf in row 0");
  EXPECT_KIMI_ERROR(sample(l, {{1.f, -2}, {1.f}}),
                    "sample_tokens: argument 'top_k': expected a value >= 0 (0 = all tokens), got -2 in row 0");
  EXPECT_KIMI_ERROR(sample(l, {{1.f}, {1.f, 0, 0.f}}),
                    "sample_tokens: argument 'top_p': expected a value in (0, 1], got 0 in row 1");
  EXPECT_KIMI_ERROR(sample(l, {{1.f}, {1.f, 0, 1.5f}}), "'top_p'", "got 1.5 in row 1");
  EXPECT_KIMI_ERROR(sample(l, {{1.f}, {1.f, 0, NAN}}), "'top_p'", "got nan in row 1");
  EXPECT_KIMI_ERROR(sample(logits_of({{0.f, NAN}}), {{0.f}}),
                    "sample_tokens: argument 'logits': expected no NaN, got NaN in row 0 at index 1");
  EXPECT_KIMI_ERROR(sample(logits_of({{0.f, INFINITY, 1.f}}), {{1.f}}),
                    "sample_tokens: argument 'logits': expected a finite maximum in every row (-inf masks a token), "
                    "got +inf in row 0");
  EXPECT_KIMI_ERROR(sample(logits_of({{0.f, 1.f}, {-INFINITY, -INFINITY}}), {{0.f}, {0.f}}), "'logits'",
                    "got every logit -inf in row 1");
  // shapes, dtypes, devices
  const Params p(ok);
  SampleParams v = p.views();
  Tensor out(DType::i32, {2}), out3(DType::i32, {3}), out64(DType::i64, {2});
  EXPECT_KIMI_ERROR(sample_tokens(l, v, out3), "sample_tokens", "'tokens'", "[2]", "[3]");
  EXPECT_KIMI_ERROR(sample_tokens(l, v, out64), "sample_tokens", "'tokens'", "i32", "i64");
  EXPECT_KIMI_ERROR(sample_tokens(Tensor(DType::f16, {2, 3}), v, out), "sample_tokens", "'logits'", "f32/bf16", "f16");
  EXPECT_KIMI_ERROR(sample_tokens(Tensor(DType::f32, {2, 0}), v, out), "sample_tokens", "'logits'",
                    "1 to 2^24 - 1 tokens", "got 0");
  EXPECT_KIMI_ERROR(sample_tokens(l.view().transpose(0, 1), v, out3), "sample_tokens", "'logits'", "stride 1");
  Tensor k64(DType::i64, {2});
  SampleParams bad = v;
  bad.top_k = k64;
  EXPECT_KIMI_ERROR(sample_tokens(l, bad, out), "sample_tokens", "'top_k'", "i32", "i64");
  bad = v;
  bad.seed = TensorView();
  EXPECT_KIMI_ERROR(sample_tokens(l, bad, out), "sample_tokens", "'seed'", "a tensor");
  bad = v;
  bad.step = Tensor(DType::i64, {3});
  EXPECT_KIMI_ERROR(sample_tokens(l, bad, out), "sample_tokens", "'step'", "[2]", "[3]");
  bad = v;
  bad.temperature.device = Device::cuda(0);
  EXPECT_KIMI_ERROR(sample_tokens(l, bad, out), "sample_tokens", "'temperature'", "device cpu", "cuda:0");
  EXPECT_KIMI_ERROR(sample_tokens(l, v, p.top_k), "sample_tokens", "'tokens'", "disjoint from 'top_k'");
}

#ifdef KIMI_WITH_CUDA

using testutil::copy_to;

#define REQUIRE_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (these run on the GPU machine)"

// The parameters of a batch on the GPU.
struct GpuParams {
  Tensor temperature, top_k, top_p, seed, sequence, step;
  explicit GpuParams(const Params& p)
      : temperature(copy_to(p.temperature, Device::cuda(0))),
        top_k(copy_to(p.top_k, Device::cuda(0))),
        top_p(copy_to(p.top_p, Device::cuda(0))),
        seed(copy_to(p.seed, Device::cuda(0))),
        sequence(copy_to(p.sequence, Device::cuda(0))),
        step(copy_to(p.step, Device::cuda(0))) {}
  SampleParams views() const { return {temperature, top_k, top_p, seed, sequence, step}; }
};

std::vector<int32_t> sample_gpu(const Tensor& logits, const std::vector<Row>& rows, const Context& ctx = {}) {
  const GpuParams p{Params(rows)};
  const Tensor l = copy_to(logits, Device::cuda(0));
  Tensor out(DType::i32, {int64_t(rows.size())}, Device::cuda(0));
  sample_tokens(l, p.views(), out, ctx);
  const Tensor h = copy_to(out, Device::cpu());
  return {h.data_as<int32_t>(), h.data_as<int32_t>() + rows.size()};
}

// Random rows of one vocabulary size: logits N(0, scale) (quantized to 1/8 in some rows, for ties; -inf masks in
// others), parameters over the settings a server uses.
void random_rows(int64_t n, int64_t V, uint64_t seed, std::vector<std::vector<float>>& x, std::vector<Row>& rows) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const float temps[] = {0.f, 0.3f, 0.7f, 1.f, 1.f, 1.5f};
  const int ks[] = {0, 0, 1, 5, 50, 1000};
  const float ps[] = {1.f, 1.f, 0.9f, 0.5f, 0.95f, 1e-3f};
  for (int64_t r = 0; r < n; ++r) {
    const float scale = 0.5f + float(rng() % 8);
    const bool ties = rng() % 3 == 0, masks = rng() % 4 == 0;
    std::vector<float> row(static_cast<size_t>(V));
    for (float& v : row) {
      v = nd(rng) * scale;
      if (ties) v = std::round(v * 8) / 8;
      if (masks && rng() % 5 == 0) v = -INFINITY;
    }
    row[size_t(rng() % uint64_t(V))] = 3.f * scale;  // a finite maximum
    x.push_back(std::move(row));
    rows.push_back({temps[rng() % 6], ks[rng() % 6], ps[rng() % 6], rng(), uint64_t(r), rng() % 1000});
  }
}

TEST(SampleCuda, TheGpuPicksTheCpuTokensOnRandomRows) {
  REQUIRE_GPU();
  // 10,000 rows of 1000 tokens and 64 of the real vocabulary (163840), f32 and bf16: the kernel computes the
  // header's integers, so every row agrees, greedy or not.
  struct Size {
    int64_t n, V;
  };
  for (const Size s : {Size{10000, 1000}, Size{64, 163840}})
    for (const DType dt : {DType::f32, DType::bf16}) {
      std::vector<std::vector<float>> x;
      std::vector<Row> rows;
      random_rows(s.n, s.V, uint64_t(s.V) + uint64_t(dt), x, rows);
      const Tensor l = logits_of(x, dt);
      const std::vector<int32_t> cpu = sample(l, rows), gpu = sample_gpu(l, rows);
      int64_t differ = 0, greedy_differ = 0;
      for (size_t r = 0; r < rows.size(); ++r)
        if (cpu[r] != gpu[r]) ++differ, greedy_differ += rows[r].temperature == 0.f;
      EXPECT_EQ(greedy_differ, 0) << "V " << s.V << " " << dtype_name(dt);
      EXPECT_EQ(differ, 0) << "of " << s.n << " rows, V " << s.V << " " << dtype_name(dt);
    }
}

TEST(SampleCuda, BadRowsGetMinusOne) {
  REQUIRE_GPU();
  const Tensor l = logits_of({{0.f, 1.f}, {0.f, NAN}, {-INFINITY, -INFINITY}, {INFINITY, 0.f}, {0.f, 1.f}, {0.f, 1.f},
                              {0.f, 1.f}});
  // row 0 is valid (the CPU's token); then a NaN, every logit -inf, +inf, and one bad parameter each
  const int32_t valid = sample(logits_of({{0.f, 1.f}}), {{1.f}})[0];
  EXPECT_EQ(sample_gpu(l, {{1.f}, {0.f}, {1.f}, {0.f}, {-1.f}, {1.f, -1}, {1.f, 0, 0.f}}),
            (std::vector<int32_t>{valid, -1, -1, -1, -1, -1, -1}));
}

TEST(SampleCuda, ACapturedCallReplaysWithNewParameters) {
  REQUIRE_GPU();
  std::vector<std::vector<float>> x;
  std::vector<Row> rows;
  random_rows(32, 163840, 7, x, rows);
  const Tensor l = copy_to(logits_of(x), Device::cuda(0));
  GpuParams p{Params(rows)};
  Tensor out(DType::i32, {32}, Device::cuda(0));
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Context ctx;
  ctx.cuda_stream = s;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  sample_tokens(l, p.views(), out, ctx);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (uint64_t step = 0; step < 4; ++step) {
    for (Row& r : rows) r.step = step;  // the next step's draws, written into the captured tensors
    const Params host(rows);
    copy(p.step, host.step);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const Tensor got = copy_to(out, Device::cpu());
    const std::vector<int32_t> want = sample(copy_to(l, Device::cpu()), rows);
    EXPECT_EQ(std::vector<int32_t>(got.data_as<int32_t>(), got.data_as<int32_t>() + 32), want) << "step " << step;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

#endif  // KIMI_WITH_CUDA

}  // namespace
}  // namespace kimi
