// src/core/registry.h: the operator registry, operator x backend -> {run, supports}.
//
// One slot per public operator (and per internal kernel of the runtime), typed by the arguments the operator's
// validation hands to a backend: the public arguments, plus what src/ops resolved on the host (sizes in
// core/dims.h, index tensors read into vectors). Each backend fills the slots it implements in its
// register_ops (src/cpu/register.cpp, src/cuda/register.cu); an empty slot means "no kernel on that backend".
// Core calls the register functions once, on first use of registry(); which backends a build links is said in
// one generated file (src/core/backends.cpp.in, configured by CMakeLists.txt) and nowhere else.
//
// Readers: dispatch() below (src/ops: validate, then dispatch), op_supported() / all_ops() (kimi/device.h:
// placement, `kimi check`, `kimi inspect`, the harness tests) and the device memory of kimi/device.h
// (DeviceRuntime).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/dims.h"
#include "core/index.h"
#include "core/profile.h"
#include "kimi/context.h"
#include "kimi/ops.h"
#include "kimi/tensor.h"

namespace kimi {

enum class Backend : uint8_t { cpu, cuda };
inline constexpr int kBackends = 2;

constexpr Backend backend_of(Device d) { return d.type == DeviceType::cuda ? Backend::cuda : Backend::cpu; }
std::string_view backend_name(Backend b);  // "cpu", "cuda"

// A backend's refusal of one call (its supports() predicate), in Checker::fail's three parts: the argument as
// the caller names it, what this backend needs, what it got.
struct Refusal {
  std::string arg, expected, got;
};

class Registry;

// The part of a slot that does not depend on its signature: lookups by name.
class SlotBase {
 public:
  // Appends the slot to r.slots() (a slot is a member of r).
  SlotBase(Registry& r, std::string_view name, std::string_view family);
  SlotBase(const SlotBase&) = delete;
  SlotBase& operator=(const SlotBase&) = delete;

  std::string_view name() const { return name_; }
  std::string_view family() const { return family_; }  // the header under include/kimi/ops/ ("" if internal)
  bool is_public() const { return !family_.empty(); }
  bool has(Backend b) const { return has_[size_t(b)]; }

 protected:
  std::array<bool, kBackends> has_{};

 private:
  std::string_view name_, family_;
};

template <class Fn>
class OpSlot;

// One operator: per backend the function that runs it and an optional supports() predicate over the same
// arguments (nullopt: the backend takes the call; absent predicate: it takes every validated call).
template <class... A>
class OpSlot<void(A...)> : public SlotBase {
 public:
  using Run = void (*)(A...);
  using Supports = std::optional<Refusal> (*)(A...);
  struct Impl {
    Run run = nullptr;
    Supports supports = nullptr;
  };

  using SlotBase::SlotBase;
  void set(Backend b, Run run, Supports supports = nullptr) {
    impl_[size_t(b)] = {run, supports};
    has_[size_t(b)] = run != nullptr;
  }
  const Impl& get(Backend b) const { return impl_[size_t(b)]; }

 private:
  std::array<Impl, kBackends> impl_{};
};

// Device memory of a backend other than the host's (src/core/device.cpp keeps host memory itself).
struct DeviceRuntime {
  int (*device_count)() = nullptr;
  void* (*alloc)(Device d, size_t bytes) = nullptr;
  void (*free)(Device d, void* p) = nullptr;
  void (*zero)(Device d, void* p, size_t bytes) = nullptr;  // synchronous
  // bytes from (src, src_dev) to (dst, dst_dev), either side on the host; synchronous.
  void (*copy)(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes, void* stream) = nullptr;
  void (*synchronize)(Device d, void* stream) = nullptr;
  // The device's stream-ordered memory pool (kimi/device.h DeviceMemoryStats::pool_*): reserved bytes now
  // and the high-water mark; and the reset of reset_peak_memory (waits for the device, trims, resets).
  void (*pool_stats)(Device d, size_t* reserved, size_t* peak) = nullptr;
  void (*reset_pool_peak)(Device d) = nullptr;
  size_t (*available)(Device d) = nullptr;  // free device memory (cudaMemGetInfo)

