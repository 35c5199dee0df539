// Implementation of src/model/step_plan.h and of Model's runtime settings (activation dtype, plan).
#include "model/step_plan.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "kimi/error.h"

namespace kimi::model {

Workspace& Workspaces::on(Device d) {
  for (Workspace& w : list)
    if (w.device() == d) return w;
  throw Error("forward: internal: no workspace on " + to_string(d) + " (not a device of the plan)");
}

StepLock::StepLock(StepRuntime& rt, const char* op) : rt_(rt) {
  if (rt.owner.load() == std::this_thread::get_id())
    throw Error(std::string(op) + ": called from inside a forward on the same Model (an on_layer callback); a Model "
                "runs one step at a time");
  rt.mu.lock();
  rt.owner.store(std::this_thread::get_id());
}

StepLock::~StepLock() {
  rt_.owner.store(std::thread::id());
  rt_.mu.unlock();
}

namespace {
void add_device(std::vector<Device>& v, Device d) {
  if (std::find(v.begin(), v.end(), d) == v.end()) v.push_back(d);
}
}  // namespace

std::vector<Device> block_devices(const Placement& p) {
  std::vector<Device> v;
  for (const Placement::Block& b : p.blocks) add_device(v, b.device);
  add_device(v, p.head);
  return v;
}

std::vector<Device> step_devices(const Placement& p) {
  std::vector<Device> v{Device::cpu()};
  for (const Device d : block_devices(p)) add_device(v, d);
  return v;
}

DType activation_dtype(const Model& m, const StepRuntime& rt) {
  if (rt.dtype) return *rt.dtype;
  return m.device().type == DeviceType::cpu ? DType::f32 : DType::bf16;
}

StepIndex step_tables(Workspace& host, Step& s, int64_t T, int64_t N, int64_t R) {
  if (host.used() != 0) throw Error("forward: internal: the step's tables must be the host workspace's first bytes");
  StepIndex ix;
  ix.tokens = host.alloc(DType::i64, {T});
  s.cu_t = host.alloc(DType::i64, {N + 1});
  s.slot_t = host.alloc(DType::i64, {N});
  s.pos_t = host.alloc(DType::i64, {T});
  s.tok_slot_t = host.alloc(DType::i64, {T});
  s.mla_perm = host.alloc(DType::i64, {T});
  s.mla_inv = host.alloc(DType::i64, {T});
  s.fresh_cu_t = host.alloc(DType::i64, {N + 1});
  s.cont_lens_t = host.alloc(DType::i64, {T});
  s.cont_slot_t = host.alloc(DType::i64, {T});
  ix.rows = host.alloc(DType::i64, {R});
  return ix;
}

TensorView device_tables(Workspaces& ws, const Placement& p, size_t bytes) {
  const std::optional<Device> d = graph_device(p);
  if (!d) return {};
  return ws.on(*d).alloc(DType::u8, {int64_t(bytes)});
}

Streams step_streams(Workspaces& ws, const Model& m, const std::vector<Device>& devices, int64_t T, DType dt,
                     const Context& ctx) {
  const Config& c = m.config();
  const int64_t d = c.hidden_size;
  auto stream = [&](DType t) {
    std::vector<TensorView> bufs;
    for (const Device dev : devices) bufs.push_back(ws.on(dev).alloc(t, {T, d}));
    return Mirrored(std::move(bufs), ctx);
  };
  Streams s;
  // Block AttnRes seals a block at every layer i with i % block_size == 0: the embedding output and each later
  // partial become blocks, so the residual streams are the seals plus the last partial.
  int64_t streams = 1;
  if (c.attn_res_block_size)
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) streams += i % *c.attn_res_block_size == 0;
  for (int64_t k = 0; k < streams; ++k) s.res.push_back(stream(DType::f32));
  s.xn = stream(dt);
  if (c.attn_res_block_size) s.mixed = stream(DType::f32);
  return s;
}

HeadBuffers head_buffers(Workspace& ws, const Config& c, int64_t R, int64_t head_rows, DType dt, bool direct) {
  HeadBuffers h;
  h.sel = ws.alloc(DType::f32, {R, c.hidden_size});
  h.x = ws.alloc(dt, {R, c.hidden_size});
  if (!direct) h.out = ws.alloc(DType::f32, {std::min(R, head_rows), c.vocab_size});
  return h;
}

