// dist/moe.cpp: the EP latent MoE step on CPU ranks (the steps and buffers: moe.h).
#include "dist/moe.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>

#include "cpu/tensor_io.h"
#include "dist/layout.h"
#include "dist/laps.h"
#include "dist/moe_cuda.h"
#include "kimi/error.h"
#include "kimi/ops/linear.h"
#include "kimi/ops/norm.h"

namespace kimi::dist {

namespace {

TensorView f32_view(float* data, int64_t rows, int64_t cols) { return TensorView(data, DType::f32, {rows, cols}); }

int64_t bits(float v) { return int64_t(std::bit_cast<uint32_t>(v)); }

// FNV-1a over the placement's holder lists.
int64_t placement_hash(const Placement& p) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  };
  for (const auto& hs : p.holders) {
    mix(hs.size());
    for (int32_t r : hs) mix(uint64_t(r));
  }
  return int64_t(h >> 1);
}

}  // namespace

std::vector<std::pair<std::string, int64_t>> ep_config_fields(const Placement& placement, const LatentMoeWeights& w,
                                                              const RouterParams& router, const GluParams& act,
                                                              float norm_eps, int64_t max_tokens,
                                                              PlanPolicy policy) {
  const bool latent = w.latent_down.w.present();
  int64_t inter = 0;  // over the experts this rank has (absent ones: holders_only)
  for (const MlpWeights& e : w.experts)
    if (e.gate.w.present()) inter = std::max(inter, e.gate.out_features());
  return {{"ranks", placement.ranks},
          {"experts", int64_t(w.experts.size())},
          {"top_k", router.top_k},
          {"hidden (router in_features)", w.router.w.present() ? w.router.in_features() : 0},
          {"latent width", latent ? w.latent_down.out_features() : 0},
          {"latent norm", w.latent_norm.present() ? 1 : 0},
          {"expert intermediate", inter},
          {"shared intermediate", w.shared ? w.shared->gate.out_features() : 0},
          {"router bias", w.router_bias.present() ? 1 : 0},
          {"renormalize", router.renormalize ? 1 : 0},
          {"routed scaling (f32 bits)", bits(router.scaling)},
          {"activation", int64_t(act.act)},
          {"situ beta (f32 bits)", bits(act.situ_beta)},
          {"situ linear beta (f32 bits)", bits(act.situ_linear_beta)},
          {"norm eps (f32 bits)", bits(norm_eps)},
          {"max_tokens", max_tokens},
          {"placement (hash)", placement_hash(placement)},
          {"plan policy", int64_t(policy)}};
}

int64_t expert_bytes(const MlpWeights& w) {
  int64_t b = 0;
  for (const Weight* x : {&w.gate, &w.up, &w.down})
    for (const TensorView* t : {&x->w, &x->scale})
      if (t->present()) b += t->numel() * int64_t(t->element_size());
  return b;
}

