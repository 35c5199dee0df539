// src/cuda/linear/mxfp4.cuh: MXFP4 decode / encode on the device (SPEC 10), bit for bit the CPU's
// cpu::mxfp4_decode_row and cpu::mxfp4_quant_block.
//   code (4 bits): bit 3 sign, bits 0-2 the E2M1 magnitude {0, 0.5, 1, 1.5, 2, 3, 4, 6};
//   scale (E8M0 byte e): 2^(e - 127) for e < 255 (e = 0: the f32 subnormal 2^-127), NaN for e = 255;
//   w = (sign ? -mag : mag) * scale, one f32 product (so code 8 gives -0, e = 255 gives NaN).
// packed u8 [O, I/2] (low nibble = even column), scale u8 [O, I/32].
// NOTE: the kernels here are `static`: this header reaches more than one TU (linear.cu, and moe/experts.cu
// through gemv.cuh), and a non-template __global__ defined in two TUs is a duplicate symbol at link time.
#pragma once

#include <cstdint>

#include "cuda/elementwise.cuh"

namespace kimi::cuda {

// E2M1 magnitude and sign of a 4-bit code, built from its bits: exponent field e (bits 1-2, bias 1) and
// mantissa bit m (bit 0): e = 0 is the subnormal 0.5 * m, else 2^(e-1) * (1 + m/2).
__device__ __forceinline__ float e2m1_value(uint32_t code) {
  const uint32_t e = (code >> 1) & 3u, m = code & 1u;
  const float mag = e ? __uint_as_float(((e + 126u) << 23) | (m << 22)) : 0.5f * float(m);
  return (code & 8u) ? -mag : mag;
}

__device__ __forceinline__ float e8m0_value(uint32_t e) {
  if (e == 255u) return __uint_as_float(0x7fc00000u);  // NaN
  if (e == 0u) return __uint_as_float(0x00400000u);    // 2^-127 (subnormal)
  return __uint_as_float(e << 23);
}

// Nearest E2M1 magnitude code (0..7) of q >= 0, ties to the even code, saturating at 6 (the CPU's e2m1_code).
__device__ __forceinline__ uint32_t e2m1_code(float q) {
  if (q <= 0.25f) return 0;
  if (q < 0.75f) return 1;
  if (q <= 1.25f) return 2;
  if (q < 1.75f) return 3;
  if (q <= 2.5f) return 4;
  if (q < 3.5f) return 5;
  if (q <= 5.f) return 6;
  return 7;
}

// Dequantize rows: one thread per packed byte (two outputs). w: dtype code tw, row stride ldw (elements).
static __global__ void mxfp4_dequant_kernel(const uint8_t* __restrict__ packed, int64_t ldp, const uint8_t* __restrict__ scale,
                                     int64_t lds, void* __restrict__ w, int tw, int64_t ldw, int64_t rows,
                                     int64_t half_in) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * half_in) return;
  const int64_t r = i / half_in, j = i % half_in;  // byte j holds columns 2j, 2j+1 (block j / 16)
  const uint32_t byte = packed[r * ldp + j];
  const float s = e8m0_value(scale[r * lds + j / 16]);
  store_f32(w, r * ldw + 2 * j, tw, e2m1_value(byte & 15u) * s);
  store_f32(w, r * ldw + 2 * j + 1, tw, e2m1_value(byte >> 4) * s);
}

// Quantize: one thread per block of 32 values (the CPU's mxfp4_quant_block): e = clamp(floor(log2(amax)) - 2 +
// 127, 0, 254) (0 for an all-zero block, 255 and codes 0 for a block holding NaN or Inf).
static __global__ void mxfp4_quant_kernel(const void* __restrict__ w, int tw, int64_t ldw, uint8_t* __restrict__ packed,
                                   int64_t ldp, uint8_t* __restrict__ scale, int64_t lds, int64_t rows,
                                   int64_t blocks_per_row) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * blocks_per_row) return;
  const int64_t r = i / blocks_per_row, b = i % blocks_per_row;
  float v[32];
  float amax = 0.f;
  bool finite = true;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    v[j] = load_f32(w, r * ldw + b * 32 + j, tw);
    finite = finite && isfinite(v[j]);
    amax = fmaxf(amax, fabsf(v[j]));
  }
  uint8_t* p = packed + r * ldp + b * 16;
  if (!finite) {
    for (int j = 0; j < 16; ++j) p[j] = 0;
    scale[r * lds + b] = 255;
    return;
  }
  int e = 0;
  if (amax > 0.f) {
    int ex;
    frexpf(amax, &ex);  // amax = m * 2^ex, m in [0.5, 1)
    e = min(max(ex - 1 - 2 + 127, 0), 254);
  }
  const float inv = ldexpf(1.f, 127 - e);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const uint32_t lo = (signbit(v[2 * j]) ? 8u : 0u) | e2m1_code(fabsf(v[2 * j]) * inv);
    const uint32_t hi = (signbit(v[2 * j + 1]) ? 8u : 0u) | e2m1_code(fabsf(v[2 * j + 1]) * inv);
    p[j] = uint8_t(lo | (hi << 4));
  }
  scale[r * lds + b] = uint8_t(e);
}

}  // namespace kimi::cuda
