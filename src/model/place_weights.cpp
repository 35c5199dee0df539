// src/model/place_weights.cpp: place_weights of src/model/weights.h: the GPU blocks' weights move to their
// device, each source tensor exactly once; the weights of CPU blocks stay views into the mapping.
// A MoE layer's routed experts are stacked on upload: one [E, rows, cols] allocation per projection (w1, w3,
// w2) and per MXFP4 part (packed, scale), expert e's views being slice e of it, so the CUDA MoE kernels find
// every expert at base + e * stride (one launch for all experts, capturable in a CUDA graph: docs/ops/moe.md).
// And home_device, the same placement by tensor name (where a random model makes each tensor), and the check of
// a placement's devices that every Model constructor runs first.
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/model/schema.h"
#include "model/weights.h"

namespace kimi::model {
namespace {

class Uploader {
 public:
  explicit Uploader(std::vector<Tensor>& store) : store_(store) {}

  // v now views a copy on d: the first request for a source tensor uploads it, later ones (the tied
  // embedding and lm_head) share that copy. Absent views stay absent.
  void view(TensorView& v, Device d) {
    if (!v.present() || v.device == d) return;
    if (!v.is_contiguous()) throw Error("place_weights: a weight view is not contiguous (shape " + v.shape_string() + ")");
    const Key key{v.data, int(d.type), d.index, v.dtype, v.numel()};
    auto it = done_.find(key);
    if (it == done_.end()) {
      Tensor t(v.dtype, std::span<const int64_t>(v.shape.data(), size_t(v.ndim)), d);
      copy(t, v);
      it = done_.emplace(key, t.data()).first;
      store_.push_back(std::move(t));
    }
    v.data = it->second;
    v.device = d;
  }
  void weight(Weight& w, Device d) { view(w.w, d), view(w.scale, d); }
  void mlp(MlpWeights& m, Device d) { weight(m.gate, d), weight(m.up, d), weight(m.down, d); }
  // Every expert's projection p as slices of one stacked copy on d (both parts of MXFP4 weights).
  void experts(std::vector<MlpWeights>& ex, Device d) {
    if (ex.empty()) return;
    for (Weight MlpWeights::*p : {&MlpWeights::gate, &MlpWeights::up, &MlpWeights::down})
      for (TensorView Weight::*part : {&Weight::w, &Weight::scale}) stack(ex, p, part, d);
  }
  // An owned small parameter: replaced by its copy on d.
  void owned(Tensor& t, Device d) {
    if (!t.data() || t.device() == d) return;
    Tensor c(t.view().dtype, std::span<const int64_t>(t.view().shape.data(), size_t(t.view().ndim)), d);
    copy(c, t);
    t = std::move(c);
  }

 private:
  // Views of one shape and dtype (contiguous, off d) go into one [E, ...] tensor; anything else (experts of
  // different shapes or formats, which no checkpoint of these models has) is uploaded view by view.
  void stack(std::vector<MlpWeights>& ex, Weight MlpWeights::*p, TensorView Weight::*part, Device d) {
    const TensorView first = (ex[0].*p).*part;
    bool same = first.present() && first.device != d && first.is_contiguous();
    for (const MlpWeights& m : ex) {
      const TensorView& v = (m.*p).*part;
      same = same && v.present() && v.device == first.device && v.dtype == first.dtype && v.ndim == first.ndim &&
             v.shape == first.shape && v.is_contiguous();
    }
    if (!same) {
      for (MlpWeights& m : ex) view((m.*p).*part, d);
      return;
    }
    std::vector<int64_t> shape{int64_t(ex.size())};
    shape.insert(shape.end(), first.shape.begin(), first.shape.begin() + first.ndim);
    Tensor t(first.dtype, std::span<const int64_t>(shape), d);
    const size_t bytes = size_t(first.numel()) * first.element_size();
    for (size_t e = 0; e < ex.size(); ++e) {
      TensorView& v = (ex[e].*p).*part;
      TensorView slice = v;
      slice.data = static_cast<char*>(t.data()) + e * bytes;
      slice.device = d;
      copy(slice, v);
      done_.emplace(Key{v.data, int(d.type), d.index, v.dtype, v.numel()}, slice.data);
      v = slice;
    }
    store_.push_back(std::move(t));
  }

