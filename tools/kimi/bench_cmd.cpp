// `kimi bench` (llama-bench style): prefill and decode speed of a model at several batch sizes, as a table and
// optionally JSON / CSV. The model is a checkpoint directory, or with --random a config whose weights are
// made on the device (Model::random: no checkpoint, so a model as large as the GPU's memory can be timed).
//   ppN at batch b: one forward of b fresh sequences of N tokens each (b * N tokens, packed), logits of the
//     last token of each; time per forward.
//   tgN at batch b: N decode steps of b sequences (one token each per step) after an untimed prefill of
//     --context tokens per sequence (none by default: the first step starts each sequence); time per step.
// The logits stay on the head's device, as generate() keeps them to sample there (sampling is not timed).
// Each row: --warmup untimed runs, then --repetitions timed ones; tokens/s and ms from their median, the
// spread as min-max and the standard deviation. Tokens are seeded random ids. Peak memory per row: the
// device's Tensor peak plus its CUDA memory pool's high-water mark (kimi::device_memory_stats), counted from
// the row's start (weights made or uploaded to the device included; a mapped checkpoint on the CPU is not).
// Every flag is checked before the model is loaded or anything is allocated or written.
// --ep N (under `mpirun -np N`, CPU ranks): every row runs on every rank with -b sequences per rank, the MoE layers
// as expert-parallel steps; rank 0 prints the table (the job's and one rank's tokens/s) and the per-row EP table
// (bench_ep.h); the other ranks print nothing and write no file.
#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bench_ep.h"
#include "bench_profile.h"
#include "ep_cli.h"
#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/model/cost.h"
#include "kimi/model/generate.h"
#include "kimi/model/model.h"
#include "kimi/model/random_weights.h"
#include "kimi/model_cmds.h"
#include "model/weights.h"

