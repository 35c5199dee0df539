// src/cpu/tensor_io.h: moving strided f32/bf16/f16 tensors in and out of fp32 for the CPU backend.
//
// "Rows" are the last dimension (stride 1, checked by the operator) of a tensor with any strides
// in the leading dimensions; row r is the r-th in row-major order of the leading dimensions.
#pragma once

#include <cstdint>
#include <vector>

#include "kimi/context.h"
#include "kimi/tensor.h"

namespace kimi::cpu {

int64_t num_rows(const TensorView& t);                 // product of all but the last dimension
char* row_ptr(const TensorView& t, int64_t row);        // start of row `row`
// n contiguous elements of dtype t <-> f32 (one dtype switch, then a typed loop the compiler vectorizes).
void load_f32(const void* p, DType t, int64_t n, float* dst);
void store_f32(void* p, DType t, int64_t n, const float* src);
void load_row(const TensorView& t, int64_t row, float* dst);        // t.shape[-1] values -> f32
void store_row(const TensorView& t, int64_t row, const float* src);  // f32 -> t's dtype (RNE)
// Whole tensor (any strides) <-> contiguous row-major f32.
std::vector<float> to_f32(const TensorView& t);
void from_f32(const float* src, const TensorView& t);
// Rounds v to dtype t and back (what storing then loading would give).
float round_to(DType t, float v);

// Threads for an OpenMP region: ctx.cpu_threads, or OpenMP's default when 0.
int threads(const Context& ctx);

}  // namespace kimi::cpu
