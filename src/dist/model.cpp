// dist/model.cpp: EpModel (the contract: model.h).
#include "dist/model.h"

#include <algorithm>
#include <string>

#include "kimi/error.h"
#include "model/blocks.h"
#include "model/weights.h"

namespace kimi::dist {

uint64_t config_hash(const model::Config& c) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char ch : model::config_to_json(c)) h = (h ^ uint8_t(ch)) * 0x100000001b3ull;
  return h;
}

EpModel::EpModel(Comm& comm, const model::Model& m, int64_t max_tokens, const Placement* placement,
                 const Context& ctx, PlanPolicy policy)
    : comm_(comm), ctx_(ctx) {
  const char* fn = "dist::EpModel";
  require_host_memory(comm, fn);
  const model::Config& c = m.config();
  // The whole configuration first: a collective every rank reaches before anything can throw.
  const uint64_t mine = config_hash(c);
  std::vector<uint64_t> all(size_t(comm.size()));
  comm.all_gather(&mine, sizeof mine, all.data());
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw Error(std::string(fn) + ": the model configuration differs between ranks: config hash " +
                  std::to_string(all[0]) + " on rank 0, " + std::to_string(all[r]) + " on rank " + std::to_string(r) +
                  " (every rank must load the same model)");
  if (!(m.device() == Device::cpu()))
    throw Error(std::string(fn) + ": argument 'model': expected a CPU model (the EP step runs on CPU ranks), got " +
                to_string(m.device()));
  if (c.num_experts > 0 && c.num_experts < comm.size())
    throw Error(std::string(fn) + ": expected at most as many ranks as experts (" + std::to_string(c.num_experts) +
                "), got " + std::to_string(comm.size()) + " ranks");
  placement_ = placement ? *placement : Placement::round_robin(comm.size(), int(c.num_experts));
  layers_.resize(size_t(c.num_hidden_layers));
  stats_.resize(size_t(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (!c.is_moe_layer(i)) continue;
    const model::FfnWeights& w = m.weights().layers[size_t(i)].ffn;
    layers_[size_t(i)] = std::make_unique<EpMoe>(comm, placement_, model::latent_moe_weights(w),
                                                 model::moe_router_params(c), model::glu_params(c), c.rms_norm_eps,
                                                 max_tokens, policy);
  }
}

int64_t EpModel::resident_expert_bytes() const {
  int64_t b = 0;
  for (const auto& l : layers_)
    if (l) b += l->resident_expert_bytes();
  return b;
}

int64_t EpModel::resident_experts_per_layer() const {
  for (const auto& l : layers_)
    if (l) return int64_t(l->resident_experts().size());
  return 0;
}

void EpModel::idle_step() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!layers_[i]) continue;
    const int64_t d = layers_[i]->hidden();
    std::vector<float> none(1);
    const TensorView x(none.data(), DType::f32, {0, d}), y(none.data(), DType::f32, {0, d});
    layers_[i]->forward(x, y, {}, {}, &stats_[i], ctx_);
    add(stats_[i]);
  }
}

void EpModel::add(const EpStepStats& s) {
  EpTotals& t = totals_;
  ++t.layer_steps;
  t.pairs += s.total_pairs;
  t.moved_pairs += s.moved_pairs;
  t.moved_segments += s.moved_segments;
  t.rank_pairs.resize(s.load.size(), 0);
  for (size_t r = 0; r < s.load.size(); ++r) t.rank_pairs[r] += s.load[r];
  if (s.total_pairs > 0) {
    const double mean = double(s.total_pairs) / double(s.load.size());
    t.home_imbalance += double(*std::max_element(s.home_load.begin(), s.home_load.end())) / mean;
    t.planned_imbalance += double(*std::max_element(s.load.begin(), s.load.end())) / mean;
    ++t.steps_with_pairs;
  }
  t.route_s += s.route_s, t.plan_s += s.plan_s, t.dispatch_s += s.dispatch_s;
  t.expert_s += s.expert_s, t.combine_s += s.combine_s, t.tail_s += s.tail_s;
}

bool EpModel::any_active(bool local) {
  int64_t n = local ? 1 : 0;
  comm_.all_reduce_sum(std::span<int64_t>(&n, 1));
  return n > 0;
}

model::GenerateLockstep EpModel::lockstep() {
  return {hook(), [this](bool local) { return any_active(local); }, [this] { idle_step(); }};
}

void EpModel::generate_idle() {
  idle_step();
  while (any_active(false)) idle_step();
}

std::function<void(int64_t, TensorView, TensorView)> EpModel::hook() {
  return [this](int64_t layer, TensorView x, TensorView y) {
    if (layer < 0 || size_t(layer) >= layers_.size() || !layers_[size_t(layer)])
      throw Error("dist::EpModel: argument 'layer': expected an MoE layer, got " + std::to_string(layer));
    layers_[size_t(layer)]->forward(x, y, {}, {}, &stats_[size_t(layer)], ctx_);
    add(stats_[size_t(layer)]);
  };
}

}  // namespace kimi::dist
