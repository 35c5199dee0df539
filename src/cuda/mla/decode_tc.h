// src/cuda/mla/decode_tc.h: host entry of the tensor-core attend step of mla_decode (decode_tc.cuh, launched by
// decode_tc.cu); mla.cu's mla_decode runs decode_proj.cuh's absorb before it and merge / project after it.
#pragma once

#include <cstdint>

#include "kimi/tensor.h"

namespace kimi::cuda::mla {

// The most heads per CTA: H in ceil(H / 64) groups of equal size (the last one may be smaller); the launcher may take
// smaller groups (decode_plan.h tc_decode_plan).
int64_t tc_head_group(int64_t H);

// Whether decode_tc.cuh takes these operands on device `dev`: cache f32 or bf16, R <= 512 and its shared memory
// within the device's per-block limit.
bool tc_attend_fits(DType cache, int64_t H, int64_t R, int64_t RP, int dev);

// The columns of a query row in the attend's QL (RP rounded up to 16; decode_proj.cuh's absorb writes them).
int64_t tc_query_cols(int64_t RP);

// The attend over S splits per sequence and head groups of hg <= tc_head_group(H) heads: QL [N, H, tc_query_cols(RP)]
// bf16 (columns >= RP zero, 16-byte aligned), lens / slots [N] i64 tables on the device (valid values: the launcher's
// table), or (lens null) the caller's device index tensors dlens / dslots (range-checked in the kernel: a length
// outside [1, L] or a slot outside [0, Nc) gives no rows), Opart [N, S, H, R] and ML [N, S, H, 2] f32 out. Launched
// with programmatic_launch (pdl.cuh) after the absorb. `stream` a cudaStream_t.
void tc_attend(const void* QL, const TensorView& cache, const int64_t* lens, const int64_t* slots,
               const TensorView* dlens, const TensorView* dslots, float* Opart, float* ML, int64_t N, int64_t S,
               int64_t H, int64_t hg, int64_t R, float scale, void* stream);

}  // namespace kimi::cuda::mla
