// src/cuda/mla/prefill_gemm.cu: mla_prefill for bf16 operands on tensor cores (SPEC 6, explicit form).
//
//   kv = latent W_kvb^T                      bf16 [M, H (Dn + Dv)]  one cuBLAS GEMM (fp32 accumulation, rounded once)
//   then the causal attention, by default fused (prefill_flash.cu: scores stay on chip): flash_fa3.cuh where
//   mla_flash_fa3_supported holds (Kimi's head sizes), else flash.cuh (mma.sync) where mla_flash_supported holds;
//   otherwise (head sizes or strides not multiples of 8, Dn + P > 256, Dv > 128, or forced by options.h) the score
//   blocks below:
//   per sequence, per block of queries [q0, q1) (keys 0 .. q1 - 1 of the same sequence, every head at once):
//     S_h = Qn_h Kn_h^T + Qpe_h Kpe^T         f32 [H, nq, q1]         two strided-batched GEMMs (k_pe shared by heads)
//     P_h = softmax_causal(scale S_h)          bf16 [H, nq, q1]        softmax_rows: key j of query i kept iff j <= q0+i
//     O_h = P_h V_h                            into o [B, T, H, Dv]    one strided-batched GEMM
//   o *= sigmoid(gate)                         (gate optional)         gate_rows
// Query blocks are sized so that S and P of one block stay under kScoreBytes (H nq q1 (4 + 2) bytes).
// Accuracy: the products are exact in fp32 and accumulate in fp32; kv and P are rounded to bf16 once each (as
// FlashAttention rounds P): ~1e-3 relative, inside SPEC 14's bf16 bar. f32 operands keep the exact FFMA kernels.
// Work of the blocks: the causal half of Q K^T plus the diagonal blocks' upper parts, at cuBLAS's tensor-core rate;
// S and P cross HBM once each (the price of not fusing: docs/ops/mla.md).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda/blas.h"
#include "cuda/check.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/grid.cuh"
#include "cuda/mla/mla.h"
#include "cuda/mla/options.h"
#include "cuda/runtime.h"
#include "cuda/scratch.cuh"

namespace kimi::cuda {

namespace {

constexpr int64_t kScoreBytes = int64_t(1) << 30;  // S (f32) + P (bf16) of one query block (stream-ordered scratch)

// One warp per (head, query) row of S [rows][ld] f32: P = exp(scale (s - max)) / sum over keys j <= q0 + i (i the
// row's query within the block), zero for the later keys up to n_keys. rows = H nq, row r = (h, i) = (r / nq, r % nq).
__global__ void softmax_rows(const float* S, __nv_bfloat16* P, int64_t rows, int64_t nq, int64_t ld, int64_t n_keys,
                             int64_t q0, float scale) {
  const int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t last = q0 + r % nq;  // the row's last visible key
  const float* s = S + r * ld;
  __nv_bfloat16* p = P + r * ld;
  float mx = -INFINITY;
  for (int64_t j = lane; j <= last; j += 32) mx = fmaxf(mx, s[j]);
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
  for (int64_t j = lane; j <= last; j += 32) sum += __expf(scale * (s[j] - mx));
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = 1.f / sum;
  for (int64_t j = lane; j < n_keys; j += 32)
    p[j] = __float2bfloat16(j <= last ? __expf(scale * (s[j] - mx)) * inv : 0.f);
}

// o[t, h, :] *= sigmoid(gate[t, h Dv + :]) for the rows t of one sequence block: o [rows, H, Dv] at strides
// (o_s1, o_s2, 1), gate [rows, H Dv] at (g_s1, 1).
__global__ void gate_rows(void* o, int to, int64_t o_s1, int64_t o_s2, const void* gate, int tg, int64_t g_s1,
                          int64_t rows, int64_t H, int64_t Dv) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * H * Dv) return;
  const int64_t t = i / (H * Dv), hv = i % (H * Dv), h = hv / Dv, v = hv % Dv;
  const int64_t oi = t * o_s1 + h * o_s2 + v;
  const float g = load_f32(gate, t * g_s1 + hv, tg);
  store_f32(o, oi, to, load_f32(o, oi, to) / (1.f + __expf(-g)));
}

}  // namespace

