// The install test's program: built against an installed kimi.cpp only (tests/install/consumer/CMakeLists.txt).
// It calls operators that pull in each of libkimi.a's dependencies at link time (rms_norm: OpenMP; linear with
// M > 16: OpenBLAS sgemm; parse_config: nlohmann_json), checks their values, and checks the kimi::Error of a bad
// call word for word. Prints one line per check; exits 1 on the first mismatch.
#include <kimi/model/config.h>
#include <kimi/ops.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) std::exit(1);
}

bool close(float a, double b) { return std::fabs(double(a) - b) <= 1e-6 * std::fmax(1.0, std::fabs(b)); }

float* f32(kimi::Tensor& t) { return static_cast<float*>(t.view().data); }

}  // namespace

int main() {
  // rms_norm, 2 rows of D = 2: y = w * x / sqrt(mean(x^2) + eps)
  kimi::Tensor x(kimi::DType::f32, {2, 2}), w(kimi::DType::f32, {2}), y(kimi::DType::f32, {2, 2});
  const float xs[] = {3.f, 4.f, 1.f, -1.f}, ws[] = {1.f, 2.f};
  for (int i = 0; i < 4; ++i) f32(x)[i] = xs[i];
  for (int i = 0; i < 2; ++i) f32(w)[i] = ws[i];
  kimi::rms_norm(x, w, 0.f, y);
  const double r0 = 1 / std::sqrt(12.5), r1 = 1.0;
  expect(close(f32(y)[0], 3 * r0) && close(f32(y)[1], 8 * r0) && close(f32(y)[2], 1 * r1) &&
             close(f32(y)[3], -2 * r1),
         "rms_norm values");

  // a bad call throws kimi::Error naming the operator, the argument, the expected and the actual value
  kimi::Tensor w3(kimi::DType::f32, {3});
  std::string message;
  try {
    kimi::rms_norm(x, w3, 0.f, y);
  } catch (const kimi::Error& e) {
    message = e.what();
  }
  expect(message == "rms_norm: argument 'w': expected shape [2], got [3]", "rms_norm error: " + message);

  // linear with M = 32 rows (the CPU backend's sgemm path): y[m][o] = sum_i x[m][i] * W[o][i]
  const int M = 32, in = 8, out = 4;
  kimi::Tensor a(kimi::DType::f32, {M, in}), b(kimi::DType::f32, {out, in}), c(kimi::DType::f32, {M, out});
  for (int i = 0; i < M * in; ++i) f32(a)[i] = float(i % 7) - 3.f;
  for (int i = 0; i < out * in; ++i) f32(b)[i] = float(i % 5) * 0.5f;
  kimi::linear(a, kimi::Weight{b, {}}, c);
  bool linear_ok = true;
  for (int m = 0; m < M; ++m) {
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int i = 0; i < in; ++i) s += double(f32(a)[m * in + i]) * double(f32(b)[o * in + i]);
      linear_ok = linear_ok && close(f32(c)[m * out + o], s);
    }
  }
  expect(linear_ok, "linear values (M = 32)");

  // the config parser round-trips a named config through JSON
  const kimi::model::Config k3 = kimi::model::named_config("k3-tiny");
  const kimi::model::Config back = kimi::model::parse_config(kimi::model::config_to_json(k3));
  expect(kimi::model::config_to_json(back) == kimi::model::config_to_json(k3), "config JSON round trip");
  return 0;
}
