// `kimi plan --ep`: the expert-parallel prefill and decode steps (kimi/model/cost_ep.h) at each rank count,
// as a table (one column per rank count), JSON or CSV. Units: decimal MB / GB, ms, tokens/s.
#include "plan_ep.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "kimi/error.h"

namespace kimi::cli {
namespace {
using namespace kimi::model;
using json = nlohmann::json;

struct Column {
  int64_t ranks;
  EpCost prefill, decode;
  EpPrediction pre, dec;
  double need() const { return decode.weights_resident + decode.cache; }
};

json step_json(const EpCost& c, const EpPrediction& p) {
  const EpComm& m = c.comm;
  json layers = json::array();
  for (const EpLayerTime& t : p.layers)
    layers.push_back({{"compute_seconds", t.compute},
                      {"hideable_seconds", t.hideable},
                      {"comm_seconds", t.comm},
                      {"overlap_seconds", t.overlap}});
  return {{"layers", layers},
          {"tokens_per_rank", c.tokens_per_rank()},
          {"pairs_per_rank", c.pairs_per_rank},
          {"touched_slots", c.touched_slots},
          {"bytes", c.rank.bytes()},
          {"flops", c.rank.flops},
          {"per_moe_layer_bytes",
           {{"allgather_nvlink", m.allgather_nvlink},
            {"allgather_ib", m.allgather_ib},
            {"dispatch_nvlink", m.dispatch_nvlink},
            {"dispatch_ib", m.dispatch_ib},
            {"combine_nvlink", m.combine_nvlink},
            {"combine_ib", m.combine_ib}}},
          {"per_moe_layer_seconds", {{"nvlink", p.nvlink_seconds}, {"ib", p.ib_seconds}}},
          {"compute_seconds", p.compute_seconds},
          {"allgather_seconds", p.allgather_seconds},
          {"dispatch_seconds", p.dispatch_seconds},
          {"combine_seconds", p.combine_seconds},
          {"step_seconds", p.step_seconds},
          {"step_overlap_seconds", p.step_overlap_seconds},
          {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
          {"tokens_per_s_overlap_per_gpu", p.tokens_per_s_overlap_per_gpu},
          {"tokens_per_s_total", p.tokens_per_s_total},
          {"tokens_per_s_overlap_total", p.tokens_per_s_overlap_total}};
}

json ep_json(const EpPlan& p, const std::vector<Column>& cols) {
  json j;
  j["config"] = {{"source", p.source},
                 {"num_experts", p.config.num_experts},
                 {"num_experts_per_token", p.config.num_experts_per_token},
                 {"mxfp4_experts", p.weights.mxfp4_experts},
                 {"weights_dtype", std::string(dtype_name(p.weights.dense))}};
  j["chip"] = {{"name", p.chip.name},
               {"hbm_bytes_per_s", p.chip.hbm_bytes_per_s},
               {"bf16_flops_per_s", p.chip.bf16_flops_per_s},
               {"memory_bytes", p.chip.memory_bytes}};
  j["links"] = {{"nvlink_bytes_per_s", p.links.nvlink_bytes_per_s},
                {"ib_bytes_per_s", p.links.ib_bytes_per_s},
                {"gpus_per_node", p.links.gpus_per_node}};
  j["rows_dtype"] = "bf16";
  j["redundant_experts"] = p.redundant;
  if (p.published > 0) j["published_decode_tokens_per_s_per_gpu"] = p.published;
  for (const Column& c : cols)
    j["ep"].push_back(
        {{"ranks", c.ranks},
         {"expert_slots_per_rank", c.decode.expert_slots},
         {"node_gpus", c.decode.node_gpus},
         {"moe_layers", c.decode.moe_layers},
         {"weights_bytes_per_gpu", c.decode.weights_resident},
         {"cache_bytes_per_gpu", c.decode.cache},
         {"fits", p.chip.memory_bytes > 0 ? json(c.need() <= p.chip.memory_bytes) : json(nullptr)},
         {"decode", step_json(c.decode, c.dec)},
         {"prefill", step_json(c.prefill, c.pre)}});
  return j;
}

std::string ep_csv(const std::vector<Column>& cols) {
  std::string s =
      "ranks,step,tokens_per_rank,compute_s,dispatch_nvlink_bytes,dispatch_ib_bytes,allgather_s,"
      "dispatch_s,combine_s,step_s,step_overlap_s,tokens_per_s_per_gpu,tokens_per_s_overlap_per_gpu,"
      "tokens_per_s_total,weights_bytes_per_gpu,cache_bytes_per_gpu\n";
  for (const Column& c : cols)
    for (const auto& [name, cost, pr] :
         {std::tuple{"prefill", &c.prefill, &c.pre}, std::tuple{"decode", &c.decode, &c.dec}})
      s +=
          fmt::format("{},{},{},{:.6g},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{}\n",
                      c.ranks, name, cost->tokens_per_rank(), pr->compute_seconds, cost->comm.dispatch_nvlink,
                      cost->comm.dispatch_ib, pr->allgather_seconds, pr->dispatch_seconds,
                      pr->combine_seconds, pr->step_seconds, pr->step_overlap_seconds,
                      pr->tokens_per_s_per_gpu, pr->tokens_per_s_overlap_per_gpu, pr->tokens_per_s_total,
                      c.decode.weights_resident, c.decode.cache);
  return s;
}

// One table row: a label and one value per column.
template <class F>
void row(const std::vector<Column>& cols, const char* label, F value) {
  fmt::print("{:<40}", label);
  for (const Column& c : cols) fmt::print(" {:>12}", value(c));
  fmt::print("\n");
}

void step_rows(const std::vector<Column>& cols, bool decode) {
  auto cost = [decode](const Column& c) -> const EpCost& { return decode ? c.decode : c.prefill; };
  auto pred = [decode](const Column& c) -> const EpPrediction& { return decode ? c.dec : c.pre; };
  row(cols, "  tokens per GPU",
      [&](const Column& c) { return fmt::format("{}", cost(c).tokens_per_rank()); });
  row(cols, "  experts touched per GPU per layer",
      [&](const Column& c) { return fmt::format("{:.1f}/{}", cost(c).touched_slots, cost(c).expert_slots); });
  row(cols, "  compute ms (roofline)",
      [&](const Column& c) { return fmt::format("{:.3f}", pred(c).compute_seconds * 1e3); });
  row(cols, "  dispatch MB/layer NVLink",
      [&](const Column& c) { return fmt::format("{:.3f}", cost(c).comm.dispatch_nvlink / 1e6); });
  row(cols, "  dispatch MB/layer IB",
      [&](const Column& c) { return fmt::format("{:.3f}", cost(c).comm.dispatch_ib / 1e6); });
  row(cols, "  combine MB/layer (= dispatch)", [&](const Column& c) {
    return fmt::format("{:.3f}", (cost(c).comm.combine_nvlink + cost(c).comm.combine_ib) / 1e6);
  });
  row(cols, "  all-gather KB/layer", [&](const Column& c) {
    return fmt::format("{:.1f}", (cost(c).comm.allgather_nvlink + cost(c).comm.allgather_ib) / 1e3);
  });
  row(cols, "  comm ms/layer NVLink",
      [&](const Column& c) { return fmt::format("{:.4f}", pred(c).nvlink_seconds * 1e3); });
  row(cols, "  comm ms/layer IB",
      [&](const Column& c) { return fmt::format("{:.4f}", pred(c).ib_seconds * 1e3); });
  row(cols, "  comm ms (all MoE layers)", [&](const Column& c) {
    const EpPrediction& p = pred(c);
    return fmt::format("{:.3f}", (p.allgather_seconds + p.dispatch_seconds + p.combine_seconds) * 1e3);
  });
  row(cols, "  step ms, no overlap",
      [&](const Column& c) { return fmt::format("{:.3f}", pred(c).step_seconds * 1e3); });
  row(cols, "  step ms, full overlap",
      [&](const Column& c) { return fmt::format("{:.3f}", pred(c).step_overlap_seconds * 1e3); });
  row(cols, "  tok/s per GPU, no overlap",
      [&](const Column& c) { return fmt::format("{:.0f}", pred(c).tokens_per_s_per_gpu); });
  row(cols, "  tok/s per GPU, full overlap",
      [&](const Column& c) { return fmt::format("{:.0f}", pred(c).tokens_per_s_overlap_per_gpu); });
  row(cols, "  tok/s total, no overlap",
      [&](const Column& c) { return fmt::format("{:.0f}", pred(c).tokens_per_s_total); });
  row(cols, "  tok/s total, full overlap",
      [&](const Column& c) { return fmt::format("{:.0f}", pred(c).tokens_per_s_overlap_total); });
}

void print_table(const EpPlan& p, const std::vector<Column>& cols) {
  const Config& c = p.config;
  fmt::print(
      "model      {}: {} routed experts top-{} ({} {}), {} redundant slots; dispatch/combine rows bf16 of "
      "width {}\n",
      p.source, c.num_experts, c.num_experts_per_token,
      p.weights.mxfp4_experts ? "MXFP4" : dtype_name(p.weights.dense), "experts", p.redundant,
      c.routed_expert_hidden_size.value_or(c.hidden_size));
  fmt::print(
      "chip       {}: {:.0f} GB/s HBM, {:.0f} TFLOP/s; links per GPU per direction: NVLink {:.0f} GB/s "
      "inside "
      "nodes of {}, IB {:.0f} GB/s between\n",
      p.chip.name, p.chip.hbm_bytes_per_s / 1e9, p.chip.bf16_flops_per_s / 1e12,
      p.links.nvlink_bytes_per_s / 1e9, p.links.gpus_per_node, p.links.ib_bytes_per_s / 1e9);
  fmt::print(
      "decode     {} sequence(s) per GPU x 1 token, {} tokens in each cache; prefill {} sequence(s) per GPU "
      "x {} "
      "tokens\n\n",
      p.decode.batch, p.decode.context, p.prefill.batch, p.prefill.new_tokens_per_seq);
  row(cols, "GPUs (EP ranks)", [](const Column& x) { return fmt::format("{}", x.ranks); });
  row(cols, "nodes", [&](const Column& x) {
    return fmt::format("{}", (x.ranks + p.links.gpus_per_node - 1) / p.links.gpus_per_node);
  });
  row(cols, "expert slots per GPU per layer",
      [](const Column& x) { return fmt::format("{}", x.decode.expert_slots); });
  fmt::print("decode\n");
  step_rows(cols, true);
  fmt::print("prefill\n");
  step_rows(cols, false);
  fmt::print("memory per GPU\n");
  row(cols, "  weights GB",
      [](const Column& x) { return fmt::format("{:.1f}", x.decode.weights_resident / 1e9); });
  row(cols, "  decode caches GB",
      [](const Column& x) { return fmt::format("{:.1f}", x.decode.cache / 1e9); });
  row(cols, "  total GB", [](const Column& x) { return fmt::format("{:.1f}", x.need() / 1e9); });
  row(cols, fmt::format("  fits {:.0f} GB", p.chip.memory_bytes / 1e9).c_str(), [&](const Column& x) {
    return p.chip.memory_bytes <= 0 ? std::string("?") : x.need() <= p.chip.memory_bytes ? "yes" : "no";
  });
  if (p.published > 0) {
    fmt::print("\npublished  {:.0f} decode tok/s per GPU; predicted here:\n", p.published);
    for (const Column& x : cols)
      fmt::print("           EP {}: {:.0f} without overlap ({:.2f}x), {:.0f} with full overlap ({:.2f}x)\n",
                 x.ranks, x.dec.tokens_per_s_per_gpu, x.dec.tokens_per_s_per_gpu / p.published,
                 x.dec.tokens_per_s_overlap_per_gpu, x.dec.tokens_per_s_overlap_per_gpu / p.published);
  }
  fmt::print(
      "\ndata-parallel attention and shared experts, routed experts dealt over the GPUs, perfect balance, "
      "uniform routing;\ncompute = one-chip roofline at the per-GPU batch; comm = all-gather of counts + "
      "dispatch + combine per MoE layer,\nNVLink and IB side by side, no latency "
      "(docs/model/cost_model.md)\n");
}

}  // namespace

int run_plan_ep(const EpPlan& p) {
  std::vector<Column> cols;
  for (int64_t n : p.ranks) {
    Column c{n, {}, {}, {}, {}};
    c.prefill = ep_cost(p.config, {n, p.prefill, p.redundant, DType::bf16}, p.weights, p.links);
    c.decode = ep_cost(p.config, {n, p.decode, p.redundant, DType::bf16}, p.weights, p.links);
    c.pre = predict_ep(c.prefill, p.chip, p.links);
    c.dec = predict_ep(c.decode, p.chip, p.links);
    cols.push_back(std::move(c));
  }
  if (p.json != "-" && p.csv != "-") print_table(p, cols);
  if (!p.json.empty()) write_plan_output("--json", p.json, ep_json(p, cols).dump(1) + "\n");
  if (!p.csv.empty()) write_plan_output("--csv", p.csv, ep_csv(cols));
  return 0;
}

}  // namespace kimi::cli