bool mla_prefill_gemm(TensorView q, TensorView latent, TensorView k_pe, const Weight& w_kvb, TensorView gate,
                      const std::vector<int64_t>& cu, const MlaDims& d, TensorView o, const Context& ctx) {
  const int64_t B = q.size(0), T = q.size(1), M = B * T;
  const int64_t H = d.heads, R = d.kv_lora, P = d.qk_rope, Dn = d.qk_nope, Dv = d.v_dim, Dkv = Dn + Dv;
  const auto rows_flat = [&](const TensorView& t) {  // [B, T, ...] tokens evenly strided (token m at m s1)
    return B == 1 || t.strides[0] == T * t.strides[1];
  };
  if (q.dtype != DType::bf16 || latent.dtype != DType::bf16 || k_pe.dtype != DType::bf16 ||
      w_kvb.w.dtype != DType::bf16 || w_kvb.is_mxfp4() || (o.dtype != DType::bf16 && o.dtype != DType::f32) ||
      !rows_flat(q) || !rows_flat(latent) || !rows_flat(k_pe) || !rows_flat(o) || q.strides[3] != 1 ||
      latent.strides[2] != 1 || k_pe.strides[2] != 1 || o.strides[3] != 1 || w_kvb.w.strides[1] != 1 ||
      (gate.present() && (!rows_flat(gate) || gate.strides[2] != 1)))
    return false;
  if (M == 0) return true;
  const MlaLaunchOptions& opt = mla_launch_options();
  const bool fused = opt.prefill != MlaPrefillPath::blocks && mla_flash_supported(q, k_pe, d);
  // automatic: the FlashAttention-3 form where it takes the shapes, else the mma.sync one
  const MlaFlashKernel kernel =
      opt.prefill == MlaPrefillPath::fused_fa3 ||
              (opt.prefill == MlaPrefillPath::automatic && mla_flash_fa3_supported(d, M))
          ? MlaFlashKernel::fa3
          : MlaFlashKernel::mma_sync;
  // a forced fa3 on head sizes it cannot take: mla_prefill_flash throws before anything is written to o
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  refuse_capture(s, "mla_prefill");
  const DeviceGuard device_guard(q.device.index);

  // kv = latent W_kvb^T, bf16 [M, H Dkv]
  const Scratch kv(size_t(M * H * Dkv) * 2, s);
  blas::gemm_xwt(s, M, H * Dkv, R, latent.data, DType::bf16, latent.strides[1], w_kvb.w.data, DType::bf16,
                 w_kvb.w.strides[0], kv.get(), DType::bf16, H * Dkv, 0.f);

  if (fused) {
    mla_prefill_flash(q, kv.get(), k_pe, gate, cu, d, o, kernel, ctx);
    if (opt.record) ++(kernel == MlaFlashKernel::fa3 ? opt.record->prefill_fused_fa3 : opt.record->prefill_fused);
    return true;
  }
  if (opt.record) ++opt.record->prefill_blocks;

  std::vector<std::pair<int64_t, int64_t>> seqs;  // (first token m0, length)
  if (!cu.empty()) {
    for (size_t i = 0; i + 1 < cu.size(); ++i)
      if (cu[i + 1] > cu[i]) seqs.push_back({cu[i], cu[i + 1] - cu[i]});
  } else {
    for (int64_t b = 0; b < B; ++b) seqs.push_back({b * T, T});
  }
  int64_t longest = 0;
  for (const auto& sq : seqs) longest = std::max(longest, sq.second);
  // query block: a multiple of 64 rows with H nq longest (4 + 2) bytes <= kScoreBytes (at least 64 rows)
  const int64_t block = std::max<int64_t>(64, kScoreBytes / (H * longest * 6) / 64 * 64);
  const int64_t ld_max = (longest + 7) / 8 * 8;  // 16-byte aligned rows of S and P
  const int64_t nq_max = std::min(block, longest);
  const Scratch S(size_t(H * nq_max * ld_max) * 4, s), Pb(size_t(H * nq_max * ld_max) * 2, s);

  const int64_t sq1 = q.strides[1], sq2 = q.strides[2], sp1 = k_pe.strides[1], so1 = o.strides[1], so2 = o.strides[2];
  const char* qb = static_cast<const char*>(q.data);
  const char* pb = static_cast<const char*>(k_pe.data);
  const __nv_bfloat16* kvb = kv.get<__nv_bfloat16>();
  const int64_t ldkv = H * Dkv;
  const size_t os = dtype_size(o.dtype);
  for (const auto& [m0, len] : seqs) {
    for (int64_t q0 = 0; q0 < len; q0 += block) {
      const int64_t nq = std::min(block, len - q0), nk = q0 + nq, ld = (nk + 7) / 8 * 8;
      const void* q_rows = qb + size_t((m0 + q0) * sq1) * 2;
      // S_h = Qn_h Kn_h^T  [nq, nk], then += Qpe_h Kpe^T
      blas::gemm_batched(s, H, nq, nk, Dn, q_rows, DType::bf16, sq1, sq2, kvb + m0 * ldkv, DType::bf16, ldkv, Dkv,
                         true, S.get(), DType::f32, ld, nq * ld, 0.f);
      blas::gemm_batched(s, H, nq, nk, P, static_cast<const __nv_bfloat16*>(q_rows) + Dn, DType::bf16, sq1, sq2,
                         pb + size_t(m0 * sp1) * 2, DType::bf16, sp1, 0, true, S.get(), DType::f32, ld, nq * ld, 1.f);
      const int64_t rows = H * nq;
      softmax_rows<<<grid_1d(rows, 8, "mla_prefill"), 256, 0, s>>>(S.get<float>(), Pb.get<__nv_bfloat16>(), rows, nq,
                                                                   ld, nk, q0, d.scale);
      KIMI_CUDA_CHECK(cudaGetLastError());
      // O_h = P_h V_h  [nq, Dv], V_h = kv[:, h Dkv + Dn :] ([nk, Dv] rows ldkv apart)
      void* o_rows = static_cast<char*>(o.data) + size_t((m0 + q0) * so1) * os;
      blas::gemm_batched(s, H, nq, Dv, nk, Pb.get(), DType::bf16, ld, nq * ld, kvb + m0 * ldkv + Dn, DType::bf16, ldkv,
                         Dkv, false, o_rows, o.dtype, so1, so2, 0.f);
      if (gate.present()) {
        const void* g_rows = static_cast<const char*>(gate.data) + size_t((m0 + q0) * gate.strides[1]) * dtype_size(gate.dtype);
        gate_rows<<<grid_1d(nq * H * Dv, 256, "mla_prefill"), 256, 0, s>>>(o_rows, elem_type(o.dtype), so1, so2, g_rows,
                                                                            elem_type(gate.dtype), gate.strides[1], nq,
                                                                            H, Dv);
        KIMI_CUDA_CHECK(cudaGetLastError());
      }
    }
  }
  return true;
}

}  // namespace kimi::cuda