namespace kimi::cli {
namespace {

using model::Config;

constexpr int64_t kMaxTokensPerForward = int64_t(1) << 24;

// A comma-separated list of integers in [lo, hi]; "0" alone is the empty list when `zero_is_none`.
std::vector<int64_t> parse_list(const std::string& s, const std::string& flag, int64_t lo, int64_t hi,
                                const char* zero_means) {
  const std::string expected = "comma-separated integers in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" +
                               (zero_means ? std::string(" (0 alone: ") + zero_means + ")" : "");
  if (zero_means && s == "0") return {};
  std::vector<int64_t> v;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = std::min(s.find(',', i), s.size());
    const std::string part = s.substr(i, j - i);
    const bool digits = !part.empty() && part.size() <= 12 && part.find_first_not_of("0123456789") == std::string::npos;
    const int64_t x = digits ? std::stoll(part) : -1;
    if (!digits || x < lo || x > hi) throw Error("bench: " + flag + ": expected " + expected + ", got '" + s + "'");
    v.push_back(x);
    i = j + 1;
  }
  return v;
}

// Where --json / --csv write: "" nowhere, "-" stdout, else a file whose directory exists (checked here,
// before anything runs; the file is written at the end).
void check_out_path(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  if (path.empty() || path == "-") return;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error("bench: " + flag + " '" + path + "': expected a file path, got a directory");
  const fs::path dir = fs::absolute(path, ec).parent_path();
  if (!fs::is_directory(dir, ec))
    throw Error("bench: " + flag + " '" + path + "': the directory '" + dir.string() + "' does not exist");
}

struct CheckedFlags {
  Config config;
  model::SchemaOptions schema;  // --random
  Device device;
  uint64_t seed = 0;
  std::vector<int64_t> prompt, gen, batch;
  std::optional<model::Chip> chip;  // the predicted / floor columns' chip
};

CheckedFlags check_flags(const BenchCmdOptions& opt) {
  using namespace kimi::model;
  CheckedFlags f;
  f.device = parse_device(opt.device, "bench: --device");
  f.seed = parse_seed(opt.seed, "bench: --seed");
  if (opt.chip == "auto") {
    if (f.device.type == DeviceType::cuda) f.chip = named_chip("h200");
  } else if (opt.chip != "none") {
    std::string names;
    for (const Chip& c : named_chips()) names += c.name + ", ";
    bool found = false;
    for (const Chip& c : named_chips()) found = found || c.name == opt.chip;
    if (!found) throw Error("bench: --chip: expected auto, none or a named chip (" + names.substr(0, names.size() - 2) + "), got '" + opt.chip + "'");
    f.chip = named_chip(opt.chip);
  }
  if (opt.repetitions < 1 || opt.repetitions > 1000)
    throw Error("bench: -r/--repetitions: expected a value in [1, 1000], got " + std::to_string(opt.repetitions));
  if (opt.warmup < 0 || opt.warmup > 100)
    throw Error("bench: --warmup: expected a value in [0, 100], got " + std::to_string(opt.warmup));
  if (opt.threads < 0 || opt.threads > max_cpu_threads())
    throw Error("bench: --threads: expected a value in [0, " + std::to_string(max_cpu_threads()) +
                "] (0 = OpenMP's default; at most the " + std::to_string(max_cpu_threads()) +
                " CPUs of this machine), got " + std::to_string(opt.threads));
  check_ep_flag("bench", opt.ep, f.device, opt.device);
  if (opt.ep > 0 && opt.profile)
    throw Error("bench: --profile: expected without --ep (the operator profile does not see the expert-parallel "
                "step's exchange), got --ep " + std::to_string(opt.ep));
  if (opt.ep > 0 && opt.chip != "auto" && opt.chip != "none")
    throw Error("bench: --chip: expected auto or none with --ep (the cost model times one chip's forward, not the "
                "expert-parallel step; `kimi plan --ep` predicts that), got '" + opt.chip + "'");
  if (opt.json == "-" && opt.csv == "-")
    throw Error("bench: --csv: expected a file path when --json writes to stdout, got '-'");
  check_out_path(opt.json, "--json");
  check_out_path(opt.csv, "--csv");
  // The model's config: the vocabulary and the context limit bound the other flags.
  if (opt.random) {
    const auto names = named_config_names();
    const bool named = std::find(names.begin(), names.end(), opt.model) != names.end();
    if (!named && !std::filesystem::is_regular_file(opt.model)) {
      std::string list;
      for (const std::string_view n : names) list += std::string(n) + ", ";
      list.resize(list.size() - 2);
      throw Error("bench: model: expected with --random " + list + " or a config.json path, got '" + opt.model + "' (" +
                  (std::filesystem::exists(opt.model) ? "not a file" : "no such file") + ")");
    }
    f.config = named ? named_config(opt.model) : load_config(opt.model);
    if (opt.experts == "mxfp4") {
      f.schema.mxfp4_experts = true;
    } else if (opt.experts == "auto") {
      f.schema.mxfp4_experts = f.config.k3_wrapper;
    } else if (opt.experts != "bf16") {
      throw Error("bench: --experts: expected auto, mxfp4 or bf16, got '" + opt.experts + "'");
    }
    const int64_t in = f.config.routed_expert_hidden_size.value_or(f.config.hidden_size);
    if (f.schema.mxfp4_experts && (in % 32 != 0 || f.config.moe_intermediate_size % 32 != 0))
      throw Error("bench: --experts: MXFP4 experts need the expert widths divisible by 32, got input " +
                  std::to_string(in) + " and moe_intermediate_size " + std::to_string(f.config.moe_intermediate_size));
  } else {
    if (opt.experts != "auto")
      throw Error("bench: --experts: expected only with --random (a checkpoint's experts run as stored), got '" +
                  opt.experts + "'");
    f.config = load_model_config(opt.model);
  }
  if (opt.ep > f.config.num_experts)
    throw Error("bench: --ep: expected at most as many ranks as the model's routed experts (" +
                std::to_string(f.config.num_experts) + "), got " + std::to_string(opt.ep));
  const int64_t limit = context_limit(f.config);
  f.prompt = parse_list(opt.prompt, "-p/--prompt", 1, limit, "no prefill rows");
  f.gen = parse_list(opt.gen, "-n/--gen", 1, limit, "no decode rows");
  f.batch = parse_list(opt.batch, "-b/--batch", 1, 65536, nullptr);
  if (f.prompt.empty() && f.gen.empty())
    throw Error("bench: -p/--prompt, -n/--gen: expected at least one row, got -p 0 and -n 0");
  const int64_t longest = f.gen.empty() ? 0 : *std::max_element(f.gen.begin(), f.gen.end());
  if (opt.context < 0 || opt.context > limit - longest)
    throw Error("bench: --context: expected a value in [0, " + std::to_string(limit - longest) + "] (the context limit of " +
                std::to_string(limit) + " tokens less the longest -n/--gen, " + std::to_string(longest) + "), got " +
                std::to_string(opt.context));
  // One forward packs b * N tokens (pp) or b * --context (tg's prefill); its [tokens, hidden] activations are
  // allocated per forward, so the product is bounded here rather than by an allocation failure midway.
  const int64_t B = *std::max_element(f.batch.begin(), f.batch.end());
  const int64_t P = f.prompt.empty() ? 0 : *std::max_element(f.prompt.begin(), f.prompt.end());
  for (const auto& [n, flag] : {std::pair<int64_t, const char*>{P, "-p/--prompt"}, {f.gen.empty() ? 0 : opt.context, "--context"}})
    if (B * n > kMaxTokensPerForward)
      throw Error("bench: -b/--batch x " + std::string(flag) + ": expected at most " + std::to_string(kMaxTokensPerForward) +
                  " tokens per forward (2^24), got " + std::to_string(B) + " x " + std::to_string(n) + " = " +
                  std::to_string(B * n));
  return f;
}

// One row of the table. The predicted columns belong to the cost model of the forward (a roofline floor and
// a prediction per row, for a given chip): absent until one fills them, printed when present.
struct BenchRow {
  std::string kind;  // "pp" or "tg"
  int64_t n = 0, batch = 0, context = 0;
  std::vector<double> seconds;  // per timed repetition: the forward (pp) or the n steps (tg)
  size_t peak_bytes = 0, tensor_peak_bytes = 0, pool_peak_bytes = 0;
  std::optional<double> predicted_ms, floor_ms;  // per forward / step
  std::optional<RowProfile> profile;             // --profile
  std::optional<BenchEpRow> ep;                  // --ep: seconds and peaks above are then the max over ranks

