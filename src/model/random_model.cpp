// Model::random of kimi/model/model.h: a model without a checkpoint, each weight made on its home device
// (src/model/weights.h) and filled there by fill_random with the rule of kimi/model/random_weights.h.
// A MoE layer's routed experts are made as slices of one [E, ...] tensor per projection and MXFP4 part, the layout
// place_weights gives a loaded checkpoint's experts on a GPU (the CUDA MoE kernels find expert e at base + e * stride
// and capture in a CUDA graph); each slice holds the values its own tensor would (same seed per name).
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "kimi/device.h"
#include "kimi/log.h"
#include "kimi/model/model.h"
#include "kimi/model/random_weights.h"
#include "kimi/ops/random.h"
#include "model/weights.h"

namespace kimi::model {

namespace {

// "123456 bytes (0.00 GiB)"
std::string gib(size_t b) {
  char g[32];
  std::snprintf(g, sizeof g, "%.2f", double(b) / double(size_t(1) << 30));
  return std::to_string(b) + " bytes (" + g + " GiB)";
}

// A routed expert's tensor name with its expert index taken out ("...experts.7.w1.weight" -> "...experts.*.w1.weight")
// and the index; the name itself and -1 for any other tensor.
std::pair<std::string, int64_t> expert_group(const std::string& name) {
  const size_t at = name.find("experts.");
  if (at == std::string::npos) return {name, -1};
  size_t i = at + 8, j = i;
  while (j < name.size() && name[j] >= '0' && name[j] <= '9') ++j;
  if (j == i || j >= name.size() || name[j] != '.') return {name, -1};
  return {name.substr(0, i) + "*" + name.substr(j), std::stoll(name.substr(i, j - i))};
}

}  // namespace

Model Model::random(const Config& c, Device device, uint64_t seed, const SchemaOptions& opt, const OpSupported& supported) {
  return Model(RandomTag{}, c, plan_placement(c, device, supported ? supported : OpSupported(op_supported)), seed, opt);
}

Model Model::random(const Config& c, Placement placement, uint64_t seed, const SchemaOptions& opt) {
  return Model(RandomTag{}, c, std::move(placement), seed, opt);
}

Model::Model(RandomTag, const Config& c, Placement placement, uint64_t seed, const SchemaOptions& opt)
    : config_(c), placement_(std::move(placement)) {
  check_placement_devices(config_, placement_);
  const std::vector<TensorSpec> schema = checkpoint_schema(c, opt);
  // Room on every device for its tensors (as Tensor allocates them: rounded up to 64 bytes, + 64), before any.
  std::map<std::pair<int, int>, size_t> need;
  for (const TensorSpec& s : schema) {
    size_t b = size_t(dtype_size(random_init(s, c).dtype));
    for (int64_t e : s.shape) b *= size_t(e);
    const Device d = home_device(s, c, placement_);
    need[{int(d.type), d.index}] += (b + 63) / 64 * 64 + 64;
  }
  for (const auto& [key, bytes] : need) {
    const Device d{DeviceType(key.first), key.second};
    const size_t avail = device_available_bytes(d);
    if (bytes > avail)
      check::Checker("Model::random").fail("device", "room for the weights: " + gib(bytes) + " on " + to_string(d),
                                           gib(avail) + " available");
  }
  // the routed experts' groups (their slices are made together, below)
  std::map<std::string, std::vector<const TensorSpec*>> groups;
  for (const TensorSpec& s : schema)
    if (s.routed_expert) {
      const auto [key, e] = expert_group(s.name);
      if (e < 0) throw Error("Model::random: internal: routed expert tensor '" + s.name + "' has no expert index");
      auto& g = groups[key];
      if (size_t(e) >= g.size()) g.resize(size_t(e) + 1, nullptr);
      g[size_t(e)] = &s;
    }
  std::vector<Tensor> made;
  std::map<std::string, TensorView> view_of;
  for (const TensorSpec& s : schema) {
    if (s.routed_expert) continue;
    const RandomInit r = random_init(s, c);
    Tensor t(r.dtype, s.shape, home_device(s, c, placement_));  // zero-filled: the tail past r.count stays 0
    fill_random(TensorView(t.data(), r.dtype, {r.count}, t.device()), tensor_seed(seed, s.name), r.min(), r.max());
    view_of.emplace(s.name, t.view());
    made.push_back(std::move(t));
  }
  for (const auto& [key, members] : groups) {
    const TensorSpec& s0 = *members.at(0);
    const RandomInit r0 = random_init(s0, c);
    std::vector<int64_t> shape{int64_t(members.size())};
    shape.insert(shape.end(), s0.shape.begin(), s0.shape.end());
    Tensor t(r0.dtype, shape, home_device(s0, c, placement_));
    const int64_t per = t.numel() / int64_t(members.size());
    for (size_t e = 0; e < members.size(); ++e) {
      const TensorSpec* s = members[e];
      const RandomInit r = s ? random_init(*s, c) : r0;
      if (!s || r.dtype != r0.dtype || s->shape != s0.shape || home_device(*s, c, placement_) != t.device())
        throw Error("Model::random: internal: the experts of '" + key + "' differ in shape, dtype or device");
      char* base = static_cast<char*>(t.data()) + size_t(e) * size_t(per) * dtype_size(r.dtype);
      fill_random(TensorView(base, r.dtype, {r.count}, t.device()), tensor_seed(seed, s->name), r.min(), r.max());
      view_of.emplace(s->name, TensorView(base, r.dtype, s->shape, t.device()));
    }
    made.push_back(std::move(t));
  }
  weights_ = std::make_unique<ModelWeights>(
      bind_weights(c, opt, [&](const std::string& name) { return view_of.at(name); }));
  for (const TensorSpec& s : schema) weights_->created_views.push_back(view_of.at(s.name));
  weights_->created = std::move(made);  // the views stay valid: a Tensor's memory does not move with it
  place_weights(*weights_, config_, placement_);
  for (const std::string& n : placement_.notes) note(n);
}

}  // namespace kimi::model
