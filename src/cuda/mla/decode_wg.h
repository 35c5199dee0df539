// src/cuda/mla/decode_wg.h: host entry of the warpgroup-MMA attend step of mla_decode (decode_wg.cuh, launched by
// decode_wg.cu): a bf16 latent cache with R = 512, P = 64; decode_tc.h's kernel takes every other shape.
#pragma once

#include <cstdint>

#include "kimi/tensor.h"

namespace kimi::cuda::mla {

// Whether decode_wg.cuh takes this cache and these dims on device `dev`: bf16 cache [Nc, L, 576] with R = 512,
// contiguous rows, 16-byte aligned base and strides (its tensor map), Nc and L below 2^31, heads in groups of <= 64,
// and the device's per-block shared memory holding the kernel's 227 KB.
bool wg_attend_fits(const TensorView& cache, int64_t H, int64_t R, int64_t RP, int dev);

// The attend (decode_tc.h tc_attend's arguments and outputs): QL [N, H, 576] bf16 from the absorb, lens / slots
// [N] i64 device tables or (lens null) the caller's device index tensors, Opart [N, S, H, 512] and ML [N, S, H, 2]
// f32 out; S splits (64-row tiles, decode_wg.cuh), head groups of hg <= 64 heads. `stream` a cudaStream_t.
void wg_attend(const void* QL, const TensorView& cache, const int64_t* lens, const int64_t* slots,
               const TensorView* dlens, const TensorView* dslots, float* Opart, float* ML, int64_t N, int64_t S,
               int64_t H, int64_t hg, float scale, void* stream);

}  // namespace kimi::cuda::mla
