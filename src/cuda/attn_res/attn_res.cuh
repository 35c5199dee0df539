// src/cuda/attn_res/attn_res.cuh: Block Attention Residuals (SPEC 8), one CTA per token (row).
//   candidates V_c, c < m: blocks[0..n), then partial                 each row [d]
//   s_c = sum_i V_c,i * q_i / sqrt(mean_i(V_c,i^2) + eps),  q = norm_w * proj_w   (0 when the dot is 0)
//   p = softmax_c(s);  out = sum_c p_c V_c                              (the RAW candidates)
// NOTE: as on the CPU, the d-long sums and the softmax are in double (scores reach the hundreds: an fp32 score
//   error of 1e-5 absolute would already be the whole f32 budget), the mix accumulates in fp32 in candidate
//   order, a zero softmax weight skips its candidate, and one candidate (m = 1) has weight exactly 1.
// out may be exactly partial or a block: element i of out is written by the thread that read element i of every
//   candidate, after all the scores (which read everything) are complete.
#pragma once

#include "cuda/elementwise.cuh"

namespace kimi::cuda {

struct AttnResCand {
  const void* p;      // row 0
  int64_t row_stride; // elements
  int dtype;          // ElemType
};

inline constexpr int kAttnResThreads = 256;

// Dynamic shared memory: m * (kAttnResThreads / 32) * 2 doubles (per-warp partial sums), m doubles (scores),
// m floats (weights).
__global__ void attn_res_kernel(const AttnResCand* __restrict__ cands, int m, const void* proj_w, int tp,
                                int64_t sp, const void* norm_w, int tn, int64_t sn, float eps, void* out, int to,
                                int64_t so, int d) {
  extern __shared__ double smem[];
  constexpr int kWarps = kAttnResThreads / 32;
  double* red = smem;            // [m][kWarps][2]
  double* score = red + m * kWarps * 2;  // [m]
  float* prob = reinterpret_cast<float*>(score + m);  // [m]
  const int64_t row = blockIdx.x;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  if (m == 1) {
    const AttnResCand c = cands[0];
    for (int i = tid; i < d; i += kAttnResThreads)
      store_f32(out, row * so + i, to, load_f32(c.p, row * c.row_stride + i, c.dtype));
    return;
  }
  for (int c = 0; c < m; ++c) {
    const AttnResCand v = cands[c];
    double ss = 0, dot = 0;
    for (int i = tid; i < d; i += kAttnResThreads) {
      const double x = load_f32(v.p, row * v.row_stride + i, v.dtype);
      const double q = double(load_f32(norm_w, i * sn, tn)) * double(load_f32(proj_w, i * sp, tp));
      ss += x * x;
      dot += x * q;
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      ss += __shfl_xor_sync(0xffffffffu, ss, o);
      dot += __shfl_xor_sync(0xffffffffu, dot, o);
    }
    if (lane == 0) {
      red[(c * kWarps + warp) * 2] = ss;
      red[(c * kWarps + warp) * 2 + 1] = dot;
    }
  }
  __syncthreads();
  for (int c = tid; c < m; c += kAttnResThreads) {
    double ss = 0, dot = 0;
    for (int w = 0; w < kWarps; ++w) {
      ss += red[(c * kWarps + w) * 2];
      dot += red[(c * kWarps + w) * 2 + 1];
    }
    score[c] = dot == 0 ? 0.0 : dot / sqrt(ss / double(d) + double(eps));
  }
  __syncthreads();
  for (int c = tid; c < m; c += kAttnResThreads) {
    double smax = -INFINITY, z = 0;
    for (int k = 0; k < m; ++k) smax = fmax(smax, score[k]);
    for (int k = 0; k < m; ++k) z += exp(score[k] - smax);
    prob[c] = float(exp(score[c] - smax) / z);
  }
  __syncthreads();
  for (int i = tid; i < d; i += kAttnResThreads) {
    float o = 0.f;
    for (int c = 0; c < m; ++c) {
      const float p = prob[c];
      if (p == 0.f) continue;
      const AttnResCand v = cands[c];
      o += p * load_f32(v.p, row * v.row_stride + i, v.dtype);
    }
    store_f32(out, row * so + i, to, o);
  }
}

}  // namespace kimi::cuda
