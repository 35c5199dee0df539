// kimi/ops/random.h: tensors filled with seeded pseudo-random values, the same on every backend.
//
// Counter-based: element i (row-major position in t) takes h_i, the (i+1)-th output of SplitMix64 started
// at state mix64(seed):
//   mix64(z)  = z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31
//   h_i       = mix64(mix64(seed) + (i + 1) * 0x9E3779B97F4A7C15)          (all arithmetic mod 2^64)
// so any element can be computed alone (one GPU thread per element) and a tensor's values do not depend on
// the backend, the thread count or how the work is split.
//   float dtypes (f32, bf16): k_i = h_i >> 40 (24 bits), v_i = lo + w * k_i * 2^-24 in fp64 with w = hi - lo
//     rounded to f32 (w * k_i is exact in fp64), then rounded to f32, then to bf16 (nearest even):
//     uniform on [lo, hi] at 2^-24 resolution of the width.
//   integer dtypes (u8, i32): v_i = lo + floor(h_i * (hi - lo + 1) / 2^64): uniform on the integers [lo, hi].
// Every backend computes exactly these operations, so CPU and CUDA fills are bit-identical.
#pragma once

#include <cstdint>

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi {

// t: f32 / bf16 / u8 / i32, contiguous, any shape (0 elements: nothing to do), on any device.
// lo <= hi, both finite; for float dtypes hi - lo (in f32) must be finite; for integer dtypes lo and hi
// are integers within the dtype's range. Throws kimi::Error naming the argument before writing anything.
void fill_random(TensorView t, uint64_t seed, double lo, double hi, const Context& ctx = {});

}  // namespace kimi
