// tests/model_testutil.h: helpers shared by the model tests (test_model.cpp, test_model_cuda.cpp).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kimi/model/checkpoint.h"
#include "kimi/model/model.h"

namespace kimi::model::testutil {

// A random checkpoint (seed 11) of config c, written once per test binary run under `key` (MXFP4 experts when
// mxfp4), removed when the test binary exits (ctest runs each test in its own process).
inline std::string random_checkpoint_dir(const std::string& key, const Config& c, bool mxfp4) {
  static struct Dirs {
    std::map<std::string, std::string> m;
    ~Dirs() {
      std::error_code ec;
      for (const auto& [name, dir] : m) std::filesystem::remove_all(dir, ec);
    }
  } dirs;
  std::string& d = dirs.m[key];
  if (d.empty()) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("kimi-model-" + key + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    SchemaOptions so;
    so.mxfp4_experts = mxfp4;
    write_random_model(dir.string(), c, so, 11);
    d = dir.string();
  }
  return d;
}

// A random checkpoint of a named tiny config (MXFP4 experts for k3-tiny).
inline std::string tiny_dir(const std::string& name) {
  return random_checkpoint_dir(name, named_config(name), name == "k3-tiny");
}

inline std::vector<int32_t> random_tokens(int64_t n, uint64_t seed, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(rng() % uint64_t(vocab));
  return t;
}

inline double rel_err(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), den += double(b[i]) * b[i];
  return std::sqrt(num / den);
}

// Logits of every position of `tokens`, fed to slot 0 of a fresh cache (pools where m's mixers run) in
// pieces of the given sizes.
inline std::vector<float> logits_in_pieces(const Model& m, const std::vector<int32_t>& tokens,
                                           const std::vector<int64_t>& pieces) {
  Cache cache(m, 2, int64_t(tokens.size()));
  std::vector<float> out;
  size_t pos = 0;
  for (int64_t len : pieces) {
    const std::span<const int32_t> part(tokens.data() + pos, size_t(len));
    const int64_t cu[2] = {0, len}, slot[1] = {0};
    ForwardOptions opt;
    opt.logits = LogitsFor::all;
    const Tensor l = forward(m, cache, {part, cu, slot}, opt);
    out.insert(out.end(), l.data_as<float>(), l.data_as<float>() + l.numel());
    pos += size_t(len);
  }
  EXPECT_EQ(cache.length(0), int64_t(tokens.size()));
  return out;
}

}  // namespace kimi::model::testutil
