// src/model/mirrored.h: an activation of the forward ([rows, cols] f32) that blocks on different devices
// read and write; it crosses devices only when a block on another device needs it.
//
// It keeps at most one buffer per device (allocated on first use, reused after) and which of them hold the
// current value:
//   read(d)      a view on d holding the value: copied from a current buffer when d's is stale
//   update(d)    read(d), and every other device's copy becomes stale: for blocks that add into it
//   overwrite(d) d's buffer, nothing copied, every other copy stale: for blocks that write all of it
// A block boundary between devices is thus one [rows, cols] copy, and a value read by many blocks on one
// device (a sealed AttnRes block) is copied there once. Copies are synchronous (kimi::copy).
#pragma once

#include <cstdint>
#include <vector>

#include "kimi/context.h"
#include "kimi/device.h"
#include "kimi/error.h"
#include "kimi/tensor.h"

namespace kimi::model {

class Mirrored {
 public:
  Mirrored() = default;
  Mirrored(int64_t rows, int64_t cols, const Context& ctx) : rows_(rows), cols_(cols), ctx_(&ctx) {}

  TensorView read(Device d) {
    Copy& c = on(d);
    if (!c.current) {
      const Copy* src = nullptr;
      for (const Copy& o : copies_) src = o.current ? &o : src;
      if (!src) throw Error("forward: internal: an activation was read before any block wrote it");
      copy(c.t, src->t, *ctx_);
      c.current = true;
    }
    return c.t;
  }
  TensorView update(Device d) {
    const TensorView v = read(d);
    for (Copy& o : copies_) o.current = o.t.device() == d;
    return v;
  }
  TensorView overwrite(Device d) {
    Copy& c = on(d);
    for (Copy& o : copies_) o.current = false;
    c.current = true;
    return c.t;
  }

 private:
  struct Copy {
    Tensor t;
    bool current = false;
  };
  Copy& on(Device d) {
    for (Copy& c : copies_)
      if (c.t.device() == d) return c;
    copies_.push_back({Tensor(DType::f32, {rows_, cols_}, d), false});
    return copies_.back();
  }
  int64_t rows_ = 0, cols_ = 0;
  const Context* ctx_ = nullptr;
  std::vector<Copy> copies_;
};

}  // namespace kimi::model
