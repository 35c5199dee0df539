// src/cuda/kda/recurrent_stream.cuh: kda_recurrent_fwd's streaming one-token kernels (T = 1 without cu_seqlens, the
// launcher's choice where the states allow it: recurrent.cu use_stream). The math and the per-element operations are
// recurrent.cuh's (SPEC 5: gate, beta sigmoid, L2 norms of q and k, S <- diag(exp(g)) S, e = v - S^T k, S <- S +
// beta k e^T, o = S^T q); the state pass is decode_stream.cuh's, shared with the fused decode step.
//
// kda_recurrent_{kv,vk}_stream_kernel (grid N x H, 512 threads, one CTA per (sequence n, head h), 3 CTAs per SM):
//  1. every thread issues its token loads as raw predicated loads (decode_stream.cuh ld_raw: no branch, no
//     conversion): thread i < K the q, k, raw gate and dt_bias of row i, thread j < V the value v_j; then the
//     state row (state_slots[n] or n) is read and thread 0 issues the bulk copy of the head's K V fp32 block from
//     the initial state into shared memory (a CTA without an initial state zero-fills it), so HBM serves the
//     block while the token is formed;
//  2. the token into Token<KMAX> (q, k raw; a = exp(gate); v), the sums q.q, k.k, q.k, the token scalars;
//  3. the state pass (kv_stream_update / vk_stream_update) once the block has landed;
//  4. thread 0 copies the block to the final state by bulk stores (none without a final state) while thread j < V
//     writes o_j, and waits for the stores to have read the shared block before the CTA exits.
// Why: the staged one-token kernels of recurrent.cuh hold the state tile in registers (16 KB per CTA of 128
// threads, 6-7 CTAs per SM); streaming the whole 64 KB head block through shared memory keeps ~190 KB of state in
// flight or in use per SM without registers (decode_stream.cuh; measured: docs/BENCHMARKS.md, KDA decode).
// Aliasing: the block is read whole before any of it is written back, so the final state may be the initial state.
#pragma once

#include "cuda/kda/decode_stream.cuh"
#include "cuda/kda/recurrent.cuh"

