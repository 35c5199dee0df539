// src/model/decode_graph.h: decode steps replayed from CUDA graphs (docs/model/runtime.md "Decode steps from CUDA
// graphs").
//
// A graph step is a decode step (every sequence continues its slot by exactly one token: no fresh sequence, so no
// prefill form) of a model whose blocks and head all sit on one CUDA device (graph_device), without an on_layer
// callback. It runs on a stream the runtime owns (DeviceRuntime::stream_create: non-blocking, its cuBLAS handle
// and workspace made with it):
//   1. ONE async H2D copy of the step's host tables (token ids, Step's index tables, the head's rows: one
//      contiguous region at the start of the host arena) into their device copy (the same region at the start of
//      the graph device's arena, so every table sits at the same offset); the blocks read the device copies
//      (a Step whose views are rebased there: every index operator takes the device form).
//   2. The step's work: replayed from the graph of its batch size N, or, for the first step with N sequences,
//      run eagerly on the stream (it also warms every kernel: attributes, module loads, cuBLAS) and then captured
//      once more (capture executes nothing) into the graph the next step with N sequences replays.
//   3. ONE async D2H copy of the head's device logits [N, vocab] into the caller's buffer, then one stream
//      synchronization: the step's only host wait.
// The graphs hold raw pointers into the plan's arenas and the cache's pools, and the activation dtype is baked into
// the kernels they call: they are kept per "generation" (the arenas' and pools' addresses, the cache's shape, the
// dtype) and dropped whenever it changes (a re-plan, a new or grown cache, a new dtype), and on a re-plan. The
// token values, positions, lengths and slots are not part of the key: they are read from the device tables, so a
// slot reset between steps, or new slots of the same N, replay the same graph.
// An operator that cannot be captured throws before touching the stream (cuda/scratch.cuh refuse_capture): the
// capture is discarded, that N runs eagerly from then on, and the reason is kept (decode_graph_status) and noted
// once (kimi/log.h). With graphs turned off (Model::set_decode_graphs(false), KIMI_DECODE_GRAPHS=0) a graph step
// still runs steps 1 and 3 and launches the same work eagerly: the device form of the index tables plans some
// kernels differently from the host form (mla_decode splits the cache's max_len, not the batch's longest
// sequence), so this is what makes graphs on and off bit-identical. Any other step (prefill, mixed, CPU, several
// devices, on_layer) runs eagerly on the caller's context with the host tables.
// While a profiler (kimi/profile.h) is alive on the thread a graph step launches its work eagerly: a replay
// dispatches nothing to time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kimi/context.h"
#include "kimi/model/cache.h"
#include "kimi/model/model.h"
#include "kimi/tensor.h"
#include "model/blocks.h"

namespace kimi {
struct DeviceRuntime;  // src/core/registry.h
}

namespace kimi::model {

// The CUDA device every block and the head of p run on, or nullopt with *why (for the status) when there is none.
std::optional<Device> graph_device(const Placement& p, std::string* why = nullptr);

// One step as decode_graph sees it (forward.cpp fills it after validating and filling the host tables).
struct GraphStep {
  const Step& s;                         // host tables (views into the host arena)
  TensorView host_tables, device_tables;  // the tables' region in the host arena and its device copy (u8 bytes)
  TensorView tokens, rows;               // host i64 [T] token ids and [R] head rows (inside host_tables)
  int64_t R = 0;                         // logits rows
  int64_t head_rows = 0;                 // the plan's head rows (the graph's head writes its R rows at once)
  DType dtype;                           // activation dtype
  std::vector<const void*> arenas;       // the plan's arenas
  const Cache& cache;
  int64_t layers = 0;                    // the cache's layers (the config's num_hidden_layers)
  bool on_layer = false;                 // an on_layer callback: host copies inside the step, never captured
  TensorView logits;                     // the caller's host [R, vocab] f32
  const Context& ctx;                    // the caller's context (its CPU thread count is kept)
};

// The whole step's device work (embedding to head) on ctx's stream, reading the tables of s / tokens / rows:
// returns the head's device output [R, vocab] f32 (the logits before the copy to the host).
using GraphBody = std::function<TensorView(const Step& s, TensorView tokens, TensorView rows, const Context& ctx)>;

class DecodeGraphs {
 public:
  DecodeGraphs();  // enabled unless KIMI_DECODE_GRAPHS=0
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  void set_enabled(bool on);  // off also drops the graphs
  // Drops every graph (a re-plan: the arenas move). The stream is kept.
  void clear();

  // Runs g as a graph step when it is one (the logits written, the stream synchronized): true. False: not a
  // graph step (graphs off, not a decode step, not a graph placement, ...): the caller runs it eagerly.
  bool run(const GraphStep& g, const Placement& p, const GraphBody& body);

  DecodeGraphStatus status(const Placement& p) const;

 private:
  struct Graph {
    int64_t n = 0;
    void* exec = nullptr;  // null: the capture was refused (reason)
    TensorView out;        // the head's device output the graph writes
    std::string reason;
  };
  struct Generation {
    std::vector<const void*> pointers;  // arenas, then every cache pool
    int64_t cache_seqs = 0, cache_len = 0;
    DType dtype = DType::f32;
    bool operator==(const Generation&) const = default;
  };
  void drop_graphs();
  // The step on the stream (the tables' copy, the replay or the eager run and capture, the logits' copy, the wait).
  void replay_or_capture(const GraphStep& g, Device dev, TensorView tokens, TensorView rows, const GraphBody& body);

  // The CUDA runtime's entry points, copied when the stream is made: the destructor may run during static
  // destruction (a Model held in a static), after the registry is gone.
  std::unique_ptr<DeviceRuntime> rt_;
  bool enabled_ = true;
  bool env_off_ = false;  // turned off by KIMI_DECODE_GRAPHS=0 (the status says so)
  Device device_{};
  void* stream_ = nullptr;
  Generation gen_;
  std::vector<Graph> graphs_;
  Step dev_step_;  // the step's tables rebased onto their device copy (vectors keep their capacity)
  int64_t replays_ = 0, captures_ = 0, eager_decode_ = 0;
  std::vector<std::pair<int64_t, std::string>> noted_;  // refusals already noted (kimi/log.h)
};

}  // namespace kimi::model
