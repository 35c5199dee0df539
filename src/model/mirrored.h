// src/model/mirrored.h: an activation of the forward ([rows, cols], f32 or the activation dtype) that blocks on
// different devices read and write; it crosses devices only when a block on another device needs it.
//
// It has one buffer on each device of the step (carved from that device's Workspace when the step starts, so
// nothing is allocated per block) and knows which of them hold the current value:
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
  // bufs: one [rows, cols] view per device (distinct devices), all of one dtype.
  Mirrored(std::vector<TensorView> bufs, const Context& ctx) : ctx_(&ctx) {
    for (const TensorView& b : bufs) copies_.push_back({b, false});
  }

  TensorView read(Device d) {
    Copy& c = on(d);
    if (!c.current) {
      const Copy* src = current();
      if (!src) throw Error("forward: internal: an activation was read before any block wrote it");
      copy(c.t, src->t, *ctx_);
      c.current = true;
    }
    return c.t;
  }
  TensorView update(Device d) {
    const TensorView v = read(d);
    for (Copy& o : copies_) o.current = o.t.device == d;
    return v;
  }
  TensorView overwrite(Device d) {
    Copy& c = on(d);
    for (Copy& o : copies_) o.current = false;
    c.current = true;
    return c.t;
  }
  // The value as a host (cpu:0) view: the host buffer when it is current, else a copy into `scratch` (allocated
  // here: for the on_layer debugging hook only).
  TensorView host(Tensor& scratch) {
    for (const Copy& c : copies_)
      if (c.current && c.t.device == Device::cpu()) return c.t;
    const Copy* src = current();
    if (!src) throw Error("forward: internal: an activation was read before any block wrote it");
    scratch = Tensor(src->t.dtype, {src->t.size(0), src->t.size(1)});
    copy(scratch, src->t, *ctx_);
    return scratch;
  }

 private:
  struct Copy {
    TensorView t;
    bool current = false;
  };
  const Copy* current() const {
    for (const Copy& o : copies_)
      if (o.current) return &o;
    return nullptr;
  }
  Copy& on(Device d) {
    for (Copy& c : copies_)
      if (c.t.device == d) return c;
    throw Error("forward: internal: no buffer of an activation on " + to_string(d) + " (not a device of the plan)");
  }
  const Context* ctx_ = nullptr;
  std::vector<Copy> copies_;
};

}  // namespace kimi::model
