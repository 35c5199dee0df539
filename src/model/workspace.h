// src/model/workspace.h: the bump allocator of a model step's temporaries on one device.
//
// A Workspace hands out 64-byte-aligned views from one arena, in stack order: a block takes a mark, allocates its
// temporaries, and releases back to the mark when it returns (Workspace::Scope), so the arena's size is the
// peak of the step, not its sum. It has two modes over the same calls:
//   measuring  Workspace(device): no memory; alloc() returns views whose data is null and only the peak is
//              recorded. The plan (src/model/step_plan.h) runs the step's declaration functions (step_buffers,
//              kda_temps, mla_temps, ffn_temps) on measuring workspaces for the largest batch to learn each
//              device's peak, allocates each arena once, and the step then calls the very same functions on
//              the real workspaces: no size formula is written twice.
//   real       Workspace(arena view): alloc() carves views out of the arena; running past its end is an
//              internal error (the plan measured less than the step asked for).
// Nothing is zero-filled: every temporary is written before it is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "kimi/tensor.h"

namespace kimi::model {

class Workspace {
 public:
  static constexpr size_t kAlign = 64;

  Workspace() = default;
  explicit Workspace(Device d) : device_(d) {}  // measuring
  Workspace(void* base, size_t bytes, Device d) : device_(d), base_(static_cast<char*>(base)), capacity_(bytes) {}

  bool measuring() const { return base_ == nullptr; }
  Device device() const { return device_; }
  size_t used() const { return top_; }
  size_t peak() const { return peak_; }  // the most bytes in use at once since construction

  // A contiguous [shape] tensor of dtype, 64-byte aligned (null data when measuring).
  TensorView alloc(DType dtype, std::initializer_list<int64_t> shape);
  void release(size_t mark) { top_ = mark; }
  void reset() { top_ = 0; }

  // Releases everything allocated after it was constructed when it goes out of scope.
  class Scope {
   public:
    explicit Scope(Workspace& ws) : ws_(ws), mark_(ws.used()) {}
    ~Scope() { ws_.release(mark_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Workspace& ws_;
    size_t mark_;
  };

 private:
  Device device_{};
  char* base_ = nullptr;
  size_t capacity_ = 0, top_ = 0, peak_ = 0;
};

}  // namespace kimi::model
