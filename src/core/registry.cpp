// The operator registry (src/core/registry.h) and the lookups of kimi/device.h that read it.
#include "core/registry.h"

#include "kimi/device.h"

namespace kimi {

namespace {
// Per backend: its name, how users call it, and the configure option that builds it.
struct BackendInfo {
  std::string_view name, title, option;
};
constexpr BackendInfo kBackendInfo[kBackends] = {{"cpu", "CPU", ""}, {"cuda", "CUDA", "-DKIMI_CUDA=ON"}};
}  // namespace

std::string_view backend_name(Backend b) { return kBackendInfo[size_t(b)].name; }

SlotBase::SlotBase(Registry& r, std::string_view name, std::string_view family) : name_(name), family_(family) {
  r.slots_.push_back(this);
}

const SlotBase* Registry::find(std::string_view name) const {
  for (const SlotBase* s : slots_)
    if (s->name() == name) return s;
  return nullptr;
}

const Registry& registry() {
  // NOTE: explicit registration, not self-registering static objects: libkimi is a static library, and the
  // linker drops object files nothing references. backends.cpp (generated) references each linked backend.
  static Registry r;
  static const bool registered = (register_backends(r), true);
  (void)registered;
  return r;
}

void fail_unavailable(const check::Checker& c, Device d) {
  const Backend b = backend_of(d);
  if (!registry().linked(b)) {
    const BackendInfo& i = kBackendInfo[size_t(b)];
    c.fail("tensors are on " + to_string(d) + " but this build of kimi.cpp has no " + std::string(i.title) +
           " backend (configure with " + std::string(i.option) + ")");
  }
  c.fail("not implemented on the " + to_string(d) + " backend yet (CPU tensors are supported)");
}

bool op_supported(std::string_view op, Device d) {
  const SlotBase* s = registry().find(op);
  const Backend b = backend_of(d);
  return s && s->is_public() && registry().linked(b) && s->has(b);
}

const std::vector<std::string>& all_ops() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const SlotBase* s : registry().slots())
      if (s->is_public()) v.emplace_back(s->name());
    return v;
  }();
  return names;
}

}  // namespace kimi