  std::string test() const { return kind + std::to_string(n) + (context ? "@" + std::to_string(context) : ""); }
  int64_t tokens() const { return n * batch; }                  // per repetition
  double steps() const { return kind == "tg" ? double(n) : 1.0; }  // forwards per repetition
  double median_s() const {
    std::vector<double> s = seconds;
    std::sort(s.begin(), s.end());
    const size_t m = s.size() / 2;
    return s.size() % 2 ? s[m] : 0.5 * (s[m - 1] + s[m]);
  }
  double min_s() const { return *std::min_element(seconds.begin(), seconds.end()); }
  double max_s() const { return *std::max_element(seconds.begin(), seconds.end()); }
  double tokens_per_s() const { return double(tokens()) / median_s(); }
  // The standard deviation of the per-repetition tokens/s (0 for one repetition).
  double tokens_per_s_sd() const {
    if (seconds.size() < 2) return 0;
    double mean = 0, sq = 0;
    for (double s : seconds) mean += double(tokens()) / s;
    mean /= double(seconds.size());
    for (double s : seconds) sq += (double(tokens()) / s - mean) * (double(tokens()) / s - mean);
    return std::sqrt(sq / double(seconds.size() - 1));
  }
  double ms_per_step() const { return 1e3 * median_s() / steps(); }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Times one row on `model`; fills r.seconds and the peaks. With `ep` (--ep: collective, every rank runs the same
// row): the MoE layers run through ep's hook on this rank's own sequences, r.ep gets the EP numbers of the timed
// runs, and r.seconds / the peaks become the max over ranks.
// A tg row's context is prefilled in forwards of at most this many tokens (whole sequences): its memory is that of
// a pp row of this size, not of batch x context tokens at once.
constexpr int64_t kContextTokens = 8192;

void run_row(const model::Model& m, BenchRow& r, int warmup, int reps, uint64_t seed, bool profile, const Context& ctx,
             dist::Comm* comm, dist::EpModel* ep) {
  using namespace kimi::model;
  const Config& c = m.config();
  const Device dev = m.device();
  reset_peak_memory(dev);
  const int64_t B = r.batch;
  const int64_t len = r.kind == "pp" ? r.n : r.context + r.n;
  std::optional<Cache> cache;
  try {
    cache.emplace(m, B, std::max<int64_t>(len, 1));
  } catch (const Error& e) {  // a cache that does not fit: say which flags size it
    if (std::string(e.what()).rfind("Cache: ", 0) != 0) throw;
    throw Error("bench: " + r.test() + " at batch " + std::to_string(B) + ": " + e.what() +
                " (a smaller -b/--batch, -p/--prompt, -n/--gen or --context needs less)");
  }
  // each rank its own tokens; rank 0's are the single-process run's
  const uint64_t rank_salt = comm ? uint64_t(comm->rank()) * 0x9e3779b97f4a7c15ull : 0;
  std::mt19937_64 rng(seed ^ uint64_t(r.n * 1000003 + B) ^ rank_salt);
  ForwardOptions fo;
  if (ep) fo.moe = ep->hook();
  auto tokens = [&](int64_t per_seq) {
    std::vector<int32_t> t(size_t(B * per_seq));
    for (int32_t& x : t) x = int32_t(rng() % uint64_t(c.vocab_size));
    return t;
  };
  std::vector<int64_t> slots(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) slots[size_t(b)] = b;
  auto offsets = [&](int64_t per_seq) {
    std::vector<int64_t> cu(size_t(B + 1));
    for (int64_t b = 0; b <= B; ++b) cu[size_t(b)] = b * per_seq;
    return cu;
  };
  // the logits of every forward land in one buffer on the head's device, where generate keeps them to sample
  // (forward_into: no allocation, and no copy to the host, per step)
  const Tensor logits = Tensor::uninitialized(DType::f32, {B, c.vocab_size}, m.placement().head);
  // One run; with `prof`, its timed part (not the tg row's context prefill) runs under an OpProfiler; with
  // `ep_into`, the EP numbers of its timed part are added there.
  std::optional<OpProfiler> profiler;
  auto one = [&](bool prof = false, dist::EpTotals* ep_into = nullptr) -> double {
    for (int64_t b = 0; b < B; ++b) cache->reset(b);
    if (r.kind == "pp") {
      const std::vector<int32_t> t = tokens(r.n);
      const std::vector<int64_t> cu = offsets(r.n);
      if (prof) profiler.emplace();
      const dist::EpTotals before = ep ? ep->totals() : dist::EpTotals{};
      const auto t0 = std::chrono::steady_clock::now();
      forward_into(m, *cache, {t, cu, slots}, logits, fo, ctx);
      synchronize(dev, ctx);
      const double sec = seconds_since(t0);
      if (ep_into) add_since(*ep_into, ep->totals(), before);
      return sec;
    }
    if (r.context > 0) {  // untimed: groups of sequences of at most kContextTokens tokens per forward
      const std::vector<int32_t> t = tokens(r.context);
      const int64_t group = std::max<int64_t>(1, kContextTokens / r.context);
      for (int64_t b0 = 0; b0 < B; b0 += group) {
        const int64_t nb = std::min(group, B - b0);
        std::vector<int64_t> cu(size_t(nb + 1));
        for (int64_t b = 0; b <= nb; ++b) cu[size_t(b)] = b * r.context;
        forward_into(m, *cache,
                     {std::span<const int32_t>(t.data() + b0 * r.context, size_t(nb * r.context)), cu,
                      std::span<const int64_t>(slots.data() + b0, size_t(nb))},
                     logits.view().slice(0, 0, nb), fo, ctx);
      }
    }
    const std::vector<int32_t> steps = tokens(r.n);  // [n][B]
    const std::vector<int64_t> cu = offsets(1);
    synchronize(dev, ctx);
    if (prof) profiler.emplace();
    const dist::EpTotals before = ep ? ep->totals() : dist::EpTotals{};
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < r.n; ++i)
      forward_into(m, *cache, {std::span<const int32_t>(steps.data() + i * B, size_t(B)), cu, slots}, logits, fo, ctx);
    synchronize(dev, ctx);
    const double sec = seconds_since(t0);
    if (ep_into) add_since(*ep_into, ep->totals(), before);
    return sec;
  };
  for (int i = 0; i < warmup; ++i) one();
  if (ep) r.ep.emplace(BenchEpRow{{}, {}, reps, r.steps()});
  for (int i = 0; i < reps; ++i) r.seconds.push_back(one(false, ep ? &r.ep->totals : nullptr));
  if (profile) {
    const double s = one(true);
    r.profile = RowProfile{profiler->results(), 1e3 * s, r.steps(), {}};
    profiler.reset();
  }
  const DeviceMemoryStats s = device_memory_stats(dev);
  r.peak_bytes = s.peak_bytes(), r.tensor_peak_bytes = s.tensor_peak_bytes, r.pool_peak_bytes = s.pool_peak_bytes;
  if (!ep) return;
  // The job's numbers: [seconds per repetition (reps), the 3 peaks, the 6 phase times] -> max over ranks.
  std::vector<double> v = r.seconds;
  for (size_t b : {r.peak_bytes, r.tensor_peak_bytes, r.pool_peak_bytes}) v.push_back(double(b));
  for (double x : r.ep->seconds()) v.push_back(x);
  const std::vector<double> mx = max_over_ranks(*comm, v);
  const size_t n = r.seconds.size();
  std::copy_n(mx.begin(), n, r.seconds.begin());
  r.peak_bytes = size_t(mx[n]), r.tensor_peak_bytes = size_t(mx[n + 1]), r.pool_peak_bytes = size_t(mx[n + 2]);
  std::copy_n(mx.begin() + ptrdiff_t(n + 3), r.ep->max_seconds.size(), r.ep->max_seconds.begin());
}

double mib(size_t b) { return double(b) / double(1 << 20); }

// The bytes of a model's weights: its checkpoint's tensors, or those a random model made.
size_t weight_bytes(const model::Model& m, const model::SchemaOptions& random_schema) {
  size_t b = 0;
  if (const model::ModelFiles* files = m.files()) {
    for (const model::TensorSpec& s : files->schema) b += files->checkpoint.info(s.name).nbytes;
    return b;
  }
  for (const model::TensorSpec& s : model::checkpoint_schema(m.config(), random_schema)) {
    size_t n = size_t(dtype_size(model::random_init(s, m.config()).dtype));
    for (int64_t d : s.shape) n *= size_t(d);
    b += n;
  }
  return b;
}

// ranks: --ep's world size (0 without --ep): the batch is then per rank, tokens/s the job's (ranks x one rank's)
// beside one rank's, and the peak the largest rank's.
std::string table(const std::string& name, Device dev, const std::vector<BenchRow>& rows, int ranks = 0) {
  const bool predicted = std::any_of(rows.begin(), rows.end(), [](const BenchRow& r) { return r.predicted_ms.has_value(); });
  const std::string per_rank_head = ranks ? fmt::format(" {:>20} |", "tokens/s per rank") : "";
  std::string s = fmt::format("| {:<24} | {:<7} | {:>12} | {:>6} | {:>20} |{} {:>30} | {:>10} |{}\n", "model", "device",
                              "test", ranks ? "b/rank" : "batch", ranks ? "tokens/s (job)" : "tokens/s", per_rank_head,
                              "ms/step (min-max)", ranks ? "peak MiB/r" : "peak MiB",
                              predicted ? " predicted ms | floor ms |" : "");
  s += fmt::format("|{:-<26}|{:-<9}|{:->14}|{:->8}|{:->22}|{}{:->32}|{:->12}|{}\n", "", "", "", "", "",
                   ranks ? fmt::format("{:->22}|", "") : "", "", "", predicted ? "-------------:|---------:|" : "");
  for (const BenchRow& r : rows) {
    const double st = r.steps();
    const double job = ranks ? double(ranks) : 1.0;
    const std::string per_rank =
        ranks ? fmt::format(" {:>20} |", fmt::format("{:.1f} ± {:.1f}", r.tokens_per_s(), r.tokens_per_s_sd())) : "";
    s += fmt::format("| {:<24} | {:<7} | {:>12} | {:>6} | {:>20} |{} {:>30} | {:>10.1f} |", name.substr(0, 24),
                     to_string(dev), r.test(), r.batch,
                     fmt::format("{:.1f} ± {:.1f}", job * r.tokens_per_s(), job * r.tokens_per_s_sd()), per_rank,
                     fmt::format("{:.3f} ({:.3f}-{:.3f})", r.ms_per_step(), 1e3 * r.min_s() / st, 1e3 * r.max_s() / st),
                     mib(r.peak_bytes));
    if (predicted)
      s += fmt::format(" {:>12} | {:>8} |", r.predicted_ms ? fmt::format("{:.3f}", *r.predicted_ms) : "",
                       r.floor_ms ? fmt::format("{:.3f}", *r.floor_ms) : "");
    s += "\n";
  }
  return s;
}

// With --ep (ranks > 0): batch, tokens and tokens_per_s are one rank's; "ep" has the job's and the EP numbers.
nlohmann::json row_json(const BenchRow& r, int ranks = 0) {
  nlohmann::json j = {{"test", r.test()},
                      {"kind", r.kind},
                      {"n", r.n},
                      {"batch", r.batch},
                      {"context", r.context},
                      {"tokens", r.tokens()},
                      {"seconds", r.seconds},
                      {"tokens_per_s", r.tokens_per_s()},
                      {"tokens_per_s_sd", r.tokens_per_s_sd()},
                      {"ms_per_step", r.ms_per_step()},
                      {"ms_per_step_min", 1e3 * r.min_s() / r.steps()},
                      {"ms_per_step_max", 1e3 * r.max_s() / r.steps()},
                      {"peak_bytes", r.peak_bytes},
                      {"tensor_peak_bytes", r.tensor_peak_bytes},
                      {"pool_peak_bytes", r.pool_peak_bytes}};
  if (r.predicted_ms) j["predicted_ms"] = *r.predicted_ms;
  if (r.floor_ms) j["floor_ms"] = *r.floor_ms;
  if (r.profile) j["profile"] = profile_json(*r.profile);
  if (r.ep) j["ep"] = ep_row_json(*r.ep, ranks, double(ranks) * r.tokens_per_s());
  return j;
}

// With --ep (ranks > 0): the columns of row_json, then bench_ep.h's.
std::string csv(const std::string& name, Device dev, const std::vector<BenchRow>& rows, int ranks = 0) {
  std::string s =
      "model,device,test,kind,n,batch,context,tokens_per_s,tokens_per_s_sd,ms_per_step,ms_per_step_min,ms_per_step_max,"
      "peak_bytes,tensor_peak_bytes,pool_peak_bytes,predicted_ms,floor_ms" +
      (ranks ? ep_csv_header() : std::string()) + "\n";
  auto opt = [](const std::optional<double>& v) { return v ? fmt::format("{}", *v) : std::string(); };
  for (const BenchRow& r : rows)
    s += fmt::format("\"{}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}{}\n", name, to_string(dev), r.test(),
                     r.kind, r.n, r.batch, r.context, r.tokens_per_s(), r.tokens_per_s_sd(), r.ms_per_step(),
                     1e3 * r.min_s() / r.steps(), 1e3 * r.max_s() / r.steps(), r.peak_bytes, r.tensor_peak_bytes,
                     r.pool_peak_bytes, opt(r.predicted_ms), opt(r.floor_ms),
                     r.ep ? ep_csv_fields(*r.ep, ranks, double(ranks) * r.tokens_per_s()) : "");
  return s;
}

void write_out(const std::string& path, const std::string& text, const std::string& flag) {
  if (path.empty()) return;
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    return;
  }
  std::ofstream f(path);
  f << text;
  if (!f.flush()) throw Error("bench: " + flag + " '" + path + "': cannot write: " + std::strerror(errno));
}

// Whether the model's routed experts are MXFP4 (a checkpoint's experts run as stored).
bool has_mxfp4_experts(const model::Model& m) {
  for (const model::LayerWeights& l : m.weights().layers)
    if (l.ffn.moe && !l.ffn.experts.empty()) return l.ffn.experts[0].gate.is_mxfp4();
  return false;
}

// The most tokens one forward of a row puts on a rank (the EP steps' S, dist/moe.h).
int64_t max_rank_tokens(const std::vector<BenchRow>& rows) {
  int64_t s = 1;
  for (const BenchRow& r : rows) {
    s = std::max(s, r.kind == "pp" ? r.batch * r.n : r.batch);
    if (r.kind == "tg" && r.context > 0)  // the untimed prefill's groups of whole sequences
      s = std::max(s, std::min(r.batch, std::max<int64_t>(1, kContextTokens / r.context)) * r.context);
  }
  return s;
}

// Loads the model, runs the rows and reports (comm: the --ep transport, or null).
int bench_and_report(const BenchCmdOptions& opt, const CheckedFlags& f, dist::Comm* comm) {
  using namespace kimi::model;
  const Device dev = f.device;
  const int ranks = comm ? comm->size() : 0;
  const auto t0 = std::chrono::steady_clock::now();
  const Model model = opt.random ? Model::random(f.config, dev, f.seed, f.schema) : Model(opt.model, dev);
  synchronize(dev);
  const double load_s = seconds_since(t0);
  // The table goes to stdout, or to stderr when stdout carries the JSON / CSV; under --ep, rank 0's alone.
  const ReportOut report(comm, opt.json == "-" || opt.csv == "-" ? stderr : stdout, "bench");
  FILE* table_out = report.get();
  const Config& c = model.config();
  fmt::print(table_out, "model      {}{} ({} layers, hidden {}, vocab {})\n", opt.model,
             opt.random ? fmt::format(" (random weights, seed {}, {} experts)", f.seed, f.schema.mxfp4_experts ? "MXFP4" : "bf16")
                        : "",
             c.num_hidden_layers, c.hidden_size, c.vocab_size);
  fmt::print(table_out, "placement  {}\n", model.placement().summary());
  fmt::print(table_out, "weights    {:.1f} MiB{} ({} in {:.2f} s)\n", mib(weight_bytes(model, f.schema)),
             dev == Device::cpu() ? "" : fmt::format(", {:.1f} MiB of them on {}", mib(model.device_weight_bytes()), to_string(dev)),
             opt.random ? "made" : "opened", load_s);
  fmt::print(table_out, "timing     median of {} run(s) after {} untimed warm-up run(s) per row{}\n", opt.repetitions,
             opt.warmup, comm ? "; a run's time is the slowest rank's" : "");

  std::vector<BenchRow> rows;
  for (int64_t n : f.prompt)
    for (int64_t b : f.batch) rows.push_back({"pp", n, b, 0, {}, 0, 0, 0, {}, {}, {}, {}});
  for (int64_t n : f.gen)
    for (int64_t b : f.batch) rows.push_back({"tg", n, b, opt.context, {}, 0, 0, 0, {}, {}, {}, {}});
  Context ctx;
  ctx.cpu_threads = opt.threads;
  std::unique_ptr<dist::EpModel> ep;
  if (comm) {
    const int64_t s_max = max_rank_tokens(rows);
    ep = std::make_unique<dist::EpModel>(*comm, model, s_max, nullptr, ctx);  // collective
    int64_t moe_layers = 0;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) moe_layers += c.is_moe_layer(i) ? 1 : 0;
    const int64_t dl = c.routed_expert_hidden_size.value_or(c.hidden_size);
    fmt::print(table_out, "ep         {} ranks ({}), round-robin placement, every expert resident on every rank\n",
               comm->size(), comm->name());
    fmt::print(table_out,
               "ep batch   -b is the batch PER RANK: each rank runs b sequences of its own, the job {} x b\n",
               comm->size());
    fmt::print(table_out, "ep buffers {} tokens per rank per forward at most: {:.1f} MiB of f32 rows per rank "
               "({} MoE layers x 4 x [{} x {}, {}])\n", s_max,
               mib(size_t(moe_layers * 4 * s_max * c.num_experts_per_token * dl) * sizeof(float)), moe_layers, s_max,
               c.num_experts_per_token, dl);
  }
  std::fflush(table_out);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!report.quiet())
      std::fprintf(stderr, "bench: [%zu/%zu] %s batch %lld%s\n", i + 1, rows.size(), rows[i].test().c_str(),
                   static_cast<long long>(rows[i].batch), comm ? " per rank" : "");
    run_row(model, rows[i], opt.warmup, opt.repetitions, f.seed, opt.profile, ctx, comm, ep.get());
  }
  if (f.chip) {  // the cost model's step time for each row (kimi/model/cost.h)
    model::WeightFormat wf = model::default_weight_format(c);
    wf.mxfp4_experts = opt.random ? f.schema.mxfp4_experts : has_mxfp4_experts(model);
    for (BenchRow& r : rows) {
      model::Workload w;
      w.batch = r.batch;
      w.new_tokens_per_seq = r.kind == "pp" ? r.n : 1;
      w.context = r.kind == "pp" ? 0 : r.context + r.n / 2;  // a tg row's steps, at their middle context
      w.activations = model.activation_dtype();
      const model::ForwardCost cost = model::forward_cost(c, w, wf);
      const model::Prediction p = model::predict(cost, *f.chip);
      r.predicted_ms = 1e3 * p.seconds;
      if (r.profile)
        for (size_t k = 0; k < cost.ops.size(); ++k) r.profile->predicted_ms[cost.ops[k].layer_kind] += 1e3 * p.ops[k].seconds;
      r.floor_ms = 1e3 * (r.kind == "pp" ? p.compute_seconds : p.memory_seconds);
    }
  }
  const std::string name = opt.random ? opt.model + " (random)" : opt.model;
  std::fputs(table(name, dev, rows, ranks).c_str(), table_out);
  if (comm) {
    std::vector<EpTableRow> ep_rows;
    for (const BenchRow& r : rows) ep_rows.push_back({r.test(), r.batch, &*r.ep});
    fmt::print(table_out, "ep per row (summed over the timed runs and the MoE layers; imbalance: slowest rank / mean "
               "per MoE layer step, averaged; ms: per step, rank 0 / the slowest rank)\n");
    std::fputs(ep_table(ep_rows).c_str(), table_out);
  }
  // Whether the tg rows' decode steps replayed CUDA graphs, and why not when they did not.
  const model::DecodeGraphStatus graphs = model.decode_graph_status();
  fmt::print(table_out, "graphs     decode {}\n", graphs.summary);
  for (const BenchRow& r : rows)
    if (r.profile)
      std::fputs(profile_table(r.test() + " batch " + std::to_string(r.batch), *r.profile).c_str(), table_out);

  nlohmann::json j = {{"model", opt.model},
                      {"random", opt.random},
                      {"device", to_string(dev)},
                      {"placement", model.placement().summary()},
                      {"decode_graphs", graphs.summary},
                      {"layers", c.num_hidden_layers},
                      {"hidden", c.hidden_size},
                      {"weight_bytes", weight_bytes(model, f.schema)},
                      {"device_weight_bytes", model.device_weight_bytes()},
                      {"load_seconds", load_s},
                      {"threads", opt.threads},
                      {"seed", f.seed},
                      {"repetitions", opt.repetitions},
                      {"warmup", opt.warmup},
                      {"rows", nlohmann::json::array()}};
  if (comm)
    j["ep"] = {{"ranks", comm->size()},
               {"transport", comm->name()},
               {"placement", "round-robin"},
               {"batch_is_per_rank", true},
               {"max_rank_tokens", max_rank_tokens(rows)}};
  for (const BenchRow& r : rows) j["rows"].push_back(row_json(r, ranks));
  if (report.quiet()) return 0;
  write_out(opt.json, j.dump(2) + "\n", "--json");
  write_out(opt.csv, csv(name, dev, rows, ranks), "--csv");
  return 0;
}

}  // namespace

int run_bench(const BenchCmdOptions& opt) {
  const CheckedFlags f = check_flags(opt);
  return run_ep_job("bench", opt.ep, [&](dist::Comm* comm) { return bench_and_report(opt, f, comm); });
}

}  // namespace kimi::cli