EpMoe::EpMoe(Comm& comm, Placement placement, const LatentMoeWeights& w, const RouterParams& router,
             const GluParams& act, float norm_eps, int64_t max_tokens, PlanPolicy policy)
    : comm_(comm), placement_(std::move(placement)), w_(w), router_(router), act_(act), eps_(norm_eps),
      s_(max_tokens), policy_(policy) {
  const char* fn = "dist::EpMoe";
  // A device-memory comm (NCCL) runs the CUDA step (moe_cuda.h): its all_gathers take device buffers.
  const bool on_device = comm.memory() == CommMemory::device;
  // Compare the configuration first (a collective every rank reaches), then validate locally.
  const auto fields = ep_config_fields(placement_, w, router, act, norm_eps, max_tokens, policy);
  const auto n = size_t(comm.size()), nf = fields.size();
  std::vector<int64_t> mine(nf), all(n * nf);
  for (size_t i = 0; i < nf; ++i) mine[i] = fields[i].second;
  if (on_device && !(w.router.w.present() && w.router.w.device.type == DeviceType::cuda))
    throw Error(std::string(fn) + ": argument 'w.router': expected a CUDA tensor (the comm '" + comm.name() +
                "' keeps its buffers in device memory), got " +
                (w.router.w.present() ? to_string(w.router.w.device) : std::string("absent")));
  if (on_device)
    all_gather_host_through_device(comm, w.router.w.device.index, mine.data(), nf * sizeof(int64_t), all.data());
  else
    comm.all_gather(mine.data(), nf * sizeof(int64_t), all.data());
  for (size_t i = 0; i < nf; ++i)
    for (size_t r = 1; r < n; ++r)
      if (all[r * nf + i] != all[i])
        throw Error(std::string(fn) + ": the configuration differs between ranks: field '" + fields[i].first +
                    "': rank 0 has " + std::to_string(all[i]) + ", rank " + std::to_string(r) + " has " +
                    std::to_string(all[r * nf + i]) + " (every rank must load the same model and EP layout)");
  if (placement_.ranks != comm.size())
    throw Error(std::string(fn) + ": argument 'placement': expected " + std::to_string(comm.size()) +
                " ranks (the world size), got " + std::to_string(placement_.ranks));
  e_ = int(w.experts.size());
  k_ = router.top_k;
  if (placement_.experts != e_)
    throw Error(std::string(fn) + ": argument 'placement': expected " + std::to_string(e_) +
                " experts (w.experts), got " + std::to_string(placement_.experts));
  if (k_ < 1 || k_ > e_)
    throw Error(std::string(fn) + ": argument 'router.top_k': expected 1 <= top_k <= " + std::to_string(e_) +
                ", got " + std::to_string(k_));
  if (max_tokens < 1)
    throw Error(std::string(fn) + ": argument 'max_tokens': expected >= 1, got " + std::to_string(max_tokens));
  if (!w.router.w.present() || w.router.out_features() != e_)
    throw Error(std::string(fn) + ": argument 'w.router': expected [" + std::to_string(e_) + ", d], got " +
                (w.router.w.present() ? "[" + std::to_string(w.router.out_features()) + ", d]" : "absent"));
  d_ = w.router.in_features();
  dl_ = w.latent_down.w.present() ? w.latent_down.out_features() : d_;
  // The experts kept: all (any_rank) or this rank's (holders_only); each must be present.
  const int me = comm.rank();
  resident_ = policy_ == PlanPolicy::holders_only ? placement_.held_by(me) : std::vector<int32_t>(size_t(e_));
  if (policy_ == PlanPolicy::any_rank) std::iota(resident_.begin(), resident_.end(), 0);
  experts_.assign(size_t(e_), MlpWeights{});
  for (int32_t e : resident_) {
    const MlpWeights& x = w.experts[size_t(e)];
    if (!x.gate.w.present() || !x.up.w.present() || !x.down.w.present())
      throw Error(std::string(fn) + ": argument 'w.experts[" + std::to_string(e) + "]': expected its weights (rank " +
                  std::to_string(me) + (policy_ == PlanPolicy::holders_only ? " holds it" : " keeps every expert") +
                  "), got an absent weight");
    experts_[size_t(e)] = x;
    resident_bytes_ += expert_bytes(x);
  }
  w_.experts = {};  // only experts_ is read
  const int64_t ranks = comm.size();
  recv_cap_ = policy_ == PlanPolicy::holders_only ? std::min(ranks * s_ * k_, ranks * s_ * int64_t(resident_.size()))
                                                  : s_ * k_;
  if (on_device) {
    EpCudaConfig c;
    c.comm = &comm;
    c.placement = &placement_;
    c.w = &w_;
    c.experts = experts_;
    c.resident = resident_;
    c.router = router_;
    c.act = act_;
    c.eps = eps_;
    c.s = s_, c.d = d_, c.dl = dl_, c.recv_cap = recv_cap_;
    c.e = e_, c.k = k_;
    c.policy = policy_;
    cuda_ = make_ep_moe_cuda(c);  // copies what it reads
    return;
  }
  send_.assign(size_t(s_ * k_ * dl_), 0.f);
  recv_.assign(size_t(recv_cap_ * dl_), 0.f);
  grouped_.assign(size_t(recv_cap_ * dl_), 0.f);
  back_.assign(size_t(std::max(recv_cap_, s_ * k_) * dl_), 0.f);
}