  // Streams and graphs of the model runtime (src/model/decode_graph.h); a stream / graph is an opaque void*.
  //   stream_create   a new non-blocking stream of device d (never the legacy or per-thread default stream),
  //                   with the backend's per-stream state (the cuBLAS handle and its workspace) made now, so
  //                   that nothing is created while the stream is being captured
  //   copy_async      bytes between (src, src_dev) and (dst, dst_dev) queued on stream, no wait (the host side
  //                   must stay valid and unchanged until the stream is synchronized)
  //   capture_begin   starts capturing stream (thread-local mode: other threads' CUDA calls are not affected)
  //   capture_end     ends the capture; keep: instantiates the captured work and returns the executable graph;
  //                   !keep: discards it (also a capture an error invalidated) and returns nullptr, never throws
  //   graph_launch    queues one replay of an executable graph on stream
  void* (*stream_create)(Device d) = nullptr;
  void (*stream_destroy)(Device d, void* stream) = nullptr;  // never throws (destructors)
  void (*copy_async)(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes, void* stream) = nullptr;
  void (*capture_begin)(Device d, void* stream) = nullptr;
  void* (*capture_end)(Device d, void* stream, bool keep) = nullptr;
  void (*graph_launch)(Device d, void* graph, void* stream) = nullptr;
  void (*graph_destroy)(Device d, void* graph) = nullptr;  // never throws (destructors)
  // Timing events (kimi/profile.h): create / destroy one on d; record it on a stream of d; the milliseconds
  // between two recorded events (waits for `end`).
  void* (*event_create)(Device d) = nullptr;
  void (*event_destroy)(Device d, void* event) = nullptr;  // no throw
  void (*event_record)(Device d, void* event, void* stream) = nullptr;
  float (*event_elapsed_ms)(Device d, void* begin, void* end) = nullptr;
  // Page-locking of host memory (kimi/device.h PinnedHost).
  void (*host_register)(void* p, size_t bytes) = nullptr;
  void (*host_unregister)(void* p) = nullptr;  // no throw
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Every slot, in declaration order (the order of all_ops()).
  std::span<SlotBase* const> slots() const { return slots_; }
  const SlotBase* find(std::string_view name) const;  // nullptr: no such slot

  // A backend is linked when its register_ops ran (this build has it).
  bool linked(Backend b) const { return backends_[size_t(b)].linked; }
  const DeviceRuntime& runtime(Backend b) const { return backends_[size_t(b)].runtime; }
  void link(Backend b, const DeviceRuntime& rt = {}) { backends_[size_t(b)] = {true, rt}; }

 private:
  friend class SlotBase;
  struct Linked {
    bool linked = false;
    DeviceRuntime runtime;
  };
  std::vector<SlotBase*> slots_;  // first: the slots below append themselves on construction
  std::array<Linked, kBackends> backends_{};

