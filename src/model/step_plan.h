// src/model/step_plan.h: a Model's runtime state: its activation dtype and its planned step (Model::plan).
//
// A plan for (max_tokens, max_seqs) holds ONE arena per device the step uses: the host (the step's index tables)
// and every device the placement puts a block on (the Mirrored streams and the blocks' temporaries). Its sizes are
// measured, not computed: measure_step() runs the step's allocation sequence on measuring Workspaces for the
// largest batch (the same declaration functions forward() calls: step_tables, Streams, kda_temps, mla_temps,
// ffn_temps, head_buffers), and each arena is that device's peak. A step resets the workspaces and carves
// everything out of the arenas: it allocates nothing and zero-fills nothing.
//   explicit plan (Model::plan): a batch larger than planned is a kimi::Error before anything is written.
//   no plan yet / only implicit ones: forward() plans for its batch, keeping the larger of the old and new sizes.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "kimi/device.h"
#include "kimi/model/model.h"
#include "kimi/tensor.h"
#include "model/blocks.h"
#include "model/decode_graph.h"
#include "model/mirrored.h"
#include "model/workspace.h"

namespace kimi::model {

// The step's workspaces, one per device (the host first).
struct Workspaces {
  std::vector<Workspace> list;
  Workspace& on(Device d);  // throws an internal kimi::Error for a device the plan does not cover
  void reset() {
    for (Workspace& w : list) w.reset();
  }
};

// The planned limits of a step.
struct StepLimits {
  int64_t tokens = 0, seqs = 0;
  int64_t head_rows = 0;  // logits rows the head computes at once on a device (max_seqs, or more for an
                          // implicit plan of a LogitsFor::all batch); the host head writes the caller's buffer
};

struct StepRuntime {
  std::mutex mu;                       // one step (or plan) at a time per Model
  std::atomic<std::thread::id> owner;  // the thread holding mu (a re-entrant call is refused, not deadlocked)
  std::optional<DType> dtype;          // the activation dtype; unset: the device's default
  StepLimits limits;                   // 0: not planned
  bool explicit_plan = false;
  std::vector<Tensor> arenas;          // one per device of `ws`, uninitialized
  std::unique_ptr<PinnedHost> pinned;  // the host arena page-locked when a GPU runs blocks: the step tables' copy to
                                       // the device is then asynchronous (declared after `arenas`: released first)
  Workspaces ws;                       // real workspaces over the arenas
  Step step;                           // the current step (its vectors keep their capacity across steps)
  DecodeGraphs graphs;                 // decode steps from CUDA graphs (dropped by every plan)
};

// The lock of a Model's runtime for one call: refuses a call from inside a forward (an on_layer callback) on the
// same thread; other threads wait.
class StepLock {
 public:
  StepLock(StepRuntime& rt, const char* op);
  ~StepLock();
  StepLock(const StepLock&) = delete;
  StepLock& operator=(const StepLock&) = delete;

 private:
  StepRuntime& rt_;
};

// The devices the placement runs a block on (model order of first use): the streams have a buffer on each.
std::vector<Device> block_devices(const Placement& p);
// The devices of the step's workspaces: the host (cpu:0, for the index tables), then the block devices.
std::vector<Device> step_devices(const Placement& p);
StepRuntime& runtime_of(const Model& m);
DType activation_dtype(const Model& m, const StepRuntime& rt);

// Step::cu_t ... cont_slot_t as views into the host workspace, the token ids (i64 [T]) and the head's rows
// (i64 [R]). Sizes only. Called first on a reset host workspace: the tables are its bytes [0, used()).
struct StepIndex {
  TensorView tokens, rows;
};
StepIndex step_tables(Workspace& host, Step& s, int64_t T, int64_t N, int64_t R);
// The device copy of the host tables (u8 [bytes]) at the start of the graph device's workspace (decode_graph.h),
// or an absent view when the placement has no graph device. Called right after step_tables.
TensorView device_tables(Workspaces& ws, const Placement& p, size_t bytes);

// The step's [T, d] streams, each with a buffer on every block device: the residual stream (plain pre-norm:
// one; Block AttnRes: every sealed block and the last partial), f32; the normalized block input xn in the
// activation dtype; the AttnRes mix (f32).
struct Streams {
  std::vector<Mirrored> res;  // res[0] = the embedding output; AttnRes: res[k+1] starts at the k-th seal
  Mirrored xn, mixed;
};
Streams step_streams(Workspaces& ws, const Model& m, const std::vector<Device>& devices, int64_t T, DType dt,
                     const Context& ctx);

// The head on its device: sel f32 [R, d] (the selected rows of the stream), x [R, d] in the activation dtype
// (normalized), and, unless the head writes the caller's host buffer directly, out f32 [min(R, head_rows), vocab].
struct HeadBuffers {
  TensorView sel, x, out;
};
HeadBuffers head_buffers(Workspace& ws, const Config& c, int64_t R, int64_t head_rows, DType dt, bool direct);

// Plans (replacing any arena) for the given limits: measures every device's peak and allocates the arenas. The
// limits are taken by value: a caller may pass rt.limits itself (a re-plan in a new dtype), which this resets.
void make_plan(const Model& m, StepRuntime& rt, StepLimits limits);

}  // namespace kimi::model
