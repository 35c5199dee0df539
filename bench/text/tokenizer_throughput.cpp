// bench/text/tokenizer_throughput.cpp: the tokenizer's encode throughput on files, in process, one thread.
//
//   kimi_bench_tokenizer DIR FILE... [--reps N]
//
// Loads DIR's tokenizer (tiktoken.model + tokenizer_config.json), reads each FILE (UTF-8) and times
// Tokenizer::encode(text, AllowedSpecials::none()) -- tiktoken's encode_ordinary plus tokenization_kimi.py's
// splitting -- N times (default 5), keeping the fastest. Prints one JSON object per file on stdout:
//   {"file", "bytes", "tokens", "seconds" (the fastest run), "mb_per_s" (1e6 bytes), "fnv1a" (of the ids as
//    little-endian uint32, so a peer's ids can be compared without printing them)}
// bench/peers/tiktoken_bench.py runs it beside tiktoken on the same vocabulary and texts (docs/text/tokenizer.md).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kimi/error.h"
#include "text/tokenizer.h"

namespace {

uint64_t fnv1a(const std::vector<uint32_t>& ids) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t id : ids)
    for (int b = 0; b < 4; ++b) {
      h ^= (id >> (8 * b)) & 0xFF;
      h *= 1099511628211ull;
    }
  return h;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw kimi::Error("kimi_bench_tokenizer: " + path + ": cannot open");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    int reps = 5;
    std::vector<std::string> files;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--reps" && i + 1 < args.size()) {
        reps = std::stoi(args[++i]);
        if (reps < 1) throw kimi::Error("kimi_bench_tokenizer: --reps: expected >= 1, got " + args[i]);
      } else {
        files.push_back(args[i]);
      }
    }
    if (files.size() < 2) {
      std::fprintf(stderr, "usage: kimi_bench_tokenizer DIR FILE... [--reps N]\n");
      return 2;
    }
    const kimi::text::Tokenizer tok = kimi::text::Tokenizer::load(files[0]);
    for (size_t f = 1; f < files.size(); ++f) {
      const std::string text = read_file(files[f]);
      std::vector<uint32_t> ids;
      double best = 1e300;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        ids = tok.encode(text, kimi::text::AllowedSpecials::none());
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      const nlohmann::json j = {{"file", files[f]},       {"bytes", text.size()},
                                {"tokens", ids.size()},   {"seconds", best},
                                {"mb_per_s", double(text.size()) / 1e6 / best}, {"fnv1a", fnv1a(ids)}};
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kimi_bench_tokenizer: %s\n", e.what());
    return 2;
  }
  return 0;
}
