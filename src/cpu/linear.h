// src/cpu/linear.h: CPU kernels of kimi/ops/linear.h and the MXFP4 decoder (arguments validated).
#pragma once

#include <cstdint>
#include <span>

#include "kimi/context.h"
#include "kimi/ops/linear.h"

namespace kimi::cpu {

void linear(TensorView x, const Weight& w, TensorView y, float beta, const Context& ctx);
// The jobs one after another (each is linear's call).
void linear_many(std::span<const LinearJob> jobs, const Context& ctx);

// Which CPU path computes the product (all fp32; results agree to rounding):
//   fused:  weights read in place, converted in registers, dot products (decode, small M);
//   panels: f32 panels of weight rows + OpenBLAS sgemm;
//   tiles:  f32 panels of weight rows + this file's AVX2 tiles (panels when the CPU lacks AVX2).
// automatic: panels when M > 16 and OpenBLAS runs AVX-512 kernels, fused otherwise (measurements in
// docs/ops/linear.md). The explicit choices are for tests and benchmarks.
enum class LinearPath { automatic, fused, panels, tiles };
void linear_path(TensorView x, const Weight& w, TensorView y, float beta, const Context& ctx, LinearPath path);

// Rows [r0, r1) of weight w as f32 into dst (row-major, in_features per row).
void weight_rows_f32(const Weight& w, int64_t r0, int64_t r1, float* dst);
// One MXFP4 row: in/2 packed bytes + in/32 scales -> in floats (the project's one decoder).
void mxfp4_decode_row(const uint8_t* packed, const uint8_t* scale, int64_t in, float* dst);

}  // namespace kimi::cpu