 public:
  // kimi/ops/norm.h
  OpSlot<void(TensorView x, TensorView w, float eps, TensorView y, const Context&)> rms_norm{*this, "rms_norm", "norm"};
  OpSlot<void(TensorView x, TensorView residual, TensorView w, float eps, TensorView sum, TensorView y, const Context&)>
      add_rms_norm{*this, "add_rms_norm", "norm"};
  OpSlot<void(TensorView o, TensorView z, TensorView w, float eps, TensorView y, const Context&)> gated_rms_norm{
      *this, "gated_rms_norm", "norm"};
  OpSlot<void(TensorView x, TensorView y, float eps, const Context&)> l2_norm{*this, "l2_norm", "norm"};
  // kimi/ops/linear.h, kimi/ops/mxfp4.h
  OpSlot<void(TensorView x, const Weight& w, TensorView y, float beta, const Context&)> linear{*this, "linear",
                                                                                               "linear"};
  OpSlot<void(std::span<const LinearJob> jobs, const Context&)> linear_many{*this, "linear_many", "linear"};
  OpSlot<void(TensorView packed, TensorView scale, TensorView w, const Context&)> mxfp4_dequant{*this, "mxfp4_dequant",
                                                                                                "mxfp4"};
  OpSlot<void(TensorView w, TensorView packed, TensorView scale, const Context&)> mxfp4_quant{*this, "mxfp4_quant",
                                                                                              "mxfp4"};
  // kimi/ops/conv.h. offsets: sequence n is flat tokens [offsets[n], offsets[n+1]) (packed: of batch row 0;
  // else row n, offsets[n] = n * T); rows: sequence n's cache row.
  OpSlot<void(TensorView x, TensorView w, TensorView cache_in, TensorView cache_out,
              const std::vector<int64_t>& offsets, bool packed, const std::vector<int64_t>& rows, ConvActivation act,
              TensorView y, const Context&)>
      short_conv_fwd{*this, "short_conv_fwd", "conv"};
  OpSlot<void(TensorView x, TensorView w, TensorView cache, const std::vector<int64_t>& rows, ConvActivation act,
              TensorView y, const Context&)>
      short_conv_update{*this, "short_conv_update", "conv"};
  // kimi/ops/kda.h, kimi/ops/kda_decode.h. kda_decode_step's rows: sequence n's pool row when the slots are
  // absent or on the host; empty when they are a device tensor (read by the kernel).
  OpSlot<void(TensorView f, const KdaGate& gate, TensorView g, const Context&)> kda_gate{*this, "kda_gate", "kda"};
  OpSlot<void(TensorView b, TensorView beta, const Context&)> kda_beta{*this, "kda_beta", "kda"};
  OpSlot<void(const KdaArgs& a, const KdaDims& d, const Context&)> kda_recurrent_fwd{*this, "kda_recurrent_fwd",
                                                                                     "kda"};
  OpSlot<void(const KdaArgs& a, const KdaDims& d, int chunk_size, const Context&)> kda_chunk_fwd{
      *this, "kda_chunk_fwd", "kda"};
  OpSlot<void(const KdaDecodeArgs& a, const std::vector<int64_t>& rows, const Context&)> kda_decode_step{
      *this, "kda_decode_step", "kda_decode"};
  // kimi/ops/mla.h. cu: packed offsets (empty without cu_seqlens); start / lens / slots: host values or (CUDA
  // only) the device tensors (src/core/index.h).
  OpSlot<void(TensorView q, TensorView latent, TensorView k_pe, const Weight& w_kvb, TensorView gate,
              const std::vector<int64_t>& cu, const MlaDims& d, TensorView o, const Context&)>
      mla_prefill{*this, "mla_prefill", "mla"};
  OpSlot<void(TensorView latent, TensorView k_pe, TensorView cache, const Index& start, const Index& slots,
              const Context&)>
      mla_cache_write{*this, "mla_cache_write", "mla"};
  OpSlot<void(TensorView q, TensorView cache, const Index& lens, const Index& slots, const Weight& w_kvb,
              TensorView gate, const MlaDims& d, TensorView o, const Context&)>
      mla_decode{*this, "mla_decode", "mla"};
  // kimi/ops/moe.h
  OpSlot<void(TensorView logits, TensorView bias, const RouterParams& p, TensorView ids, TensorView weights,
              const Context&)>
      moe_router{*this, "moe_router", "moe"};
  OpSlot<void(TensorView scores, TensorView bias, int top_k, const Context&)> moe_quantile_balance{
      *this, "moe_quantile_balance", "moe"};
  OpSlot<void(TensorView gate, TensorView up, const GluParams& p, TensorView h, const Context&)> glu{*this, "glu",
                                                                                                    "moe"};
  OpSlot<void(TensorView x, const MlpWeights& w, const GluParams& p, TensorView y, float beta, const Context&)> mlp{
      *this, "mlp", "moe"};
  OpSlot<void(TensorView x, const LatentMoeWeights& w, const RouterParams& router, const GluParams& act,
              float norm_eps, TensorView out, TensorView ids, TensorView weights, float beta, const Context&)>
      latent_moe{*this, "latent_moe", "moe"};
  // kimi/ops/attn_res.h, kimi/ops/gather.h
  OpSlot<void(TensorView partial, std::span<const TensorView> blocks, TensorView proj_w, TensorView norm_w, float eps,
              TensorView out, const Context&)>
      attn_res{*this, "attn_res", "attn_res"};
  OpSlot<void(TensorView src, const Index& rows, TensorView out, const Context&)> gather_rows{
      *this, "gather_rows", "gather"};
  // kimi/ops/random.h
  OpSlot<void(TensorView t, const RandomFill& r, const Context&)> fill_random{*this, "fill_random", "random"};
  // kimi/ops/sample.h (host parameters and logits already checked; device ones are read only by the kernel)
  OpSlot<void(TensorView logits, const SampleParams& params, TensorView tokens, const Context&)> sample_tokens{
      *this, "sample_tokens", "sample"};

  // Internal kernels of the runtime (no family: not operators of the public API). src/model/add_into.h.
  OpSlot<void(TensorView out, TensorView y, const Context&)> add_into{*this, "add_into", ""};
};

// The registry with every backend this build links (thread-safe; filled on the first call).
const Registry& registry();

// Each backend's registration (src/cpu/register.cpp, src/cuda/register.cu), and the generated list of those a
// build links (src/core/backends.cpp.in), which registry() calls once.
namespace cpu {
void register_ops(Registry& r);
}
namespace cuda {
void register_ops(Registry& r);
}
void register_backends(Registry& r);

// The failure of a call to device d whose backend has no kernel for the operator: the backend is not built
// ("... has no CUDA backend (configure with -DKIMI_CUDA=ON)") or lacks this operator ("not implemented on ...").
[[noreturn]] void fail_unavailable(const check::Checker& c, Device d);

// Runs a validated call on the backend of device d: fails (naming the operator) when that backend has no kernel
// for it or its supports() refuses the arguments. Never falls back to another backend. Every slot's last argument
// is the call's Context; an OpProfiler on this thread (kimi/profile.h) times the call on its stream.
template <class... A>
void dispatch(const check::Checker& c, Device d, const OpSlot<void(A...)>& slot, std::type_identity_t<A>... args) {
  const auto& impl = slot.get(backend_of(d));
  if (!impl.run) fail_unavailable(c, d);
  if (impl.supports)
    if (const std::optional<Refusal> r = impl.supports(args...)) c.fail(r->arg, r->expected, r->got);
  if (profile::active()) {
    static_assert(std::is_same_v<std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>, const Context&>);
    const profile::CallTimer timer(slot.name(), d, std::get<sizeof...(A) - 1>(std::forward_as_tuple(args...)));
    impl.run(args...);
  } else {
    impl.run(args...);
  }
}

}  // namespace kimi
