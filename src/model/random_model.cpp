// Model::random of kimi/model/model.h: a model without a checkpoint, each weight made on its home device
// (src/model/weights.h) and filled there by fill_random with the rule of kimi/model/random_weights.h.
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
  std::vector<Tensor> made;
  made.reserve(schema.size());
  std::map<std::string, size_t> index;
  for (const TensorSpec& s : schema) {
    const RandomInit r = random_init(s, c);
    Tensor t(r.dtype, s.shape, home_device(s, c, placement_));  // zero-filled: the tail past r.count stays 0
    fill_random(TensorView(t.data(), r.dtype, {r.count}, t.device()), tensor_seed(seed, s.name), r.min(), r.max());
    index.emplace(s.name, made.size());
    made.push_back(std::move(t));
  }
  weights_ = std::make_unique<ModelWeights>(
      bind_weights(c, opt, [&](const std::string& name) { return made.at(index.at(name)).view(); }));
  weights_->created = std::move(made);  // the views stay valid: a Tensor's memory does not move with it
  place_weights(*weights_, config_, placement_);
  for (const std::string& n : placement_.notes) note(n);
}

}  // namespace kimi::model
