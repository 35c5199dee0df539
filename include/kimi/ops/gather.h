// kimi/ops/gather.h: row gather (the embedding lookup and the model's row selection).
#pragma once

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi {

// out[n, :] = cast_out(src[rows[n], :])      for n in [0, N)
// src: [R, D] f32/bf16/f16, last dim stride 1, any row stride (an embedding table [vocab, d], or a
//      [T, d] activation whose rows are selected);
// rows: i32/i64 [N] on the host, each in [0, R), repeats allowed; or (CUDA) an i32/i64 [N] tensor on src's device,
//       read only by the kernel (the form a CUDA graph captures): its values are not checked, a row outside [0, R)
//       writes a NaN row;
// out: [N, D] f32/bf16/f16 on src's device, last dim stride 1, any row stride, sharing no memory with src.
// The copy is exact when out's dtype holds src's (f32 out); otherwise rounded to nearest even.
void gather_rows(TensorView src, TensorView rows, TensorView out, const Context& ctx = {});

}  // namespace kimi