namespace {
// The step's allocation sequence for the largest batch of `l`, on measuring workspaces (forward() performs the
// same sequence on the real ones): returns each device's peak bytes, in step_devices order.
std::vector<size_t> measure_step(const Model& m, const StepLimits& l, DType dt) {
  const Config& c = m.config();
  const Placement& P = m.placement();
  const ModelWeights& w = m.weights();
  const std::vector<Device> devices = step_devices(P);
  Workspaces ws;
  for (const Device d : devices) ws.list.emplace_back(d);
  const int64_t T = l.tokens;
  Step s;
  step_tables(ws.on(Device::cpu()), s, T, l.seqs, T);
  device_tables(ws, P, ws.on(Device::cpu()).used());
  const Context ctx;
  step_streams(ws, m, block_devices(P), T, dt, ctx);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const Placement::Layer& PL = P.layers[size_t(i)];
    {
      Workspace& mw = ws.on(PL.mixer);
      const Workspace::Scope scope(mw);
      if (c.is_kda_layer(i)) {
        kda_temps(mw, c, T, dt, false);  // prefill: the convs' outputs and o as well
      } else {
        mla_temps(mw, c, T, dt, true);  // fresh and continuing sequences interleaved: the gathered copies as well
      }
    }
    Workspace& fw = ws.on(PL.ffn);
    const Workspace::Scope scope(fw);
    ffn_temps(fw, c, w.layers[size_t(i)].ffn.moe, T, 1.f);
  }
  head_buffers(ws.on(P.head), c, T, l.head_rows, dt, P.head == Device::cpu());
  std::vector<size_t> peaks;
  for (const Workspace& x : ws.list) peaks.push_back(x.peak());
  return peaks;
}
}  // namespace

void make_plan(const Model& m, StepRuntime& rt, StepLimits limits) {
  const DType dt = activation_dtype(m, rt);
  const std::vector<size_t> peaks = measure_step(m, limits, dt);
  const std::vector<Device> devices = step_devices(m.placement());
  rt.graphs.clear();  // the graphs point into the old arenas
  rt.pinned.reset();
  rt.arenas.clear();  // the old arenas go before the new ones are allocated
  rt.ws.list.clear();
  rt.limits = {};
  for (size_t i = 0; i < devices.size(); ++i) {
    Tensor a = Tensor::uninitialized(DType::u8, {int64_t(peaks[i])}, devices[i]);
    rt.ws.list.emplace_back(a.data(), peaks[i], devices[i]);
    rt.arenas.push_back(std::move(a));
  }
  if (std::any_of(devices.begin(), devices.end(), [](Device d) { return d.type == DeviceType::cuda; }))
    rt.pinned = std::make_unique<PinnedHost>(rt.arenas[0].view());  // devices[0] is the host (step_devices)
  rt.limits = limits;
}

// ---- Model's runtime settings ----

void Model::RuntimeDeleter::operator()(StepRuntime* p) const { delete p; }

std::unique_ptr<StepRuntime, Model::RuntimeDeleter> Model::new_runtime() {
  return std::unique_ptr<StepRuntime, RuntimeDeleter>(new StepRuntime);
}

DType Model::activation_dtype() const { return model::activation_dtype(*this, *runtime_); }

void Model::set_activation_dtype(DType dt) {
  if (dt != DType::f32 && dt != DType::bf16)
    check::Checker("Model::set_activation_dtype").fail("activation_dtype", "f32 or bf16", std::string(dtype_name(dt)));
  const StepLock lock(*runtime_, "Model::set_activation_dtype");
  if (runtime_->dtype == dt) return;
  runtime_->dtype = dt;
  if (runtime_->limits.tokens) make_plan(*this, *runtime_, runtime_->limits);  // the same limits in the new dtype
}

void Model::plan(int64_t max_tokens, int64_t max_seqs) const {
  const check::Checker k("Model::plan");
  if (max_tokens < 1) k.fail("max_tokens", "a value >= 1", std::to_string(max_tokens));
  if (max_seqs < 1 || max_seqs > max_tokens)
    k.fail("max_seqs", "a value in [1, max_tokens = " + std::to_string(max_tokens) + "] (every sequence has >= 1 token)",
           std::to_string(max_seqs));
  const StepLock lock(*runtime_, "Model::plan");
  make_plan(*this, *runtime_, {max_tokens, max_seqs, max_seqs});
  runtime_->explicit_plan = true;
}

void Model::set_decode_graphs(bool on) {
  const StepLock lock(*runtime_, "Model::set_decode_graphs");
  runtime_->graphs.set_enabled(on);
}

DecodeGraphStatus Model::decode_graph_status() const {
  const StepLock lock(*runtime_, "Model::decode_graph_status");
  return runtime_->graphs.status(placement_);
}

StepPlanInfo Model::planned() const {
  const StepLock lock(*runtime_, "Model::planned");
  StepPlanInfo info;
  info.max_tokens = runtime_->limits.tokens, info.max_seqs = runtime_->limits.seqs;
  info.explicit_plan = runtime_->explicit_plan;
  for (const Tensor& a : runtime_->arenas) info.arena_bytes.emplace_back(a.device(), a.nbytes());
  return info;
}

}  // namespace kimi::model