  using Key = std::tuple<const void*, int, int, DType, int64_t>;  // (data, device type, index, dtype, numel)
  std::vector<Tensor>& store_;
  std::map<Key, void*> done_;
};

}  // namespace

void place_weights(ModelWeights& w, const Config& c, const Placement& p) {
  Uploader up(w.device_copies);
  // Blocks on the host's own device keep the mapping; any other device (a GPU, or a second host "device"
  // cpu:1 in tests) gets copies.
  auto gpu = [](Device d) { return d != Device::cpu(); };
  if (gpu(p.embedding)) up.view(w.embed, p.embedding);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights& L = w.layers[size_t(i)];
    const Placement::Layer& P = p.layers[size_t(i)];
    if (gpu(P.attn_mix)) up.view(L.attn_res_proj, P.attn_mix), up.view(L.attn_res_norm, P.attn_mix);
    if (gpu(P.ffn_mix)) up.view(L.mlp_res_proj, P.ffn_mix), up.view(L.mlp_res_norm, P.ffn_mix);
    if (gpu(P.mixer)) {
      const Device d = P.mixer;
      up.view(L.input_norm, d);
      if (c.is_kda_layer(i)) {
        KdaLayerWeights& k = L.kda;
        for (Weight* x : {&k.q, &k.k, &k.v, &k.f_a, &k.f_b, &k.b, &k.g, &k.g_a, &k.g_b, &k.o}) up.weight(*x, d);
        for (TensorView* x : {&k.conv_q, &k.conv_k, &k.conv_v, &k.o_norm}) up.view(*x, d);
        up.owned(k.A_log, d), up.owned(k.dt_bias, d);
      } else {
        MlaLayerWeights& m = L.mla;
        for (Weight* x : {&m.q, &m.q_a, &m.q_b, &m.kv_a, &m.kv_b, &m.g, &m.o}) up.weight(*x, d);
        up.view(m.q_a_norm, d), up.view(m.kv_a_norm, d);
      }
    }
    if (gpu(P.ffn)) {
      const Device d = P.ffn;
      up.view(L.post_norm, d);
      FfnWeights& f = L.ffn;
      if (!f.moe) {
        up.mlp(f.dense, d);
      } else {
        up.weight(f.router, d), up.owned(f.router_bias, d);
        up.weight(f.latent_down, d), up.weight(f.latent_up, d), up.view(f.latent_norm, d);
        up.experts(f.experts, d);
        if (f.has_shared) up.mlp(f.shared, d);
      }
    }
  }
  if (gpu(p.output_mix) && c.attn_res_block_size) up.view(w.out_res_proj, p.output_mix), up.view(w.out_res_norm, p.output_mix);
  if (gpu(p.head)) up.view(w.final_norm, p.head), up.weight(w.lm_head, p.head);
}

void check_placement_devices(const Config& c, const Placement& placement) {
  const check::Checker k("Model");
  if (int64_t(placement.layers.size()) != c.num_hidden_layers)
    k.fail("placement", std::to_string(c.num_hidden_layers) + " layers (the config's)", std::to_string(placement.layers.size()));
  std::vector<Device> devices{placement.device};  // the one asked for (even if every block fell back) and the used
  for (const Placement::Block& b : placement.blocks) devices.push_back(b.device);
  for (const Device d : devices) {
    if (d.type == DeviceType::cpu) continue;
    if (!cuda_built())
      k.fail("device", "cpu (this build has no CUDA backend: configure with -DKIMI_CUDA=ON)", to_string(d));
    const int n = cuda_device_count();
    if (d.index < 0 || d.index >= n)
      k.fail("device", "cpu or a visible CUDA device (" + std::to_string(n) + " visible)", to_string(d));
    // One Context (one stream) drives a forward: blocks spread over several GPUs would launch on the wrong
    // device's stream. Expert parallelism over several GPUs is its own mechanism (not this placement).
    for (const Device e : devices)
      if (e.type == DeviceType::cuda && e != d)
        k.fail("placement", "blocks on at most one CUDA device", to_string(d) + " and " + to_string(e));
  }
}

Device home_device(const TensorSpec& s, const Config& c, const Placement& p) {
  const std::string& n = s.name;
  auto has = [&](const char* part) { return n.find(part) != std::string::npos; };
  if (s.layer < 0) {
    if (n == tensor_prefix(c) + "embed_tokens.weight") return p.embedding;
    if (has("output_attn_res_")) return p.output_mix;
    return p.head;  // the final norm, lm_head
  }
  const Placement::Layer& L = p.layers[size_t(s.layer)];
  if (has(".self_attention_res_")) return L.attn_mix;
  if (has(".mlp_res_")) return L.ffn_mix;
  if (has(".input_layernorm.") || has(".self_attn.")) return L.mixer;
  return L.ffn;  // post_attention_layernorm, mlp., block_sparse_moe.
}

}  // namespace kimi::model
