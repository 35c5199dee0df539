// Whole-model parity against independent references, from the committed fixtures in tests/fixtures/
// (docs/model/reference-fixtures.md has the contract; scripts/reference/ the generators):
//   kimi-linear-tiny: Hugging Face transformers 5.17 KimiLinearForCausalLM, fp32, eager attention;
//   k3-tiny:          the project's own pure-PyTorch fp64 reference of every K3 switch, written from SPEC.md.
// The checkpoint is regenerated with `write_random_model(config, seed)` and checked against the fixture's
// per-tensor checksums, then for each prompt: logits of every prompt position and the per-layer hidden
// states (one prefill), the greedy tokens and the logits of each decode step (teacher-forced on the
// reference tokens so one step's rounding cannot change the next step's input), each within 1e-4
// relative (SPEC 14), and the greedy tokens identical. Finally all prompts in one varlen batch.
// Each fixture runs on the CPU model and, in a build with the CUDA backend, on the CUDA model (Model(dir,
// Device::cuda(0)): whatever its placement, the same bounds; tests/cuda_tests.h), skipped there when no CUDA device
// is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cuda_tests.h"
#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/model/model.h"
#include "kimi/model/safetensors.h"

#ifndef KIMI_FIXTURES_DIR
#error "KIMI_FIXTURES_DIR must point at tests/fixtures"
#endif

namespace kimi::model {
namespace {

namespace fs = std::filesystem;

constexpr double kTol = 1e-4;  // SPEC 14: whole-model logits on a tiny config in fp32

struct Fixture {
  std::unique_ptr<SafetensorsFile> file;
  std::map<std::string, std::string> meta;
  explicit Fixture(const std::string& config)
      : file(std::make_unique<SafetensorsFile>(std::string(KIMI_FIXTURES_DIR) + "/" + config + ".safetensors")),
        meta(file->header().metadata) {}
  TensorView get(const std::string& name) const {
    const TensorInfo* t = file->find(name);
    if (!t) throw Error("fixture " + file->path() + ": no tensor '" + name + "'");
    return file->view(*t);
  }
  std::vector<float> floats(const std::string& name) const {
    const TensorView t = get(name);
    EXPECT_EQ(t.dtype, DType::f32) << name;
    const float* p = static_cast<const float*>(t.data);
    return {p, p + t.numel()};
  }
  std::vector<int32_t> ints(const std::string& name) const {
    const TensorView t = get(name);
    EXPECT_EQ(t.dtype, DType::i32) << name;
    const int32_t* p = static_cast<const int32_t*>(t.data);
    return {p, p + t.numel()};
  }
};

double tensor_sum(const TensorView& t) {
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    s += t.dtype == DType::u8 ? double(static_cast<const uint8_t*>(t.data)[i]) : double(load_as_f32(t.data, t.dtype, i));
  return s;
}

double rel_err(const float* got, const float* ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]), den += double(ref[i]) * ref[i];
  return std::sqrt(num / std::max(den, 1e-300));
}

int32_t argmax(const float* row, int64_t n) { return int32_t(std::max_element(row, row + n) - row); }

struct Param {
  std::string config;
  Device device;
};
void PrintTo(const Param& p, std::ostream* os) { *os << p.config << " on " << to_string(p.device); }

class Parity : public ::testing::TestWithParam<Param> {};

