// kimi/model/model.h: a loaded Kimi K3 / Kimi-Linear model and its forward pass (SPEC 1, 5-8).
//
// One code path serves both models; the config's switches (SPEC 1) pick the blocks:
//   h = embed(tokens)                                                  [T, d] fp32
//   plain pre-norm (no attn_res_block_size), per layer i:
//     h += Mixer_i(RMSNorm_in(h))          Mixer = KDA (SPEC 5) or gated MLA (SPEC 6)
//     h += FFN_i(RMSNorm_post(h))          FFN = dense GLU MLP or (latent) MoE (SPEC 7)
//   Block Attention Residuals (K3, SPEC 8): the same mixers and FFNs, their inputs mixed from the sealed
//     blocks and the running `partial` sum by attn_res; a block is sealed every attn_res_block_size layers.
//   logits = lm_head(RMSNorm(h))          (AttnRes: h = attn_res over the blocks and partial first)
//
// The residual stream (and AttnRes blocks), router scores, norm statistics, KDA state, caches and logits are fp32;
// the blocks' normalized inputs and temporaries are in the model's activation dtype (f32, or bf16: the default on a
// GPU; docs/model/runtime.md has the measured error). Weights stay in the checkpoint's dtype (bf16 / MXFP4) and
// are converted inside the operators. A step's temporaries come from one planned arena per device (Model::plan).
// Model::random(config, device, seed) builds the same model with random weights made on the device, with no
// checkpoint (benchmarks of full-size models: `kimi bench --random`).
// Devices: Model(dir, Device::cuda(i)) places every block whose operators all have CUDA kernels on the GPU
// and the others on the CPU (kimi/model/placement.h; the fallbacks are noted once through kimi/log.h). A batch is packed: N sequences of any lengths (>= 1 token each), each
// in its own cache slot, each continuing from the tokens its slot already holds, so prefill, chunked
// prefill, decode and mixes of them are the same call.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kimi/context.h"
#include "kimi/model/cache.h"
#include "kimi/model/checkpoint.h"
#include "kimi/model/config.h"
#include "kimi/model/placement.h"
#include "kimi/tensor.h"

namespace kimi::model {

struct ModelWeights;  // src/model/weights.h
struct StepRuntime;   // src/model/step_plan.h

// What Model::plan (or forward, planning for its batches) has sized.
struct StepPlanInfo {
  int64_t max_tokens = 0, max_seqs = 0;  // 0: nothing planned yet
  bool explicit_plan = false;            // set by Model::plan: larger batches are refused
  std::vector<std::pair<Device, size_t>> arena_bytes;  // the arena of each device (the host's holds index tables)
};

// How a GPU model's decode steps run (Model::decode_graph_status; docs/model/runtime.md "Decode steps from CUDA
// graphs"). A decode step (every sequence continues its slot by one token) on a model whose blocks and head all sit
// on one CUDA device runs on a stream of the runtime: its first step with N sequences runs eagerly and is captured
// into a CUDA graph, later steps with N sequences replay it. Everything else (prefill, mixed batches, the CPU, a
// placement over several devices, an on_layer callback) runs eagerly.
struct DecodeGraphStatus {
  bool enabled = true;    // the setting: Model::set_decode_graphs, default on unless KIMI_DECODE_GRAPHS=0
  bool supported = true;  // the placement allows graphs (one CUDA device for every block and the head)
  std::string summary;    // one line for users: "on: ...", or "off: <why>"
  std::vector<int64_t> batch_sizes;  // N of the graphs held now (replayable)
  std::vector<std::pair<int64_t, std::string>> refused;  // N whose capture failed, with the reason (eager instead)
  int64_t replays = 0;       // decode steps run from a graph (since the model was made)
  int64_t captures = 0;      // graphs captured (a re-plan or a new cache makes them again)
  int64_t eager_decode = 0;  // decode steps that ran eagerly (first steps of a batch size, refused ones, off)
};

class Model {
 public:
  // Opens dir (config.json + safetensors), validates it against the schema (open_model) and binds every
  // weight as a view into the read-only mapping: no weight is copied. Only the small fp32 parameters
  // the operators need as f32 (A_log's first H entries, dt_bias, the router correction bias) are
  // converted once into owned tensors (never downcast).
  // device: cpu (everything on the CPU), or cuda(i): the placement plan_placement(config, device, supported)
  // (supported: kimi::op_supported when empty; tests pass fakes to force blocks onto the CPU). The weights of
  // the GPU blocks are uploaded once each; the plan's notes go to kimi::note once. Throws kimi::Error when
  // the device does not exist (a build without CUDA, an index past the visible devices).
  // keep_experts: the routed experts to bind (ExpertFilter, kimi/model/checkpoint.h); the others are never read.
  // With a filter the model must be on the CPU (kimi::Error naming 'keep_experts' otherwise).
  explicit Model(const std::string& dir, Device device = Device::cpu(), const OpSupported& supported = {},
                 const ExpertFilter& keep_experts = {});
  // An explicit placement (place_blocks; e.g. tests put blocks on a second host device, Device{cpu, 1}, to run
  // the cross-device path without a GPU). Its notes are printed once like the planned ones. Throws
  // kimi::Error when it does not fit the config or names a device that does not exist.
  Model(const std::string& dir, Placement placement, const ExpertFilter& keep_experts = {});

