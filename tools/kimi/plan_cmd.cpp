// `kimi plan`: checks every flag, computes the prefill and decode steps' costs (kimi/model/cost.h), predicts them on
// each chip and prints a table, and optionally JSON / CSV. Units: decimal GB (1e9 bytes), GB/s, TFLOP/s.
#include "kimi/plan_cmd.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <tuple>
#include <nlohmann/json.hpp>

#include "kimi/error.h"
#include "kimi/model/config.h"
#include "kimi/model/cost.h"
#include "kimi/model/generate.h"
#include "plan_ep.h"

namespace kimi::cli {
namespace {
using namespace kimi::model;
using json = nlohmann::json;

std::string named_list() {
  std::string s;
  for (std::string_view n : named_config_names()) s += std::string(n) + ", ";
  return s;
}

int64_t parse_int(const std::string& s, const std::string& flag, int64_t lo, int64_t hi, const std::string& why = "") {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
    throw Error("plan: " + flag + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" +
                why + ", got '" + s + "'");
  return v;
}

double parse_positive(const std::string& s, const std::string& flag, const std::string& unit) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || !(v > 0))
    throw Error("plan: " + flag + ": expected a finite number > 0 (" + unit + "), got '" + s + "'");
  return v;
}

// Why `path` cannot be written, or "". Creates nothing.
std::string output_problem(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return "expected a file path or '-' (stdout), got an empty one";
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) return "is a directory";
    if (::access(path.c_str(), W_OK) != 0) return "cannot write it: " + std::string(std::strerror(errno));
    return "";
  }
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const fs::file_status ds = fs::status(dir, ec);
  if (!fs::exists(ds)) return "cannot be created: '" + dir.string() + "' does not exist";
  if (!fs::is_directory(ds)) return "cannot be created: '" + dir.string() + "' is not a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "cannot be created in '" + dir.string() + "': " + std::string(std::strerror(errno));
  return "";
}

struct Plan {
  Config config;
  std::string source;
  WeightFormat weights;
  std::vector<Chip> chips;
  Workload prefill, decode;
  double target_tps = 0;  // 0: none
  std::optional<EpPlan> ep;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == ',') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

// The --ep flags but the rank list (which needs the config's expert count).
EpPlan check_ep_flags(const PlanOptions& opt) {
  if (opt.ep.empty()) {
    if (!opt.ep_given.empty())
      throw Error("plan: " + opt.ep_given[0] +
                  ": expected --ep N[,N...] with it (it describes an expert-parallel plan), got " + opt.ep_given[0] +
                  " without --ep");
    return {};
  }
  if (opt.per_op)
    throw Error("plan: --per-op: expected no --per-op with --ep (the EP table has no per-op rows), got both");
  if (!opt.target_tps.empty())
    throw Error("plan: --target-tps: expected no --target-tps with --ep (the EP table predicts speeds), got both");
  EpPlan e;
  const int64_t limit = context_limit(Config{});
  e.decode.batch = parse_int(opt.ep_batch, "--ep-batch", 1, limit, " (decode sequences per GPU)");
  e.redundant = parse_int(opt.ep_redundant, "--ep-redundant", 0, int64_t(1) << 20, " (replica slots over all GPUs)");
  e.links.nvlink_bytes_per_s = parse_positive(opt.nvlink_gbs, "--nvlink-gbs", "GB/s per GPU per direction") * 1e9;
  e.links.ib_bytes_per_s = parse_positive(opt.ib_gbs, "--ib-gbs", "GB/s per GPU per direction") * 1e9;
  e.links.gpus_per_node = parse_int(opt.gpus_per_node, "--gpus-per-node", 1, 1024);
  if (!opt.ep_published.empty())
    e.published = parse_positive(opt.ep_published, "--ep-published", "decode tokens/s per GPU");
  return e;
}

