// src/cuda/moe/glu.cuh: the GLU activations (SPEC 7), fp32, exactly the CPU's formulas:
//   SiLU-GLU: h = gate * sigmoid(gate) * up
//   SiTU-GLU: h = beta * tanh(gate / beta) * sigmoid(gate) * (lbeta > 0 ? lbeta * tanh(up / lbeta) : up)
// glu_kernel: one thread per element of [..., I] views (leading dims any strides, last dim contiguous);
// `static` (internal linkage): moe.cu launches it, moe/experts.cu includes this header for glu_value.
#pragma once

#include <cstdint>

#include "cuda/elementwise.cuh"

namespace kimi::cuda {

__device__ __forceinline__ float glu_value(float g, float u, int situ, float beta, float lbeta) {
  const float sg = 1.f / (1.f + expf(-g));  // NOTE: expf, not __expf: f32 cases are held to 1e-5
  if (!situ) return g * sg * u;
  const float a = beta * tanhf(g / beta) * sg;
  return a * (lbeta > 0.f ? lbeta * tanhf(u / lbeta) : u);
}

constexpr int kGluMaxLead = 5;  // leading dimensions (kMaxDims - 1)

struct GluView {
  void* p;
  int t;                         // dtype code
  int64_t stride[kGluMaxLead];   // strides of the leading dims (elements)
};

struct GluArgs {
  GluView gate, up, h;
  int64_t shape[kGluMaxLead];  // leading dims
  int lead;                    // number of leading dims
  int64_t inner;               // I
  int64_t total;               // rows * I
  int situ;
  float beta, lbeta;
};

__device__ __forceinline__ int64_t glu_offset(const GluArgs& a, const GluView& v, int64_t row, int64_t col) {
  int64_t off = col;
  for (int d = a.lead - 1; d >= 0; --d) {
    off += (row % a.shape[d]) * v.stride[d];
    row /= a.shape[d];
  }
  return off;
}

static __global__ void glu_kernel(GluArgs a) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.total) return;
  const int64_t row = i / a.inner, col = i % a.inner;
  const float g = load_f32(a.gate.p, glu_offset(a, a.gate, row, col), a.gate.t);
  const float u = load_f32(a.up.p, glu_offset(a, a.up, row, col), a.up.t);
  store_f32(a.h.p, glu_offset(a, a.h, row, col), a.h.t, glu_value(g, u, a.situ, a.beta, a.lbeta));
}

}  // namespace kimi::cuda