namespace kimi::cuda::kda_decode_detail {

// The raw token inputs of one thread (loaded before the state row is known).
struct OneTokenIn {
  uint32_t q, k, g, dt, v, A, beta;
};
__device__ __forceinline__ OneTokenIn one_token_inputs(const kda_detail::Params& p, int64_t n, int h) {
  const int i = int(threadIdx.x);
  const bool row = i < p.K, gated = p.gate != gate_none;
  OneTokenIn in;
  in.q = ld_raw(p.q, n * p.q_b + h * p.q_h + i, p.tq, row);
  in.k = ld_raw(p.k, n * p.k_b + h * p.k_h + i, p.tk, row);
  in.g = ld_raw(p.g, n * p.g_b + h * p.g_h + i, p.tg, row);
  in.dt = ld_raw(p.dt_bias, h * p.dtb_h + i * p.dtb_k, el_f32, row && gated);
  in.v = ld_raw(p.v, n * p.v_b + h * p.v_h + i, p.tv, i < p.V);
  in.A = ld_raw(p.A_log, h * p.A_s, el_f32, gated);
  in.beta = ld_raw(p.beta, n * p.beta_b + h * p.beta_h, p.tbeta, true);
  return in;
}

// Steps 1 and 2 of the CTA of (n, h) = (blockIdx.x / H, blockIdx.x % H): the token loads, the state row, the block
// into st (bulk copy from the initial state on `bar`, or zeros), the token into sm, its scalars. The caller waits on
// `bar` when p.s_in is set.
struct OneTokenCta {
  int64_t n, row;  // the sequence and its state row
  int h;
  float* st;       // the state block in shared memory
  TokenScalars ts;
};
template <int KMAX>
__device__ __forceinline__ OneTokenCta one_token_prologue(const kda_detail::Params& p, Token<KMAX>& sm,
                                                          uint64_t* bar) {
  OneTokenCta c;
  c.n = blockIdx.x / p.H;
  c.h = int(blockIdx.x % p.H);
  c.st = reinterpret_cast<float*>(kda_decode_state_smem);
  const OneTokenIn in = one_token_inputs(p, c.n, c.h);  // in flight while the state row is read
  c.row = kda_detail::state_row(p, c.n);
  const int tid = int(threadIdx.x), K = p.K, V = p.V;
  if (p.s_in != nullptr) {
    if (tid == 0) bulk_load(c.st, p.s_in + c.row * p.si_n + c.h * p.si_h, K * V * 4, bar);
  } else {
    for (int e = tid; e < K * V / 4; e += kThreads) kda_decode_state_smem[e] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const float q = raw_f32(in.q, p.tq), k = raw_f32(in.k, p.tk);  // 0 beyond K (predicated off)
  if (tid < KMAX) {
    sm.q[tid] = q;
    sm.k[tid] = k;
    const float expA = p.gate != gate_none ? expf(__uint_as_float(in.A)) : 0.f;
    sm.a[tid] = tid < K ? expf(gate_log(p.gate, raw_f32(in.g, p.tg), __uint_as_float(in.dt), expA, p.lower_bound))
                        : 1.f;
  }
  if (tid < V) sm.v[tid] = raw_f32(in.v, p.tv);
  warp_token_sums(q * q, k * k, q * k, tid % 32, sm.sums[tid / 32]);
  __syncthreads();  // also orders the zero fill and the mbarrier's init before every thread's use
  float sqq, skk, sqk;
  token_sums(sm.sums, sqq, skk, sqk);
  float beta = raw_f32(in.beta, p.tbeta);
  if (p.beta_sigmoid) beta = beta_sigmoid(beta);
  c.ts = token_factors(sqq, skk, sqk, p.scale, p.l2norm, beta);
  return c;
}

// Step 4, after the pass (o_j in sm.o): the block to the final state, o_j to o.
template <int KMAX>
__device__ __forceinline__ void one_token_epilogue(const kda_detail::Params& p, const Token<KMAX>& sm,
                                                   const OneTokenCta& c) {
  const int tid = int(threadIdx.x);
  fence_proxy_async();  // the pass's shared writes, before the async proxy reads them
  __syncthreads();
  if (tid == 0 && p.s_out != nullptr) bulk_store(p.s_out + c.row * p.so_n + c.h * p.so_h, c.st, p.K * p.V * 4);
  if (tid < p.V) store_f32(p.o, c.n * p.o_b + c.h * p.o_h + tid, p.to, sm.o[tid]);
  if (tid == 0 && p.s_out != nullptr) bulk_wait_read();  // the stores have read the shared block
}

// kv: state [K rows][V cols], V a multiple of 4; CW the power of 2 in [32, 256] covering V, KMAX >= K.
template <int CW, int KMAX>
__global__ void __launch_bounds__(kThreads, 3)
    kda_recurrent_kv_stream_kernel(const __grid_constant__ kda_detail::Params p) {
  __shared__ Token<KMAX> sm;
  __shared__ KvStreamScratch<CW> sc;
  __shared__ uint64_t bulk_bar;
  const OneTokenCta c = one_token_prologue(p, sm, &bulk_bar);
  if (p.s_in != nullptr) mbar_wait(&bulk_bar, 0);
  kv_stream_update(c.st, sm, sc, c.ts, p.K, p.V);
  one_token_epilogue(p, sm, c);
}

// vk: state [V rows][K cols], K a multiple of 4; KMAX = 4 KG KC >= K.
template <int KG, int KC, int NV, int MIN_CTAS>
__global__ void __launch_bounds__(kThreads, MIN_CTAS)
    kda_recurrent_vk_stream_kernel(const __grid_constant__ kda_detail::Params p) {
  constexpr int KMAX = 4 * KG * KC;
  __shared__ Token<KMAX> sm;
  __shared__ uint64_t bulk_bar;
  const OneTokenCta c = one_token_prologue(p, sm, &bulk_bar);
  const VkSlots<KC> sl = vk_stream_slots<KG, KC>(sm, p.K);
  if (p.s_in != nullptr) mbar_wait(&bulk_bar, 0);
  vk_stream_update<KG, KC, NV>(c.st, sm, sl, c.ts, p.K, p.V);
  one_token_epilogue(p, sm, c);
}

}  // namespace kimi::cuda::kda_decode_detail
