// Implementation of src/model/decode_graph.h.
#include "model/decode_graph.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "core/profile.h"
#include "core/registry.h"
#include "kimi/error.h"
#include "kimi/log.h"

namespace kimi::model {

namespace {

const DeviceRuntime& cuda_runtime() {
  if (!registry().linked(Backend::cuda))
    throw Error("forward: internal: a CUDA decode graph in a build without the CUDA backend");
  return registry().runtime(Backend::cuda);
}

// A view of the same bytes of `region` as `v` of `host_region`, on device dev.
TensorView rebase(TensorView v, const TensorView& host_region, const TensorView& dev_region) {
  if (!v.present()) return v;
  const char* h0 = static_cast<const char*>(host_region.data);
  const char* p = static_cast<const char*>(v.data);
  if (p < h0 || p >= h0 + host_region.numel())
    throw Error("forward: internal: a step table outside the host tables' region");
  v.data = static_cast<char*>(dev_region.data) + (p - h0);
  v.device = dev_region.device;
  return v;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (const int64_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

}  // namespace

std::optional<Device> graph_device(const Placement& p, std::string* why) {
  std::vector<Device> devs;
  for (const Placement::Block& b : p.blocks)
    if (std::find(devs.begin(), devs.end(), b.device) == devs.end()) devs.push_back(b.device);
  if (std::find(devs.begin(), devs.end(), p.head) == devs.end()) devs.push_back(p.head);
  if (devs.size() == 1 && devs[0].type == DeviceType::cuda) return devs[0];
  if (why) {
    if (devs.size() == 1) {
      *why = "the model runs on " + to_string(devs[0]) + " (CUDA graphs are for models on one GPU)";
    } else {
      std::string list;
      for (const Device d : devs) list += (list.empty() ? "" : ", ") + to_string(d);
      *why = "the placement spans " + list +
             " (CUDA graphs need every block and the head on one CUDA device; each step runs eagerly)";
    }
  }
  return std::nullopt;
}

DecodeGraphs::DecodeGraphs() {
  if (const char* e = std::getenv("KIMI_DECODE_GRAPHS"); e && std::strcmp(e, "0") == 0) enabled_ = false, env_off_ = true;
}

DecodeGraphs::~DecodeGraphs() {
  drop_graphs();
  if (stream_) rt_->stream_destroy(device_, stream_);
}

void DecodeGraphs::drop_graphs() {
  for (Graph& g : graphs_)
    if (g.exec) rt_->graph_destroy(device_, g.exec);  // a graph exists only after the stream (and rt_) was made
  graphs_.clear();
}

void DecodeGraphs::set_enabled(bool on) {
  enabled_ = on;
  env_off_ = false;
  if (!on) drop_graphs();
}

void DecodeGraphs::clear() { drop_graphs(); }

bool DecodeGraphs::run(const GraphStep& g, const Placement& p, const GraphBody& body) {
  const Step& s = g.s;
  if (!s.decode) return false;  // prefill or a mixed batch: eager, as designed
  const std::optional<Device> dev = graph_device(p);
  if (!dev || s.mla_fresh > 0 || g.on_layer || g.R > g.head_rows) {
    // A decode step that runs eagerly on the caller's context: no single GPU, a sequence's first token (the
    // prefill form), host copies for on_layer, or more logits rows than the head computes at once.
    ++eager_decode_;
    return false;
  }
  const DeviceRuntime& rt = cuda_runtime();

  // The generation the graphs were captured in: a re-plan, a new or grown cache or a new dtype drops them.
  Generation gen;
  gen.pointers = g.arenas;
  for (int64_t i = 0; i < g.layers; ++i) {
    const Cache::Layer& L = g.cache.layer(i);
    for (const Tensor* t : {&L.state, &L.conv_q, &L.conv_k, &L.conv_v, &L.latent}) gen.pointers.push_back(t->data());
  }
  gen.cache_seqs = g.cache.max_seqs(), gen.cache_len = g.cache.max_len(), gen.dtype = g.dtype;
  if (!(gen == gen_) || device_ != *dev) {
    drop_graphs();
    gen_ = std::move(gen);
  }
  if (stream_ && device_ != *dev) rt.stream_destroy(device_, stream_), stream_ = nullptr;
  if (!stream_) {
    if (!rt_) rt_ = std::make_unique<DeviceRuntime>(rt);
    stream_ = rt.stream_create(*dev), device_ = *dev;
  }

  // The step's tables as views of their device copy, and the one H2D copy of them.
  dev_step_ = s;
  for (TensorView* v : {&dev_step_.cu_t, &dev_step_.slot_t, &dev_step_.pos_t, &dev_step_.tok_slot_t,
                        &dev_step_.mla_perm, &dev_step_.mla_inv, &dev_step_.fresh_cu_t, &dev_step_.cont_lens_t,
                        &dev_step_.cont_slot_t})
    *v = rebase(*v, g.host_tables, g.device_tables);
  const TensorView tokens = rebase(g.tokens, g.host_tables, g.device_tables);
  const TensorView rows = rebase(g.rows, g.host_tables, g.device_tables);
  try {
    replay_or_capture(g, *dev, tokens, rows, body);
  } catch (...) {
    // Nothing of this step may still be in flight when the caller refills the host tables or reads the cache.
    try {
      rt.synchronize(*dev, stream_);
    } catch (...) {  // NOTE: the step's own error is the one to report
    }
    throw;
  }
  return true;
}

void DecodeGraphs::replay_or_capture(const GraphStep& g, Device dev, TensorView tokens, TensorView rows,
                                     const GraphBody& body) {
  const DeviceRuntime& rt = cuda_runtime();
  const Step& s = g.s;
  rt.copy_async(g.device_tables.data, dev, g.host_tables.data, Device::cpu(), size_t(g.host_tables.numel()), stream_);

  const Context gctx{stream_, g.ctx.cpu_threads};
  const int64_t n = s.N;
  auto held = std::find_if(graphs_.begin(), graphs_.end(), [&](const Graph& x) { return x.n == n; });
  TensorView out;
  if (!enabled_ || profile::active()) {  // graphs off, or a profiler timing every dispatched call: the same work
                                         // launched eagerly (bit-identical to a replay)
    out = body(dev_step_, tokens, rows, gctx);
    ++eager_decode_;
  } else if (held != graphs_.end() && held->exec) {
    rt.graph_launch(dev, held->exec, stream_);
    out = held->out;
    ++replays_;
  } else {
    out = body(dev_step_, tokens, rows, gctx);  // eager on the runtime stream: this step's results
    ++eager_decode_;
    if (held == graphs_.end()) {
      // Capture the same work for the next steps with n sequences (capturing executes nothing).
      Graph graph;
      graph.n = n;
      rt.capture_begin(dev, stream_);
      try {
        graph.out = body(dev_step_, tokens, rows, gctx);
        graph.exec = rt.capture_end(dev, stream_, true);
        ++captures_;
      } catch (const std::exception& e) {
        rt.capture_end(dev, stream_, false);
        graph.reason = e.what();
        const std::pair<int64_t, std::string> key{n, graph.reason};
        if (std::find(noted_.begin(), noted_.end(), key) == noted_.end()) {
          noted_.push_back(key);
          note("decode steps of " + std::to_string(n) + " sequence(s) run eagerly, not from a CUDA graph: " +
               graph.reason);
        }
      }
      graphs_.push_back(std::move(graph));
    }
  }
  // The logits to the caller (its host buffer, or a view on this device), then the step's one host wait.
  rt.copy_async(g.logits.data, g.logits.device, out.data, dev, size_t(g.R) * size_t(out.size(1)) * sizeof(float),
                stream_);
  rt.synchronize(dev, stream_);
}

DecodeGraphStatus DecodeGraphs::status(const Placement& p) const {
  DecodeGraphStatus st;
  st.enabled = enabled_;
  st.replays = replays_, st.captures = captures_, st.eager_decode = eager_decode_;
  for (const Graph& g : graphs_) {
    if (g.exec) st.batch_sizes.push_back(g.n);
    else st.refused.emplace_back(g.n, g.reason);
  }
  std::sort(st.batch_sizes.begin(), st.batch_sizes.end());
  std::string why;
  st.supported = graph_device(p, &why).has_value();
  if (!st.supported) {
    st.summary = "off: " + why;
  } else if (!enabled_) {
    st.summary = env_off_ ? "off: KIMI_DECODE_GRAPHS=0 (every decode step launches its kernels eagerly)"
                          : "off: turned off (Model::set_decode_graphs(false); every decode step launches its kernels "
                            "eagerly)";
  } else {
    st.summary = "on: " + std::to_string(replays_) + " decode step(s) replayed from CUDA graphs, " +
                 std::to_string(eager_decode_) + " eager";
    if (!st.batch_sizes.empty()) st.summary += "; graphs for batch size(s) " + join(st.batch_sizes);
    for (const auto& [n, reason] : st.refused)
      st.summary += "; batch size " + std::to_string(n) + " runs eagerly: " + reason;
  }
  return st;
}

}  // namespace kimi::model
