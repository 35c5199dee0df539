// kimi/ops/linear.h linear_many: independent projections in one call.
//   - each job's y equals linear()'s on the same job, bit for bit, on every device: mixed weight formats (bf16, f32,
//     MXFP4), x dtypes (bf16, f32), row strides, beta 1, an unaligned width (scalar tail), M in {1, 3, 8, 20} (the
//     GEMV's one-launch groups at M <= 16 and the one-by-one cuBLAS jobs), more jobs than one launch holds (8);
//   - bad input names the job and the argument, before anything is written (y keeps its bytes).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_tests.h"
#include "expect_error.h"
#include "kimi/ops/linear.h"
#include "tensor_testutil.h"

namespace kimi {
namespace {

using testutil::copy_to;

// A host tensor of uniform values in [lo, hi) (float dtypes) or random bytes (u8 in [lo, hi]).
Tensor host_random(DType dt, std::vector<int64_t> shape, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(dt, std::span<const int64_t>(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::u8) t.data_as<uint8_t>()[i] = uint8_t(u(rng));
    else if (dt == DType::f32) t.data_as<float>()[i] = float(u(rng));
    else t.data_as<uint16_t>()[i] = f32_to_bf16(float(u(rng)));
  }
  return t;
}

std::vector<uint8_t> bytes_of(const TensorView& v) {
  Tensor h(v.dtype, std::span<const int64_t>(v.shape.data(), size_t(v.ndim)));
  copy(h.view(), v);
  return std::vector<uint8_t>(static_cast<uint8_t*>(h.data()), static_cast<uint8_t*>(h.data()) + h.nbytes());
}

// One job's operands on a device: x (possibly a strided view into a wider buffer), the weight, y and a second y for
// the reference call, both starting from the same bytes (beta 1 reads them).
struct JobData {
  Tensor xbuf, w, scale, y, y_ref;
  TensorView x;
  float beta;
  Weight weight() const { return Weight{w, scale.numel() ? scale.view() : TensorView{}}; }
};

struct Spec {
  int64_t n, k;
  DType wdt;  // f32 / bf16, or u8 for MXFP4
  DType xdt;
  int64_t x_pad;  // extra columns in x's row stride
  float beta;
};

JobData make_job(const Spec& s, int64_t m, Device d, std::mt19937_64& rng) {
  JobData j;
  j.xbuf = copy_to(host_random(s.xdt, {m, s.k + s.x_pad}, rng, -1, 1), d);
  j.x = j.xbuf.view().slice(1, 0, s.k);
  if (s.wdt == DType::u8) {
    j.w = copy_to(host_random(DType::u8, {s.n, s.k / 2}, rng, 0, 255), d);
    j.scale = copy_to(host_random(DType::u8, {s.n, s.k / 32}, rng, 118, 124), d);
  } else {
    j.w = copy_to(host_random(s.wdt, {s.n, s.k}, rng, -0.2, 0.2), d);
    j.scale = Tensor(DType::u8, {0});
  }
  const Tensor y0 = host_random(DType::f32, {m, s.n}, rng, -1, 1);
  j.y = copy_to(y0, d);
  j.y_ref = copy_to(y0, d);
  j.beta = s.beta;
  return j;
}

class LinearMany : public ::testing::TestWithParam<Device> {};

TEST_P(LinearMany, EachJobEqualsItsOwnLinearCallBitForBit) {
  const Device d = GetParam();
#ifdef KIMI_WITH_CUDA
  if (d.type == DeviceType::cuda && cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
#endif
  // Ten jobs (more than one GEMV launch holds), mixed so that several launch groups form.
  const std::vector<Spec> specs = {
      {300, 256, DType::bf16, DType::bf16, 0, 0.f},  {512, 256, DType::bf16, DType::bf16, 0, 0.f},
      {64, 256, DType::bf16, DType::bf16, 8, 1.f},   {96, 256, DType::u8, DType::bf16, 0, 0.f},
      {40, 256, DType::f32, DType::bf16, 0, 0.f},    {33, 37, DType::bf16, DType::bf16, 0, 0.f},
      {128, 256, DType::bf16, DType::f32, 4, 0.f},   {200, 256, DType::bf16, DType::bf16, 0, 0.f},
      {16, 256, DType::bf16, DType::bf16, 0, 1.f},   {24, 256, DType::bf16, DType::bf16, 0, 0.f}};
  for (const int64_t m : {1, 3, 8, 20}) {
    SCOPED_TRACE("M=" + std::to_string(m));
    std::mt19937_64 rng(uint64_t(40 + m));
    std::vector<JobData> data;
    for (const Spec& s : specs) data.push_back(make_job(s, m, d, rng));
    std::vector<LinearJob> jobs;
    for (const JobData& j : data) jobs.push_back({j.x, j.weight(), j.y, j.beta});
    linear_many(jobs);
    for (size_t i = 0; i < data.size(); ++i) {
      SCOPED_TRACE("job " + std::to_string(i));
      linear(data[i].x, data[i].weight(), data[i].y_ref, data[i].beta);
      const std::vector<uint8_t> got = bytes_of(data[i].y), want = bytes_of(data[i].y_ref);
      EXPECT_TRUE(got == want);  // y and y_ref start from the same random bytes: a job left unwritten fails here
    }
  }
}

TEST_P(LinearMany, BadInputNamesTheJobBeforeAnythingIsWritten) {
  const Device d = GetParam();
#ifdef KIMI_WITH_CUDA
  if (d.type == DeviceType::cuda && cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
#endif
  std::mt19937_64 rng(9);
  const JobData a = make_job({64, 128, DType::bf16, DType::bf16, 0, 0.f}, 2, d, rng);
  const JobData b = make_job({32, 128, DType::bf16, DType::bf16, 0, 0.f}, 2, d, rng);
  const std::vector<uint8_t> a_before = bytes_of(a.y);
  const auto run = [&](std::vector<LinearJob> jobs) { linear_many(jobs); };
  // A later job's bad shape: the first job's y is untouched.
  const Tensor y_bad = copy_to(Tensor(DType::f32, {2, 31}), d);
  EXPECT_KIMI_ERROR(run({{a.x, a.weight(), a.y}, {b.x, b.weight(), y_bad}}), "linear_many", "'jobs[1].y'",
                    "[2, 32]", "[2, 31]");
  EXPECT_EQ(bytes_of(a.y), a_before);
  EXPECT_KIMI_ERROR(run({{a.x, a.weight(), a.y}, {b.x, b.weight(), b.y, 0.5f}}), "linear_many", "'jobs[1].beta'",
                    "0 or 1", "0.5");
  EXPECT_KIMI_ERROR(run({{a.x, a.weight(), a.y}, {b.x, a.weight(), b.y}}), "linear_many", "'jobs[1].y'", "[2, 64]");
  // One job's output is another job's input (the jobs run at once): refused, naming both.
  const Tensor shared = copy_to(Tensor(DType::bf16, {2, 64}), d);
  const JobData c = make_job({128, 64, DType::bf16, DType::bf16, 0, 0.f}, 2, d, rng);
  EXPECT_KIMI_ERROR(run({{a.x, a.weight(), shared}, {shared, c.weight(), c.y}}), "linear_many", "'jobs[0].y'",
                    "'jobs[1].x'");
  EXPECT_KIMI_ERROR(run({{a.x, a.weight(), a.y}, {b.x, Weight{a.w.view().slice(0, 0, 32), {}}, a.y.view().slice(1, 0, 32)}}),
                    "linear_many", "'jobs[0].y'", "'jobs[1].y'");
  EXPECT_NO_THROW(run({}));
}

INSTANTIATE_TEST_SUITE_P(Devices, LinearMany, ::testing::ValuesIn(testutil::test_devices()),
                         [](const auto& i) { return to_string(i.param) == "cpu" ? std::string("cpu") : std::string("cuda"); });

#ifdef KIMI_WITH_CUDA
// Jobs on two devices are refused, naming the job and both devices.
TEST(LinearManyDevices, JobsOnTwoDevicesAreRefused) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(11);
  const JobData a = make_job({64, 128, DType::bf16, DType::bf16, 0, 0.f}, 1, Device::cpu(), rng);
  const JobData b = make_job({64, 128, DType::bf16, DType::bf16, 0, 0.f}, 1, Device::cuda(0), rng);
  const std::vector<LinearJob> jobs = {{a.x, a.weight(), a.y}, {b.x, b.weight(), b.y}};
  EXPECT_KIMI_ERROR(linear_many(jobs), "linear_many", "'jobs[1].x'", "cpu", "cuda:0");
}
#endif

}  // namespace
}  // namespace kimi