  // A model of config c with random weights and no checkpoint: every tensor of checkpoint_schema(c, opt) is
  // allocated on the device of the block that reads it (the placement a loaded model of c would get: the
  // same rule, the same devices) and filled there by fill_random (kimi/ops/random.h) with the values of
  // kimi/model/random_weights.h, seeded by tensor_seed(seed, name). No disk, no host copy: a model as large
  // as the GPU's memory fits it. The same (c, opt, seed) gives the same weights on every device (they are not
  // those `kimi random-model --seed` writes: that draws the same distributions from another generator).
  // opt.mxfp4_experts stores the routed experts as MXFP4 (K3 checkpoints do). Throws kimi::Error as the
  // constructors do for devices, and checkpoint_schema's error for MXFP4 widths not divisible by 32.
  static Model random(const Config& c, Device device, uint64_t seed, const SchemaOptions& opt = {},
                      const OpSupported& supported = {});
  static Model random(const Config& c, Placement placement, uint64_t seed, const SchemaOptions& opt = {});

  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Config& config() const { return config_; }
  // The opened checkpoint (schema, safetensors mapping, unused tensors); nullptr for a random model.
  const ModelFiles* files() const { return files_ ? &*files_ : nullptr; }
  const ModelWeights& weights() const { return *weights_; }
  const Placement& placement() const { return placement_; }
  Device device() const { return placement_.device; }
  // Bytes of weights held on devices other than the host's cpu:0: the GPU blocks' copies of a loaded
  // checkpoint (0 on the CPU), or the random weights made there.
  size_t device_weight_bytes() const;
  // Bytes of the routed experts' weights bound (all of them, or those keep_experts kept), and whether every
  // routed expert is bound (false: the model runs only with ForwardOptions::moe).
  size_t routed_expert_bytes() const;
  bool has_every_expert() const { return every_expert_; }

  // The activation dtype: the dtype of every block's normalized input and temporaries (docs/model/runtime.md).
  // Default: bf16 when the model's device is a GPU, f32 on the CPU (the reference).
  DType activation_dtype() const;
  // f32 or bf16 (else kimi::Error naming `activation_dtype`); an existing plan is redone for the same limits.
  void set_activation_dtype(DType dt);

  // Plans the model's step: sizes one arena per device the step uses (the host's for the index tables, every
  // block device's for the activations and each block's temporaries, measured for a batch of max_tokens tokens
  // in max_seqs sequences) and allocates each once. From then on a forward allocates and zero-fills nothing,
  // and a batch of more than max_tokens tokens or max_seqs sequences is a kimi::Error before anything is
  // written (until the next plan). Without a plan, forward plans for its own batch (keeping the larger sizes).
  // Requires 1 <= max_seqs <= max_tokens (kimi::Error naming the argument otherwise). Steps and plans of one
  // Model run one at a time (other threads wait; a call from inside a forward's on_layer is refused).
  void plan(int64_t max_tokens, int64_t max_seqs) const;
  StepPlanInfo planned() const;