// Every flag, before anything is computed or written.
Plan check_flags(const PlanOptions& opt) {
  namespace fs = std::filesystem;
  Plan p;
  const int64_t limit = context_limit(Config{});  // 2^20 tokens, the same for every config (generate.h)
  for (const std::string& n : opt.chips) {
    const auto names = named_chips();
    const auto it = std::find_if(names.begin(), names.end(), [&](const Chip& c) { return c.name == n; });
    if (it == names.end())
      throw Error("plan: --chip: expected h200, h100 or b200 (or --bandwidth and --tflops for another chip), got '" + n + "'");
    if (std::none_of(p.chips.begin(), p.chips.end(), [&](const Chip& c) { return c.name == n; })) p.chips.push_back(*it);
  }
  if (opt.bandwidth.empty() != opt.tflops.empty())
    throw Error(std::string("plan: ") + (opt.bandwidth.empty() ? "--tflops" : "--bandwidth") +
                ": expected --bandwidth and --tflops together (a chip given on the command line needs both), got " +
                (opt.bandwidth.empty() ? "--tflops " + opt.tflops + " alone" : "--bandwidth " + opt.bandwidth + " alone"));
  if (!opt.bandwidth.empty()) {
    const double bw = parse_positive(opt.bandwidth, "--bandwidth", "GB/s");
    const double tf = parse_positive(opt.tflops, "--tflops", "dense bf16 TFLOP/s");
    p.chips.push_back({"custom", bw * 1e9, tf * 1e12, 0,
                       fmt::format("--bandwidth {} GB/s --tflops {} TFLOP/s", opt.bandwidth, opt.tflops)});
  }
  if (p.chips.empty()) p.chips.push_back(named_chip("h200"));

  const int64_t batch = parse_int(opt.batch, "--batch", 1, limit);
  const int64_t prompt = parse_int(opt.prompt, "--prompt", 1, limit, " (the context limit)");
  const int64_t context =
      opt.context.empty() ? prompt : parse_int(opt.context, "--context", 0, limit - 1, " (the context limit less the new token)");
  if (!opt.target_tps.empty()) p.target_tps = parse_positive(opt.target_tps, "--target-tps", "decode tokens/s per sequence");
  DType act = DType::bf16;
  if (opt.dtype == "f32") {
    act = DType::f32;
  } else if (opt.dtype == "f16") {
    act = DType::f16;
  } else if (opt.dtype != "bf16") {
    throw Error("plan: --dtype: expected bf16, f16 or f32, got '" + opt.dtype + "'");
  }
  if (opt.experts != "auto" && opt.experts != "bf16" && opt.experts != "mxfp4")
    throw Error("plan: --experts: expected auto, bf16 or mxfp4, got '" + opt.experts + "'");
  for (const auto& [flag, path, given] : {std::tuple{"--json", &opt.json, opt.json_given},
                                          std::tuple{"--csv", &opt.csv, opt.csv_given}}) {
    if (!given && path->empty()) continue;
    if (*path == "-") continue;
    if (const std::string why = output_problem(*path); !why.empty())
      throw Error(std::string("plan: ") + flag + " '" + *path + "': " + why);
  }
  std::optional<EpPlan> ep;
  if (!opt.ep.empty() || !opt.ep_given.empty()) ep = check_ep_flags(opt);
  if (opt.json == "-" && opt.csv == "-")
    throw Error("plan: --csv: expected a file path when --json is '-' (one of them may take stdout), got '-'");
  if (!opt.json.empty() && opt.json == opt.csv)
    throw Error("plan: --csv: expected a path other than --json's, got '" + opt.csv + "'");

  // The config last: it is the one flag that reads a file.
  const auto names = named_config_names();
  std::error_code ec;
  if (std::find(names.begin(), names.end(), opt.config) != names.end()) {
    p.config = named_config(opt.config);
  } else if (fs::exists(opt.config, ec)) {
    try {
      p.config = fs::is_directory(opt.config, ec) ? load_model_config(opt.config) : load_config(opt.config);
    } catch (const Error& e) {
      throw Error(std::string("plan: config: ") + e.what());
    }
  } else {
    throw Error("plan: config: expected " + named_list() + "a checkpoint directory or a config.json path, got '" +
                opt.config + "' (no such file)");
  }
  p.source = opt.config;
  p.weights = default_weight_format(p.config);
  if (opt.experts != "auto") p.weights.mxfp4_experts = opt.experts == "mxfp4";
  if (p.weights.mxfp4_experts) {
    const Config& c = p.config;
    const int64_t dl = c.routed_expert_hidden_size.value_or(c.hidden_size);
    if (c.num_experts == 0)
      throw Error("plan: --experts: expected auto or bf16 for " + opt.config + " (it has no routed experts), got mxfp4");
    if (dl % 32 != 0 || c.moe_intermediate_size % 32 != 0)
      throw Error("plan: --experts: MXFP4 experts need the expert widths divisible by 32, got latent " + std::to_string(dl) +
                  " and moe_intermediate_size " + std::to_string(c.moe_intermediate_size));
  }
  p.prefill = {batch, prompt, 0, act};
  p.decode = {batch, 1, context, act};
  if (ep) {
    const int64_t E = p.config.num_experts;
    if (E == 0)
      throw Error("plan: --ep: expected a config with routed experts (they are what the GPUs share), got " +
                  opt.config + " (no routed experts)");
    for (const std::string& n : split_commas(opt.ep)) {
      const int64_t v = parse_int(n, "--ep", 1, E, " (GPUs, at most the " + std::to_string(E) + " routed experts)");
      if (std::find(ep->ranks.begin(), ep->ranks.end(), v) == ep->ranks.end()) ep->ranks.push_back(v);
    }
    ep->config = p.config;
    ep->source = p.source;
    ep->weights = p.weights;
    ep->chip = p.chips[0];
    ep->prefill = p.prefill;
    ep->decode = {ep->decode.batch, 1, context, act};
    ep->json = opt.json;
    ep->csv = opt.csv;
    p.ep = std::move(ep);
  }
  return p;
}