TEST_P(Parity, MatchesReference) {
  const Device dev = GetParam().device;
  if (dev.type == DeviceType::cuda && cuda_device_count() == 0)
    GTEST_SKIP() << "no CUDA device visible";
  const Fixture fx(GetParam().config);
  const std::string config = fx.meta.at("config");
  ASSERT_EQ(config, GetParam().config);
  SchemaOptions so;
  so.mxfp4_experts = fx.meta.at("experts") == "mxfp4";
  const fs::path dir = fs::temp_directory_path() /
                       ("kimi-parity-" + config + "-" + to_string(dev) + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  write_random_model(dir.string(), named_config(config), so, std::stoull(fx.meta.at("seed")));

  // The regenerated weights are the fixture's weights.
  Model m(dir.string(), dev);
  m.set_activation_dtype(DType::f32);  // the fp32 bounds of SPEC 14 (a GPU's default is bf16: test_model_runtime.cpp)
  const nlohmann::json sums = nlohmann::json::parse(fx.meta.at("checksums"));
  ASSERT_EQ(sums.size(), m.files()->checkpoint.names().size());
  for (const auto& [name, want] : sums.items()) {
    const double got = tensor_sum(m.files()->checkpoint.get(name)), w = want.get<double>();
    ASSERT_NEAR(got, w, 1e-9 * std::max(1.0, std::abs(w))) << "checksum of " << name;
  }

  const Config& c = m.config();
  const int64_t V = c.vocab_size, d = c.hidden_size, L = c.num_hidden_layers;
  const int64_t P = std::stoll(fx.meta.at("num_prompts")), G = std::stoll(fx.meta.at("decode_steps"));
  double worst_logits = 0, worst_hidden = 0, worst_decode = 0;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<float>> last_logits;
  for (int64_t p = 0; p < P; ++p) {
    const std::string pre = "p" + std::to_string(p) + ".";
    const std::vector<int32_t> prompt = fx.ints(pre + "prompt"), tokens = fx.ints(pre + "tokens");
    const std::vector<float> ref_logits = fx.floats(pre + "prefill_logits"), ref_hidden = fx.floats(pre + "hidden"),
                             ref_decode = fx.floats(pre + "decode_logits");
    const int64_t T = int64_t(prompt.size());
    ASSERT_EQ(int64_t(ref_logits.size()), T * V);
    ASSERT_EQ(int64_t(ref_hidden.size()), (L + 1) * T * d);
    ASSERT_EQ(int64_t(tokens.size()), G);
    prompts.push_back(prompt);
    last_logits.emplace_back(ref_logits.end() - V, ref_logits.end());

    Cache cache(m, 1, T + G);
    ForwardOptions opt;
    opt.logits = LogitsFor::all;
    int64_t reported = 0;
    opt.on_layer = [&](int64_t layer, TensorView h) {
      ++reported;
      const double e = rel_err(static_cast<const float*>(h.data), ref_hidden.data() + (layer + 1) * T * d, T * d);
      worst_hidden = std::max(worst_hidden, e);
      EXPECT_LE(e, kTol) << config << " prompt " << p << " hidden state after layer " << layer;
    };
    const int64_t cu[2] = {0, T}, slot[1] = {0};
    const Tensor logits = forward(m, cache, {prompt, cu, slot}, opt);
    ASSERT_EQ(reported, L + 1) << "hidden states compared: the embedding and every layer";
    for (int64_t t = 0; t < T; ++t) {
      const double e = rel_err(logits.data_as<float>() + t * V, ref_logits.data() + t * V, V);
      worst_logits = std::max(worst_logits, e);
      EXPECT_LE(e, kTol) << config << " prompt " << p << " position " << t;
    }
    EXPECT_EQ(argmax(logits.data_as<float>() + (T - 1) * V, V), tokens[0]) << config << " prompt " << p;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t cu1[2] = {0, 1};
      const Tensor step = forward(m, cache, {std::span(&tokens[size_t(g)], 1), cu1, slot});
      const double e = rel_err(step.data_as<float>(), ref_decode.data() + g * V, V);
      worst_decode = std::max(worst_decode, e);
      EXPECT_LE(e, kTol) << config << " prompt " << p << " decode step " << g;
      if (g + 1 < G) {
        EXPECT_EQ(argmax(step.data_as<float>(), V), tokens[size_t(g + 1)]) << config << " step " << g;
      }
    }
  }

  // All prompts in one varlen batch (slots in reverse order).
  std::vector<int32_t> packed;
  std::vector<int64_t> cu{0}, slots;
  for (int64_t p = 0; p < P; ++p) {
    packed.insert(packed.end(), prompts[size_t(p)].begin(), prompts[size_t(p)].end());
    cu.push_back(int64_t(packed.size()));
    slots.push_back(P - 1 - p);
  }
  Cache cache(m, P, int64_t(packed.size()));
  const Tensor batch = forward(m, cache, {packed, cu, slots});
  for (int64_t p = 0; p < P; ++p)
    EXPECT_LE(rel_err(batch.data_as<float>() + p * V, last_logits[size_t(p)].data(), V), kTol) << config << " batched prompt " << p;

  std::printf("%s on %s vs %s: worst relative error prefill logits %.2e, hidden %.2e, decode logits %.2e\n",
              config.c_str(), to_string(dev).c_str(), fx.meta.at("reference").c_str(), worst_logits, worst_hidden,
              worst_decode);
  fs::remove_all(dir);
}

// Each fixture on each of the build's devices (cpu, then cuda:0 in a CUDA build).
std::vector<Param> params() {
  std::vector<Param> p;
  for (const Device d : testutil::test_devices())
    for (const char* config : {"kimi-linear-tiny", "k3-tiny"}) p.push_back({config, d});
  return p;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Parity, ::testing::ValuesIn(params()),
                         [](const auto& info) {
                           return std::string(info.param.config == "k3-tiny" ? "K3" : "KimiLinear") +
                                  (info.param.device.type == DeviceType::cuda ? "_Cuda" : "");
                         });

}  // namespace
}  // namespace kimi::model