  // Decode steps from CUDA graphs (DecodeGraphStatus): on by default for a GPU model unless the environment sets
  // KIMI_DECODE_GRAPHS=0; set_decode_graphs(false) drops the graphs held and runs every step eagerly (for comparison
  // and debugging: both give bit-identical logits and caches).
  void set_decode_graphs(bool on);
  DecodeGraphStatus decode_graph_status() const;

 private:
  struct RuntimeDeleter {
    void operator()(StepRuntime* p) const;
  };
  static std::unique_ptr<StepRuntime, RuntimeDeleter> new_runtime();
  friend StepRuntime& runtime_of(const Model& m);  // forward.cpp

  struct RandomTag {};
  Model(RandomTag, const Config& c, Placement placement, uint64_t seed, const SchemaOptions& opt);

  std::optional<ModelFiles> files_;
  Config config_;
  Placement placement_;
  std::unique_ptr<ModelWeights> weights_;
  bool every_expert_ = true;
  std::unique_ptr<StepRuntime, RuntimeDeleter> runtime_ = new_runtime();  // the dtype setting and the plan
};

// A packed batch of N sequences.
struct Batch {
  std::span<const int32_t> tokens;      // [T] sequence n's new tokens at [cu_seqlens[n], cu_seqlens[n+1])
  std::span<const int64_t> cu_seqlens;  // [N+1] offsets from 0 to T, every sequence >= 1 token
  std::span<const int64_t> slots;       // [N] distinct cache slots; sequence n continues at cache.length(slot)
};

enum class LogitsFor : uint8_t {
  last,  // the last token of each sequence: [N, vocab]
  all,   // every token: [T, vocab]
};

struct ForwardOptions {
  LogitsFor logits = LogitsFor::last;
  // Called with the embedding output (layer -1) and, after each decoder layer i, the residual stream
  // [T, d] f32 (with Block AttnRes: the running `partial` sum, SPEC 8). For per-layer parity tests.
  // The view is always a HOST view (copied from the GPU when the stream is there), valid during the call.
  std::function<void(int64_t layer, TensorView hidden)> on_layer;
  // Runs MoE layer `layer`'s block (routed experts, latent norm / up-projection and shared expert: latent_moe's
  // contract) in place of latent_moe: x [T, d] its input (the normalized residual, activation dtype), y f32 [T, d]
  // its output before the residual add. Expert parallelism sets it (src/dist/model.h: every rank calls forward for
  // every step, in lockstep); CPU models only (a step with it runs eagerly, never from a CUDA graph).
  std::function<void(int64_t layer, TensorView x, TensorView y)> moe;
};

// Runs the batch through the model, appends its tokens to the cache slots and returns f32 logits as a HOST
// tensor whatever the model's device (the head's output is copied back when the head runs on a GPU).
// Validates the batch (token ids in [0, vocab), offsets, distinct slots in range, room in each slot) and
// the cache (built for this model's config, each layer's pools on the device its mixer runs on) before
// touching the cache; errors name the argument, the expected and the actual value. The batch (tokens,
// offsets, slots) is host memory; on a GPU, forward returns after the device work it queued has finished.
// Steps run in the model's plan (Model::plan; without one, forward plans for the batch, keeping the larger sizes);
// an explicit plan smaller than the batch is a kimi::Error naming batch.tokens or batch.cu_seqlens.
Tensor forward(const Model& model, Cache& cache, const Batch& batch, const ForwardOptions& opt = {},
               const Context& ctx = {});

// The same, writing the logits into `logits`: an f32 contiguous [N, vocab] (LogitsFor::last) or [T, vocab]
// (LogitsFor::all) view on the host (cpu) or on the head's device (Placement::head: the head writes the rows there,
// on ctx's stream, and nothing is copied to the host); with a plan, the step allocates nothing (generate() steps this way).
void forward_into(const Model& model, Cache& cache, const Batch& batch, TensorView logits,
                  const ForwardOptions& opt = {}, const Context& ctx = {});

}  // namespace kimi::model