std::string gb(double bytes) { return fmt::format("{:.3f}", bytes / 1e9); }

struct Step {
  const char* name;
  ForwardCost cost;
  std::vector<Prediction> pred;  // one per chip
};

// The fraction of the step's predicted time spent in ops bound by compute.
double compute_bound_share(const Prediction& p) {
  double t = 0;
  for (const OpTime& o : p.ops)
    if (o.compute_bound) t += o.seconds;
  return p.seconds > 0 ? t / p.seconds : 0;
}

json op_json(const OpCost& o, const std::vector<Prediction>& preds, size_t i) {
  json j = {{"layer_kind", o.layer_kind}, {"op", o.op}, {"layer", o.layer}, {"bytes_weights", o.bytes_weights},
            {"bytes_activations", o.bytes_activations}, {"bytes_cache", o.bytes_cache}, {"flops", o.flops}};
  for (const Prediction& p : preds) {
    j["seconds"][p.chip.name] = p.ops[i].seconds;
    j["compute_bound"][p.chip.name] = p.ops[i].compute_bound;
  }
  return j;
}

json plan_json(const Plan& p, const std::vector<Step>& steps) {
  const Config& c = p.config;
  int64_t kda = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) kda += c.is_kda_layer(i);
  json j;
  j["config"] = {{"source", p.source},
                 {"layers", c.num_hidden_layers},
                 {"kda_layers", kda},
                 {"mla_layers", c.num_hidden_layers - kda},
                 {"hidden_size", c.hidden_size},
                 {"vocab_size", c.vocab_size},
                 {"num_experts", c.num_experts},
                 {"num_experts_per_token", c.num_experts_per_token},
                 {"weights_dtype", std::string(dtype_name(p.weights.dense))},
                 {"mxfp4_experts", p.weights.mxfp4_experts},
                 {"weights_resident_bytes", steps[0].cost.weights_resident}};
  for (const Chip& ch : p.chips)
    j["chips"].push_back({{"name", ch.name}, {"hbm_bytes_per_s", ch.hbm_bytes_per_s},
                          {"bf16_flops_per_s", ch.bf16_flops_per_s}, {"memory_bytes", ch.memory_bytes},
                          {"source", ch.source}});
  for (const Step& s : steps) {
    const ForwardCost& f = s.cost;
    json st = {{"workload", {{"batch", f.workload.batch}, {"new_tokens_per_seq", f.workload.new_tokens_per_seq},
                             {"context", f.workload.context}, {"activations", std::string(dtype_name(f.workload.activations))}}},
               {"tokens", f.tokens()},
               {"bytes_weights", f.bytes_weights},
               {"bytes_activations", f.bytes_activations},
               {"bytes_cache", f.bytes_cache},
               {"bytes", f.bytes()},
               {"flops", f.flops},
               {"touched_experts", f.touched_experts},
               {"touched_expert_fraction", f.touched_expert_fraction},
               {"cache_bytes_per_seq", f.cache_per_seq}};
    for (const Prediction& pr : s.pred)
      st["predictions"].push_back({{"chip", pr.chip.name}, {"seconds", pr.seconds}, {"memory_seconds", pr.memory_seconds},
                                   {"compute_seconds", pr.compute_seconds}, {"tokens_per_s", pr.tokens_per_s},
                                   {"steps_per_s", pr.steps_per_s}, {"compute_bound_share", compute_bound_share(pr)}});
    for (size_t i = 0; i < f.ops.size(); ++i) st["ops"].push_back(op_json(f.ops[i], s.pred, i));
    j["steps"][s.name] = st;
  }
  if (p.target_tps > 0) {
    const ForwardCost& d = steps[1].cost;
    j["target"] = {{"decode_tokens_per_s_per_seq", p.target_tps},
                   {"decode_tokens_per_s_total", p.target_tps * double(d.workload.batch)},
                   {"bandwidth_bytes_per_s", bandwidth_for(d, p.target_tps)},
                   {"flops_per_s", d.flops * p.target_tps}};
  }
  return j;
}

