// tools/kimi/model_cmds.h: `kimi random-model`, `kimi inspect`, `kimi generate` and `kimi bench`.
//
// Each command validates every flag before it reads a checkpoint or writes anything, and names the flag as
// the user typed it in its kimi::Error (`generate: --max-tokens: expected ...`). Numbers CLI11 cannot hold
// in the option's type are CLI11's own parse errors; the ranges are checked here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kimi/tensor.h"

namespace kimi::cli {

// The named configurations of kimi::model::named_config, as `random-model --help` and README list them.
inline constexpr const char* kNamedConfigsHelp =
    "Named configs:\n"
    "  k3-tiny           Kimi K3's layout with every K3 switch on at tiny widths (SPEC 13): 9 layers (6 KDA,\n"
    "                    3 MLA), hidden 256, 16 experts top-4 with MXFP4 storage, vocabulary 512; ~11 MB\n"
    "  kimi-linear-tiny  the Kimi-Linear (48B) layout at the same widths, every K3 switch off; ~20 MB\n"
    "  k3-slice          K3's real per-layer widths (hidden 7168, 96 KDA heads of 128, latent MoE 3584,\n"
    "                    expert width 3072) on 4 layers (3 KDA + 1 MLA), 32 experts top-8 instead of 896\n"
    "                    top-16, vocabulary 32768; ~7 GB, for speed measurements at real sizes\n"
    "Or a config.json path (Kimi-Linear, or K3 with text_config).\n";

struct RandomModelOptions {
  std::string config;  // named config (kNamedConfigsHelp) or a path to a config.json
  std::string out;
  std::string seed = "0";  // parsed by parse_seed (CLI11 wraps -1 and saturates >= 2^64 for uint64_t)
  int shards = 1;          // in [1, the checkpoint's tensor count]
  std::string experts = "auto";  // auto (MXFP4 for K3 configs), mxfp4, bf16
  bool force = false;      // replace a checkpoint already in --out
};
int run_random_model(const RandomModelOptions& opt);
// device: "cpu" or "cuda[:i]": also prints the placement plan of the model's blocks on that device.
int run_inspect(const std::string& dir, const std::string& device = "cpu");

struct GenerateCmdOptions {
  std::string dir;
  std::vector<std::string> prompts;  // comma-separated token ids, one string per sequence
  std::vector<std::string> texts;       // or prompts as text (encoded with DIR's tokenizer, no specials) ...
  std::vector<std::string> text_files;  // ... or as files of text; not mixed with `prompts`
  bool json = false;                    // one JSON object on stdout (the report goes to stderr)
  int64_t max_tokens = 16;           // in [1, context limit - longest prompt] (kimi/model/generate.h)
  float temperature = 0.f;
  int top_k = 0;
  float top_p = 1.f;
  std::string seed = "0";            // parsed by parse_seed
  std::vector<int32_t> stop;         // token ids in [0, vocab_size)
  int threads = 0;                   // in [0, max_cpu_threads()]
  // Before the timed run, an untimed one of the same batch cut to two new tokens (the prefill and one decode
  // step): weights paged in, every code path's first-call costs paid. --no-warmup times the cold start.
  bool warmup = true;
  std::string device = "cpu";  // cpu, cuda or cuda:i
  std::string dtype = "auto";  // the activation dtype: auto (bf16 on a GPU, f32 on the CPU), f32 or bf16
  int ep = 0;                  // expert parallelism over this many CPU ranks (mpirun -np N); 0: off (docs/ep.md)
  std::string ep_placement = "round-robin";  // round-robin or profile (needs ep_profile)
  std::string ep_profile;                    // a file of E expected pairs per expert (whitespace or commas)
  int ep_replicas = 0;                       // profile: extra holders for the hottest experts
  std::string ep_resident = "all";           // all (every expert on every rank) or held (a rank's own experts)
};
int run_generate(const GenerateCmdOptions& opt);  // tools/kimi/generate_cmd.cpp

// `kimi bench` (llama-bench style), tools/kimi/bench_cmd.cpp. Lists are comma-separated integers.
struct BenchCmdOptions {
  std::string model;                // checkpoint directory; with --random a named config or a config.json path
  bool random = false;              // random weights made on the device (Model::random), no checkpoint
  std::string experts = "auto";     // with --random: auto (MXFP4 for K3), mxfp4, bf16
  std::string device = "cpu";       // cpu, cuda or cuda:i
  std::string prompt = "512";       // -p: prefill lengths N (rows ppN); 0 = no prefill rows
  std::string gen = "128";          // -n: decode steps N (rows tgN); 0 = no decode rows
  std::string batch = "1";          // -b: sequences per forward
  int64_t context = 0;              // tokens per sequence already in the cache before a tgN row's steps
  int repetitions = 5;              // timed runs per row (median and spread)
  int warmup = 1;                   // untimed runs per row before them
  std::string seed = "0";           // --random weights' seed and the tokens' seed, parsed by parse_seed
  int threads = 0;                  // CPU threads, in [0, max_cpu_threads()]
  std::string json, csv;            // "": none; "-": stdout (the table then goes to stderr); else a file path
  bool profile = false;             // one more run per row under an OpProfiler: time per operator (kimi/profile.h)
  std::string chip = "auto";        // the cost model's chip for the predicted / floor columns: auto (h200 on a
                                    // CUDA device, none on the CPU), none, or a named chip (kimi/model/cost.h)
  int ep = 0;                       // expert parallelism over this many CPU ranks (mpirun -np N), -b sequences
                                    // per rank; 0: off (docs/ep.md, tools/kimi/bench_ep.h)
};
int run_bench(const BenchCmdOptions& opt);

// "cpu", "cuda" (= cuda:0) or "cuda:i"; throws kimi::Error naming `option` otherwise.
Device parse_device(const std::string& s, const std::string& option);
// A decimal integer in [0, 2^64 - 1]; throws kimi::Error naming `option` otherwise.
uint64_t parse_seed(const std::string& s, const std::string& option);
// The most --threads accepted: the CPUs this machine has (std::thread::hardware_concurrency). More threads
// than cores only time-slice OpenMP's spinning workers (a 0.15 s run took 29 s with 1000), so it is refused.
int max_cpu_threads();

}  // namespace kimi::cli