EpMoe::~EpMoe() = default;

#ifndef KIMI_WITH_NCCL
// Without the NCCL transport no device-memory comm exists in this build (comm.h); a foreign one is refused here.
std::unique_ptr<EpMoeCudaStep> make_ep_moe_cuda(const EpCudaConfig& c) {
  throw Error("dist::EpMoe: argument 'comm': the comm '" + c.comm->name() +
              "' keeps its buffers in device memory, but this build has no CUDA EP step (it needs KIMI_CUDA=ON and "
              "KIMI_EP_NCCL=ON with NCCL found)");
}
void all_gather_host_through_device(Comm& comm, int, const void*, size_t, void*) {
  throw Error("dist::EpMoe: argument 'comm': the comm '" + comm.name() +
              "' keeps its buffers in device memory, but this build has no CUDA EP step (it needs KIMI_CUDA=ON and "
              "KIMI_EP_NCCL=ON with NCCL found)");
}
#endif

void EpMoe::forward(TensorView x, TensorView out, TensorView ids_out, TensorView weights_out, EpStepStats* stats,
                    const Context& ctx) {
  const char* fn = "dist::EpMoe::forward";
  if (cuda_) {
    cuda_->forward(x, out, ids_out, weights_out, stats, ctx);
    return;
  }
  if (x.ndim != 2 || x.size(1) != d_ || x.size(0) > s_)
    throw Error(std::string(fn) + ": argument 'x': expected [T, " + std::to_string(d_) + "] with T <= max_tokens (" +
                std::to_string(s_) + "), got " + x.shape_string());
  if (out.ndim != 2 || out.size(0) != x.size(0) || out.size(1) != d_)
    throw Error(std::string(fn) + ": argument 'out': expected " + x.shape_string() + " (like x), got " +
                out.shape_string());
  if (!(x.device == Device::cpu()) || !(out.device == Device::cpu()))
    throw Error(std::string(fn) + ": arguments 'x', 'out': expected host (cpu) tensors (the comm '" + comm_.name() +
                "' keeps its buffers in host memory), got " + to_string(x.device) + ", " + to_string(out.device));
  const int64_t t = x.size(0);
  const auto st = size_t(t), sk = size_t(k_), sdl = size_t(dl_);

  Laps laps;
  EpStepStats st_local;
  // 1-2. Local routing and the latent.
  std::vector<float> logits(st * size_t(e_)), wts(st * sk), z(st * sdl);
  std::vector<int32_t> ids(st * sk);
  if (t > 0) {
    linear(x, w_.router, f32_view(logits.data(), t, e_), 0.f, ctx);
    moe_router(f32_view(logits.data(), t, e_), w_.router_bias, router_, TensorView(ids.data(), DType::i32, {t, k_}),
               f32_view(wts.data(), t, k_), ctx);
    if (w_.latent_down.w.present())
      linear(x, w_.latent_down, f32_view(z.data(), t, dl_), 0.f, ctx);
    else
      z = cpu::to_f32(x);
  }

  st_local.route_s = laps.lap();
  // 3. Counts -> plan -> layouts (identical plan on every rank).
  const auto n = size_t(comm_.size());
  std::vector<int64_t> mine(size_t(e_), 0), counts(n * size_t(e_));
  for (int32_t e : ids) ++mine[size_t(e)];
  comm_.all_gather(mine.data(), mine.size() * sizeof(int64_t), counts.data());
  const StepPlan plan = plan_step(placement_, counts, policy_);
  const int me = comm_.rank();
  const DispatchLayout dl = dispatch_layout(plan, me, ids, k_, s_ * k_);
  const ReceiveLayout rl = receive_layout(plan, me, recv_cap_);

  st_local.plan_s = laps.lap();
  // 4. Dispatch the latent rows.
  for (size_t i = 0; i < dl.send_slot.size(); ++i)
    std::copy_n(&z[size_t(dl.send_slot[i] / k_) * sdl], sdl, &send_[i * sdl]);
  comm_.all_to_all_v(send_.data(), dl.send_counts, dl.send_displs, recv_.data(), rl.recv_counts, rl.recv_displs,
                     sdl * sizeof(float));

  st_local.dispatch_s = laps.lap();
  // 5. Grouped rows per local expert -> Expert_e -> back into the received rows' places.
  for (size_t j = 0; j < rl.grouped_from.size(); ++j)
    std::copy_n(&recv_[size_t(rl.grouped_from[j]) * sdl], sdl, &grouped_[j * sdl]);
  for (size_t i = 0; i < rl.experts.size(); ++i) {
    const int64_t r0 = rl.expert_rows[i], rows = rl.expert_rows[i + 1] - r0;
    float* g = &grouped_[size_t(r0) * sdl];
    // Expert_e: grouped rows -> back_ (scratch, same rows), then each output over its received row in recv_.
    const TensorView ye = f32_view(&back_[size_t(r0) * sdl], rows, dl_);  // [rows, Dl] scratch
    const MlpWeights& we = experts_[size_t(rl.experts[i])];
    if (!we.gate.w.present())
      throw Error(std::string(fn) + ": internal: the plan gave rank " + std::to_string(me) + " expert " +
                  std::to_string(rl.experts[i]) + ", which it does not keep");
    mlp(f32_view(g, rows, dl_), we, act_, ye, 0.f, ctx);
    for (int64_t j = r0; j < r0 + rows; ++j)
      std::copy_n(&back_[size_t(j) * sdl], sdl, &recv_[size_t(rl.grouped_from[size_t(j)]) * sdl]);
  }

  st_local.expert_s = laps.lap();
  // 6. Combine: outputs back to their sources (counts swapped), then per slot.
  comm_.all_to_all_v(recv_.data(), rl.recv_counts, rl.recv_displs, back_.data(), dl.send_counts, dl.send_displs,
                     sdl * sizeof(float));
  std::vector<int64_t> row_of(st * sk);
  for (size_t i = 0; i < dl.send_slot.size(); ++i) row_of[size_t(dl.send_slot[i])] = int64_t(i);

  // 7. y[t] = sum_k w_tk out_tk in ascending expert order; norm; up; + shared.
  std::vector<float> y(st * sdl, 0.f);
  std::vector<int> order(sk);
  for (size_t tok = 0; tok < st; ++tok) {
    std::iota(order.begin(), order.end(), 0);
    const int32_t* id = &ids[tok * sk];
    std::sort(order.begin(), order.end(), [&](int a, int b) { return id[a] < id[b]; });
    float* yt = &y[tok * sdl];
    for (int j : order) {
      const float wk = wts[tok * sk + size_t(j)];
      const float* src = &back_[size_t(row_of[tok * sk + size_t(j)]) * sdl];
      for (size_t c = 0; c < sdl; ++c) yt[c] += wk * src[c];
    }
  }
  st_local.combine_s = laps.lap();
  if (t > 0) {
    const TensorView yv = f32_view(y.data(), t, dl_);
    if (w_.latent_norm.present()) rms_norm(yv, w_.latent_norm, eps_, yv, ctx);
    std::vector<float> res;
    if (w_.latent_down.w.present()) {
      res.resize(st * size_t(d_));
      linear(yv, w_.latent_up, f32_view(res.data(), t, d_), 0.f, ctx);
    } else {
      res = std::move(y);
    }
    if (w_.shared) mlp(x, *w_.shared, act_, f32_view(res.data(), t, d_), 1.f, ctx);
    for (size_t i = 0; i < st * sk; ++i) {
      if (ids_out.present()) reinterpret_cast<int32_t*>(cpu::row_ptr(ids_out, int64_t(i / sk)))[i % sk] = ids[i];
      if (weights_out.present()) reinterpret_cast<float*>(cpu::row_ptr(weights_out, int64_t(i / sk)))[i % sk] = wts[i];
    }
    cpu::from_f32(res.data(), out);
  }
  st_local.tail_s = laps.lap();
  if (stats) {
    st_local.home_load = plan.home_load;
    st_local.load = plan.load;
    st_local.total_pairs = plan.total_pairs;
    st_local.moved_pairs = plan.moved_pairs;
    st_local.moved_segments = plan.moved_segments;
    *stats = std::move(st_local);
  }
}

}  // namespace kimi::dist