std::string plan_csv(const Plan& p, const std::vector<Step>& steps) {
  std::string s = "step,layer,layer_kind,op,bytes_weights,bytes_activations,bytes_cache,flops";
  for (const Chip& c : p.chips) s += "," + c.name + "_seconds";
  s += "\n";
  for (const Step& st : steps)
    for (size_t i = 0; i < st.cost.ops.size(); ++i) {
      const OpCost& o = st.cost.ops[i];
      s += fmt::format("{},{},{},{},{},{},{},{}", st.name, o.layer, o.layer_kind, o.op, o.bytes_weights,
                       o.bytes_activations, o.bytes_cache, o.flops);
      for (const Prediction& pr : st.pred) s += fmt::format(",{:.6g}", pr.ops[i].seconds);
      s += "\n";
    }
  return s;
}


void print_table(const Plan& p, const std::vector<Step>& steps, bool per_op) {
  const Config& c = p.config;
  int64_t kda = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) kda += c.is_kda_layer(i);
  const ForwardCost& pre = steps[0].cost;
  const ForwardCost& dec = steps[1].cost;
  fmt::print("model      {} ({} layout): {} layers ({} KDA, {} MLA), hidden {}, vocab {}\n", p.source,
             c.k3_wrapper ? "K3" : "Kimi-Linear", c.num_hidden_layers, kda, c.num_hidden_layers - kda, c.hidden_size,
             c.vocab_size);
  fmt::print("weights    {} GB stored: {} weights{}\n", gb(pre.weights_resident), dtype_name(p.weights.dense),
             c.num_experts ? fmt::format(", routed experts {} ({} experts, top-{}, {} shared)",
                                         p.weights.mxfp4_experts ? "MXFP4" : dtype_name(p.weights.dense), c.num_experts,
                                         c.num_experts_per_token, c.num_shared_experts)
                           : std::string());
  fmt::print("prefill    {} sequence(s) x {} new tokens from an empty cache; activations and caches {}\n",
             pre.workload.batch, pre.workload.new_tokens_per_seq, dtype_name(pre.workload.activations));
  fmt::print("decode     {} sequence(s) x 1 new token, {} tokens in each cache\n", dec.workload.batch, dec.workload.context);
  fmt::print("\n{:<8} {:>8} {:>11} {:>11} {:>11} {:>11} {:>12} {:>16}\n", "step", "tokens", "weights GB", "activ. GB",
             "cache GB", "total GB", "GFLOP", "experts/layer");
  for (const Step& s : steps) {
    const ForwardCost& f = s.cost;
    fmt::print("{:<8} {:>8} {:>11} {:>11} {:>11} {:>11} {:>12.1f} {:>16}\n", s.name, f.tokens(), gb(f.bytes_weights),
               gb(f.bytes_activations), gb(f.bytes_cache), gb(f.bytes()), f.flops / 1e9,
               c.num_experts ? fmt::format("{:.1f} of {}", f.touched_experts, c.num_experts) : std::string("-"));
  }
  // Bytes and FLOPs by layer kind.
  fmt::print("\n{:<10} {:>13} {:>15} {:>13} {:>15}\n", "kind", "prefill GB", "prefill GFLOP", "decode GB", "decode GFLOP");
  std::vector<std::string> kinds;
  std::map<std::string, std::array<double, 4>> by_kind;
  for (size_t s = 0; s < 2; ++s)
    for (const OpCost& o : steps[s].cost.ops) {
      if (!by_kind.count(o.layer_kind)) kinds.push_back(o.layer_kind);
      by_kind[o.layer_kind][2 * s] += o.bytes();
      by_kind[o.layer_kind][2 * s + 1] += o.flops;
    }
  for (const std::string& k : kinds) {
    const auto& v = by_kind[k];
    fmt::print("{:<10} {:>13} {:>15.1f} {:>13} {:>15.3f}\n", k, gb(v[0]), v[1] / 1e9, gb(v[2]), v[3] / 1e9);
  }
  // Memory, then the roofline on each chip.
  const double need = pre.weights_resident + double(dec.workload.batch) * dec.cache_per_seq;
  fmt::print("\nmemory     {} GB of weights + {} GB of cache ({} sequence(s) x {} GB at {} tokens) = {} GB\n",
             gb(pre.weights_resident), gb(double(dec.workload.batch) * dec.cache_per_seq), dec.workload.batch,
             gb(dec.cache_per_seq), dec.workload.context + 1, gb(need));
  fmt::print("\n{:<8} {:>9} {:>9} {:>8} {:>12} {:>13} {:>8} {:>14} {:>14} {:>12} {:>8}\n", "chip", "GB/s", "TFLOP/s",
             "fits", "prefill ms", "prefill tok/s", "compute", "decode ms/step", "tok/s per seq", "tok/s total",
             "compute");
  for (size_t k = 0; k < p.chips.size(); ++k) {
    const Chip& ch = p.chips[k];
    const Prediction& a = steps[0].pred[k];
    const Prediction& b = steps[1].pred[k];
    const std::string fits = ch.memory_bytes <= 0 ? "?" : need <= ch.memory_bytes ? "yes" : "no";
    fmt::print("{:<8} {:>9.0f} {:>9.0f} {:>8} {:>12.3f} {:>13.0f} {:>7.0f}% {:>14.3f} {:>14.1f} {:>12.1f} {:>7.0f}%\n",
               ch.name, ch.hbm_bytes_per_s / 1e9, ch.bf16_flops_per_s / 1e12, fits, a.seconds * 1e3, a.tokens_per_s,
               100 * compute_bound_share(a), b.seconds * 1e3, b.steps_per_s, b.tokens_per_s, 100 * compute_bound_share(b));
  }
  fmt::print("time per op = max(bytes / bandwidth, FLOPs / peak), summed over the ops of the step; compute: the share of\n"
             "that time in compute-bound ops; fits: weights + cache within one chip's memory\n");
  if (p.target_tps > 0) {
    const double bw = bandwidth_for(dec, p.target_tps), fl = dec.flops * p.target_tps;
    fmt::print("\ntarget     {} decode tokens/s per sequence ({} in all at batch {}) needs {:.0f} GB/s of HBM bandwidth:\n"
               "           {} GB per decode step x {} steps/s, compute ignored (the step needs {:.2f} TFLOP/s then)\n",
               p.target_tps, p.target_tps * double(dec.workload.batch), dec.workload.batch, bw / 1e9, gb(dec.bytes()),
               p.target_tps, fl / 1e12);
    for (const Chip& ch : p.chips)
      fmt::print("           {}: {:.0f}% of its {:.0f} GB/s{}\n", ch.name, 100 * bw / ch.hbm_bytes_per_s, ch.hbm_bytes_per_s / 1e9,
                 fl > ch.bf16_flops_per_s
                     ? fmt::format("; the compute exceeds its {:.0f} TFLOP/s: no bandwidth reaches the target",
                                   ch.bf16_flops_per_s / 1e12)
                     : "");
  }
  if (!per_op) return;
  fmt::print("\nper op on {}:\n{:<8} {:>5} {:<10} {:<20} {:>12} {:>12} {:>12} {:>14} {:>11} {:>8}\n", p.chips[0].name, "step",
             "layer", "kind", "op", "weights MB", "activ. MB", "cache MB", "MFLOP", "time us", "bound");
  for (const Step& s : steps)
    for (size_t i = 0; i < s.cost.ops.size(); ++i) {
      const OpCost& o = s.cost.ops[i];
      fmt::print("{:<8} {:>5} {:<10} {:<20} {:>12.3f} {:>12.3f} {:>12.3f} {:>14.3f} {:>11.3f} {:>8}\n", s.name, o.layer,
                 o.layer_kind, o.op, o.bytes_weights / 1e6, o.bytes_activations / 1e6, o.bytes_cache / 1e6, o.flops / 1e6,
                 s.pred[0].ops[i].seconds * 1e6, s.pred[0].ops[i].compute_bound ? "compute" : "memory");
    }
}

}  // namespace

int run_plan(const PlanOptions& opt) {
  const Plan p = check_flags(opt);
  if (p.ep) return run_plan_ep(*p.ep);
  std::vector<Step> steps = {{"prefill", forward_cost(p.config, p.prefill, p.weights), {}},
                             {"decode", forward_cost(p.config, p.decode, p.weights), {}}};
  for (Step& s : steps)
    for (const Chip& ch : p.chips) s.pred.push_back(predict(s.cost, ch));
  if (opt.json != "-" && opt.csv != "-") print_table(p, steps, opt.per_op);
  if (!opt.json.empty()) write_plan_output("--json", opt.json, plan_json(p, steps).dump(1) + "\n");
  if (!opt.csv.empty()) write_plan_output("--csv", opt.csv, plan_csv(p, steps));
  return 0;
}

void write_plan_output(const std::string& flag, const std::string& path, const std::string& text) {
  if (path == "-") {
    fmt::print("{}", text);
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (f) f << text;
  if (!f) throw Error("plan: " + flag + " '" + path + "': cannot write it: " + std::strerror(errno));
}

}  // namespace kimi::cli
