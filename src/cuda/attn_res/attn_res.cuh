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
inline constexpr int kAttnResMaxCands = 256;  // blocks + 1 (K3: ~10); the launcher refuses more

// The candidate table passed by value in the kernel's parameters (no upload: the launch captures in a CUDA graph)
// for up to kAttnResInlineCands candidates (64 x 24 bytes, well inside the 4 KiB parameter space); larger tables
// are uploaded (AttnResCand*). Both index as cands[c].
inline constexpr int kAttnResInlineCands = 64;
struct AttnResInline {
  AttnResCand c[kAttnResInlineCands];
  __device__ const AttnResCand& operator[](int i) const { return c[i]; }
};

// All shared memory is static: per-warp partial sums of the candidate being scored, the scores, the weights.
template <class Cands>  // AttnResInline or const AttnResCand*
__global__ void __launch_bounds__(kAttnResThreads)
attn_res_kernel(Cands cands, int m, const void* proj_w, int tp, int64_t sp,
                const void* norm_w, int tn, int64_t sn, float eps, void* out, int to, int64_t so, int d) {
  constexpr int kWarps = kAttnResThreads / 32;
  __shared__ double red_ss[kWarps], red_dot[kWarps];
  __shared__ double score[kAttnResMaxCands];
  __shared__ float prob[kAttnResMaxCands];
  const int64_t row = blockIdx.x;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  if (m == 1) {
    const AttnResCand c = cands[0];
    for (int i = tid; i < d; i += kAttnResThreads)
      store_f32(out, row * so + i, to, load_f32(c.p, row * c.row_stride + i, c.dtype));
    return;
  }
  // 1. scores, one candidate at a time: thread sums -> warp sums (shuffles) -> thread 0 sums the warps.
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
    if (lane == 0) red_ss[warp] = ss, red_dot[warp] = dot;
    __syncthreads();
    if (tid == 0) {
      double s2 = 0, dt = 0;
      for (int w = 0; w < kWarps; ++w) s2 += red_ss[w], dt += red_dot[w];
      score[c] = dt == 0 ? 0.0 : dt / sqrt(s2 / double(d) + double(eps));
    }
    __syncthreads();  // red_* are reused by the next candidate
  }
  // 2. softmax over the m scores (in double), one weight per thread
  for (int c = tid; c < m; c += kAttnResThreads) {
    double smax = -INFINITY, z = 0;
    for (int k = 0; k < m; ++k) smax = fmax(smax, score[k]);
    for (int k = 0; k < m; ++k) z += exp(score[k] - smax);
    prob[c] = float(exp(score[c] - smax) / z);
  }
  __syncthreads();
  // 3. the mix of the raw candidates, in candidate order
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
