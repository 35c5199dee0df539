// src/cuda/kda/decode_step.cuh: the fused KDA decode step (kimi/ops/kda_decode.h), one launch per call,
// one CTA per (sequence n, head h). Math of one CTA, s = slot(n), channels of head h (K of q/k/f, V of v/z/y):
//   q, k, v = SiLU(conv(x; cache[s]))           conv_step.cuh's math, caches shifted in place, fp32 in shared
//   a_i = exp(g_i), g = gate(f; A_log[h], dt_bias)   kda_device.cuh gate_log
//   rq, rk, qk from q.q, k.k, q.k (L2 norms eps 1e-6, scale), beta = sigmoid(b[n, h])   token_factors
//   per state column j (S = state[s, h] in R^{K x V}, fp32, in place):
//     Sd = diag(a) S;  kS_j = rk k^T Sd_j;  e_j = v_j - kS_j;  o_j = rq q^T Sd_j + beta qk e_j
//     S_j = Sd_j + (beta rk e_j) k                   (the recurrence's one-pass form, recurrent.cuh)
//   y[n, hV + j] = o_j * rsqrt(mean_j o^2 + eps) * o_norm[j] * sigmoid(z[n, hV + j])   gated_rms.cuh
// Every column j is independent until the norm: a CTA walks the head's V columns in tiles of BV (one tile
// when V <= BV, always at K = V = 128), keeping the o_j in shared memory, and normalizes at the end.
// (Splitting V over a cluster of 2 or 4 CTAs per head, the norm's sum of squares through distributed shared
// memory, was measured on the H200 and lost everywhere: 1 x 96 K = V = 128 kv 12.9 / 18.4 us per graph replay
// at 2 / 4 CTAs per head against 11.4 at one; 1 x 32 no gain; docs/gpu/2026-11-29-h200-decode1.txt.)
//
// CTA = 512 threads (16 warps), grid N * H, n = blockIdx.x / H, h = blockIdx.x % H. Per CTA:
//  0. before the slot is known, each thread issues every load of its first conv channel that does not depend
//     on it (x, the W taps, f and dt_bias for q channels) and of the head (A_log, beta, o_norm_j and z_j of its
//     output column) as raw predicated loads (ld_raw: no branch, no conversion, so nothing waits until the
//     values are used). Latency, not bytes, bounds a CTA at small N * H: the former prologue read each value
//     through load_f32, whose per-dtype branch converted right after the load, so every conv tap, x, f,
//     dt_bias, A_log, beta, z and o_norm cost a dependent memory round trip (~15 in a row).
//  1. s = slot(n): n (no slots), the launcher's inline table (host slots, validated on the host), or a device
//     i32/i64 [N] tensor (unvalidated: s outside [0, S) -> the CTA writes NaN into y[n, hV .. hV+V) and reads
//     and writes no cache or state row).
//  2. the head's state (tile 0) is prefetched into L2 (prefetch.global.L2: no registers held), the thread's
//     W-1 conv-cache values are loaded (one round trip), then the prologue runs while HBM serves the state:
//     one thread per channel of the head's 2*KMAX + V conv channels (q and its gate, k, v), results to shared
//     q, k, a [KMAX] (q = k = 0, a = 1 beyond K: rows beyond K stay 0), v [V]; barrier; the sums q.q, k.k, q.k
//     (warp shuffles, per-warp partials, barrier).
//     (Issuing the state loads into registers before the prologue instead spilled 340-376 bytes per thread
//     at the 64-register cap of 2 CTAs per SM; as written ptxas reports 28-56 bytes of spill stores.)
//  3. per tile: 16-byte streaming loads of the state into registers, decay + partial reductions over the
//     thread's rows, reductions over K, e and o, update, 16-byte streaming stores.
//  4. barrier (the o_j of every tile in shared); every warp reduces sum o^2 over V itself (no more barriers);
//     thread j < V writes y_j.
// Thread mappings (state contiguous: head (s, h) at (s H + h) K V, row length V (kv) or K (vk)):
//  kv [K rows][V cols]: thread = (column group cg of 4 columns, row group rg), CG = BV/4 column groups (<= 32,
//     so a warp covers 32/CG row groups), RG = 512/CG row groups, rows rg + RG r (r < NR), KMAX = RG NR.
//     At CG = 32 a warp reads one 512-byte row segment. Reductions over K: in-thread over NR rows, shuffles
//     over the warp's row groups, per-warp float4 partials in shared, column j summed by thread j (< BV),
//     which also writes o_j and beta rk e_j for the update (2 barriers per tile).
//  vk [V rows][K cols]: thread = (K group kg of 4 consecutive K, column group vg), KG lanes per column (one
//     warp), K slots 4 kg + 4 KG c (c < KC), KMAX = 4 KG KC; VG = 512/KG column groups, columns
//     j0 + vg + VG m (m < NV), BV = VG NV. Reductions over K: shuffles only (no barrier per tile).
// Registers: 4 NR (kv) or 4 KC NV (vk) state floats per thread: 32 up to K = 128 (2 CTAs per SM), 64 at K = 256.
// The bulk path (default where the launcher allows it, decode_step.cu use_bulk: K V <= 16384, the row length a
// multiple of 4, the pool 16-byte aligned): the head's state block is copied into dynamic shared memory by the bulk
// copy engine as soon as the slot is known (so HBM serves it during the prologue, without registers), updated there,
// and copied back while the epilogue runs; see decode_stream.cuh ("The bulk path", the kv and vk state passes, shared
// with kda_recurrent_fwd's one-token path) and "The streaming bulk kernels" below.
#pragma once

#include <cstdint>

#include "cuda/conv/conv_step.cuh"
#include "cuda/kda/decode_stream.cuh"
#include "cuda/norm/gated_rms.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda::kda_decode_detail {

inline constexpr int kInlineSlots = 256;   // host slots passed by value up to this N

enum SlotMode : int { slots_identity = 0, slots_inline = 1, slots_device = 2 };

// An activation [N, C]: row n at n * n_stride, channel c at + c.
struct Act {
  const void* p;
  int64_t n_stride;
  int t;
};
// A conv weight ([C, W] / [C, 1, W]: (c, j) at c * w_c + j * w_j) and its cache pool [S, C, W-1]
// ((s, c, j) at s * c_s + c * c_c + j * c_j; null when W = 1).
struct ConvPool {
  const void* w;
  int64_t w_c, w_j;
  int tw;
  void* cache;
  int64_t c_s, c_c, c_j;
  int tc;
};

struct DecodeParams {
  Act xq, xk, xv, f, b, z;  // z.p null when absent
  void* y; int64_t y_n; int ty;
  ConvPool cq, ck, cv;
  int W;
  int gate;                        // GateCode (bounded or softplus)
  const float* A_log; int64_t A_s;  // A_log[h * A_s]
  const float* dt_bias;            // contiguous [H*K]: dt_bias[h K + i]
  float lower_bound, scale, norm_eps;
  const void* o_norm; int t_on;    // [V], stride 1
  float* state; int state_vec;     // contiguous pool [S, H, K, V] / [S, H, V, K]; vec: 16-byte accesses valid
  int64_t S;
  int H, K, V;
  int slot_mode;                   // SlotMode
  const void* dslots; int64_t dslots_stride; int dslots_i64;  // slots_device: i32/i64 [N]
  int32_t islots[kInlineSlots];    // slots_inline
};

// Sequence n's pool row (unchecked for device slots: the caller compares it with [0, S)).
__device__ __forceinline__ int64_t slot_of(const DecodeParams& p, int64_t n) {
  if (p.slot_mode == slots_inline) return p.islots[n];
  if (p.slot_mode == slots_device)
    return p.dslots_i64 ? static_cast<const int64_t*>(p.dslots)[n * p.dslots_stride]
                        : int64_t(static_cast<const int32_t*>(p.dslots)[n * p.dslots_stride]);
  return n;
}

// A slot outside the pool: y rows of the head become NaN, nothing else is touched.
__device__ __forceinline__ void nan_head(const DecodeParams& p, int64_t n, int h) {
  for (int j = threadIdx.x; j < p.V; j += kThreads)
    store_f32(p.y, n * p.y_n + int64_t(h) * p.V + j, p.ty, __int_as_float(0x7fffffff));
}

// The pool row of this CTA's sequence n, or -1 when its slot is outside [0, S) (its y rows of head h are then
// NaN and the CTA touches nothing else).
__device__ __forceinline__ int64_t head_slot(const DecodeParams& p, int64_t n, int h) {
  const int64_t s = slot_of(p, n);
  if (s >= 0 && s < p.S) return s;
  nan_head(p, n, h);
  return -1;
}

// Conv channel c of the CTA (c < KMAX: q row c and its gate; c < 2 KMAX: k row c - KMAX; c < 2 KMAX + V: v
// column c - 2 KMAX), and its raw inputs that do not depend on the slot (loaded before the slot is known).
// WM: the largest conv width the instance serves (W <= WM; kConvMaxWidth, or 4 in the streaming bulk kernels for
// W <= 4, which holds 4 fewer taps and history values per thread in registers).
template <int WM = kConvMaxWidth>
struct ChanIn {
  int role;        // 0 q, 1 k, 2 v
  int64_t ch;      // channel in [0, P) (q, k) or [0, Pv) (v)
  bool live;       // q, k rows beyond K: no channel (q = k = 0, a = 1)
  uint32_t x, f, dt, wx;                 // wx: the tap on x, w[W-1]
  uint32_t w[WM - 1];                    // taps on the history, w[0 .. W-2]
};
template <int KMAX, int WM = kConvMaxWidth>
__device__ __forceinline__ ChanIn<WM> chan_inputs(const DecodeParams& p, int64_t n, int h, int c) {
  ChanIn<WM> in;
  in.role = c < KMAX ? 0 : (c < 2 * KMAX ? 1 : 2);
  const int i = in.role == 0 ? c : (in.role == 1 ? c - KMAX : c - 2 * KMAX);
  in.live = in.role == 2 ? i < p.V : i < p.K;  // c >= 2 KMAX + V: the thread has no channel
  in.ch = in.role == 2 ? int64_t(h) * p.V + i : int64_t(h) * p.K + i;
  const Act& x = in.role == 0 ? p.xq : (in.role == 1 ? p.xk : p.xv);
  const ConvPool& cp = in.role == 0 ? p.cq : (in.role == 1 ? p.ck : p.cv);
  in.x = ld_raw(x.p, n * x.n_stride + in.ch, x.t, in.live);
  in.wx = ld_raw(cp.w, in.ch * cp.w_c + int64_t(p.W - 1) * cp.w_j, cp.tw, in.live);
#pragma unroll
  for (int j = 0; j < WM - 1; ++j)
    in.w[j] = ld_raw(cp.w, in.ch * cp.w_c + j * cp.w_j, cp.tw, in.live && j < p.W - 1);
  in.f = ld_raw(p.f.p, n * p.f.n_stride + in.ch, p.f.t, in.live && in.role == 0);
  in.dt = ld_raw(p.dt_bias, in.ch, el_f32, in.live && in.role == 0);
  return in;
}

// What the CTA reads before its slot is known, besides its first conv channel: the gate's A_log, beta, and the
// norm's o_norm and z of the thread's output column j = tid (< V).
struct HeadIn {
  uint32_t A, b, on, z;
};
__device__ __forceinline__ HeadIn head_inputs(const DecodeParams& p, int64_t n, int h) {
  const int j = int(threadIdx.x);
  const int64_t col = int64_t(h) * p.V + j;
  HeadIn in;
  in.A = ld_raw(p.A_log, int64_t(h) * p.A_s, el_f32, true);
  in.b = ld_raw(p.b.p, n * p.b.n_stride + h, p.b.t, true);
  in.on = ld_raw(p.o_norm, j, p.t_on, j < p.V);
  in.z = ld_raw(p.z.p, n * p.z.n_stride + col, p.z.t, j < p.V && p.z.p != nullptr);
  return in;
}

// A conv channel's new cache row: [hist[1 .. W-2], x].
template <int WM>
struct CacheRow {
  float hist[WM - 1];
  float x;
};
template <int WM>
__device__ __forceinline__ void cache_store(const ConvPool& cp, int64_t s, int64_t ch, int W, const CacheRow<WM>& r) {
  const int64_t c0 = s * cp.c_s + ch * cp.c_c;
#pragma unroll
  for (int j = 0; j + 1 < WM - 1; ++j)
    if (j + 1 < W - 1) store_f32(cp.cache, c0 + j * cp.c_j, cp.tc, r.hist[j + 1]);
  if (W > 1) store_f32(cp.cache, c0 + (W - 2) * cp.c_j, cp.tc, r.x);
}

// Step 2 (convs, gate, shared token) and the token scalars; two barriers. `in` holds the thread's first
// channel (c = tid), loaded before the slot; its later channels (K = 256) are loaded here.
template <int KMAX, int WM = kConvMaxWidth>
__device__ __forceinline__ TokenScalars decode_prologue(const DecodeParams& p, Token<KMAX>& sm, ChanIn<WM> in,
                                                        const HeadIn& hin, int64_t n, int h, int64_t s) {
  const int tid = threadIdx.x, K = p.K, W = p.W;
  const int NC = 2 * KMAX + p.V;
  const float expA = expf(__uint_as_float(hin.A));
  for (int c = tid; c < NC; c += kThreads) {
    if (c != tid) in = chan_inputs<KMAX, WM>(p, n, h, c);
    const ConvPool& cp = in.role == 0 ? p.cq : (in.role == 1 ? p.ck : p.cv);
    const int64_t c0 = s * cp.c_s + in.ch * cp.c_c;
    uint32_t hr[WM - 1];
#pragma unroll
    for (int j = 0; j < WM - 1; ++j)
      hr[j] = ld_raw(cp.cache, c0 + j * cp.c_j, cp.tc, in.live && j < W - 1);
    const Act& xa = in.role == 0 ? p.xq : (in.role == 1 ? p.xk : p.xv);
    CacheRow<WM> row;
    row.x = raw_f32(in.x, xa.t);
    float acc = 0.f;  // tap order j = 0 .. W-1, as conv_step.cuh and the CPU
#pragma unroll
    for (int j = 0; j < WM - 1; ++j) {
      row.hist[j] = raw_f32(hr[j], cp.tc);
      if (j < W - 1) acc += raw_f32(in.w[j], cp.tw) * row.hist[j];
    }
    acc += raw_f32(in.wx, cp.tw) * row.x;
    acc = acc * sigmoid_f32(acc);  // SiLU
    if (in.live) cache_store(cp, s, in.ch, W, row);
    if (in.role == 0) {
      float ai = 1.f;
      if (in.live) ai = expf(gate_log(p.gate, raw_f32(in.f, p.f.t), __uint_as_float(in.dt), expA, p.lower_bound));
      sm.q[c] = in.live ? acc : 0.f;
      sm.a[c] = ai;
    } else if (in.role == 1) {
      sm.k[c - KMAX] = in.live ? acc : 0.f;
    } else {
      sm.v[c - 2 * KMAX] = acc;
    }
  }
  __syncthreads();
  float sqq = 0.f, skk = 0.f, sqk = 0.f;
  for (int i = tid; i < K; i += kThreads) {
    const float qi = sm.q[i], ki = sm.k[i];
    sqq += qi * qi;
    skk += ki * ki;
    sqk += qi * ki;
  }
  warp_token_sums(sqq, skk, sqk, tid % 32, sm.sums[tid / 32]);
  __syncthreads();
  // token_sums' loop, written out: as a call, ptxas schedules 22 of the 32 kernels differently (unmeasured, so kept)
  sqq = skk = sqk = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    sqq += sm.sums[w][0];
    skk += sm.sums[w][1];
    sqk += sm.sums[w][2];
  }
  const float beta = beta_sigmoid(raw_f32(hin.b, p.b.t));
  return token_factors(sqq, skk, sqk, p.scale, true, beta);
}

// Step 4, after a barrier that completes o[0 .. V): every warp sums o^2 over V itself (xor butterfly: the same
// value in every lane and warp), thread j < V writes y_j (o_norm_j and z_j were loaded before the slot).
template <int KMAX>
__device__ __forceinline__ void decode_epilogue(const DecodeParams& p, const Token<KMAX>& sm, const HeadIn& hin,
                                                int64_t n, int h) {
  const int lane = threadIdx.x % 32, j = threadIdx.x, V = p.V;
  float ss = 0.f;
  for (int i = lane; i < V; i += 32) ss += sm.o[i] * sm.o[i];
#pragma unroll
  for (int m = 16; m > 0; m /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, m);
  const float r = gated_rms_scale(ss, V, p.norm_eps);
  if (j < V) {
    const int64_t col = int64_t(h) * V + j;
    const bool gz = p.z.p != nullptr;
    store_f32(p.y, n * p.y_n + col, p.ty,
              gated_rms_out(sm.o[j], r, raw_f32(hin.on, p.t_on), gz, gz ? raw_f32(hin.z, p.z.t) : 0.f));
  }
}

// Asks L2 for the 16 bytes at p (no registers held: the prologue runs while HBM serves the state).
__device__ __forceinline__ void prefetch_l2(const float* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// ---------------------------------------------------------------------------------------------
// kv: S[i][j] at head + i V + j (kv_load / kv_store: kda_device.cuh, rows V floats apart).
template <int NR, int RG>
__device__ __forceinline__ void kv_prefetch(const float* at, int V, int K, int rg, int jc) {
  if (jc >= V) return;
#pragma unroll
  for (int r = 0; r < NR; ++r)
    if (rg + RG * r < K) prefetch_l2(at + r * int64_t(RG) * V);
}
template <int CG, int NR, int MIN_CTAS>
__global__ void __launch_bounds__(kThreads, MIN_CTAS) kda_decode_step_kv_kernel(const __grid_constant__ DecodeParams p) {
  pdl_launch_dependents();  // pdl.cuh: launched with programmatic_launch
  pdl_wait();
  constexpr int RG = kThreads / CG;  // row groups
  constexpr int BV = 4 * CG;         // columns per tile
  constexpr int KMAX = RG * NR;
  static_assert(CG <= 32 && 32 % CG == 0, "a warp covers whole row groups");
  __shared__ Token<KMAX> sm;
  __shared__ float4 red_k[kWarps][CG], red_q[kWarps][CG];  // per-warp partial k^T Sd, q^T Sd (4 columns each)
  __shared__ float4 be4[CG];                               // beta rk e_j of the tile's columns

  const int64_t n = blockIdx.x / p.H;
  const int h = int(blockIdx.x % p.H);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int cg = tid % CG, rg = tid / CG;
  const int K = p.K, V = p.V;
  const ChanIn cin = chan_inputs<KMAX>(p, n, h, tid);  // in flight while the slot is read
  const HeadIn hin = head_inputs(p, n, h);
  const int64_t s = head_slot(p, n, h);
  if (s < 0) return;
  float* const head = p.state + (s * p.H + h) * int64_t(K) * V;
  float* const rows = head + int64_t(rg) * V;  // the thread's first row

  kv_prefetch<NR, RG>(rows + 4 * cg, V, K, rg, 4 * cg);  // tile 0
  const TokenScalars ts = decode_prologue<KMAX>(p, sm, cin, hin, n, h, s);
  float4 S[NR];

  for (int j0 = 0; j0 < V; j0 += BV) {
    const int jc = j0 + 4 * cg;          // first of the thread's 4 columns
    kv_load<NR, RG>(S, rows + jc, V, V, K, rg, jc, p.state_vec);

    // Decay, and the partial reductions over this thread's rows (rows >= K hold 0, a = 1, k = q = 0) and the warp's
    // row groups.
    float pk[4], pq[4];
    kv_decay_dots<NR, RG, CG>(S, sm.a, sm.k, sm.q, rg, pk, pq);
    if (lane < CG) {
      red_k[warp][cg] = make_float4(pk[0], pk[1], pk[2], pk[3]);
      red_q[warp][cg] = make_float4(pq[0], pq[1], pq[2], pq[3]);
    }
    __syncthreads();
    if (tid < BV) {  // column j0 + tid: the sums over K, e, o
      float ks = 0.f, qs = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        ks += reinterpret_cast<const float*>(red_k[w])[tid];
        qs += reinterpret_cast<const float*>(red_q[w])[tid];
      }
      const int j = j0 + tid;
      float bej = 0.f;
      if (j < V) {
        const float ev = sm.v[j] - ts.rk * ks;
        sm.o[j] = ts.rq * qs + ts.beta * ts.qk * ev;
        bej = ts.beta * ts.rk * ev;
      }
      reinterpret_cast<float*>(be4)[tid] = bej;
    }
    __syncthreads();
    kv_add_k<NR, RG>(S, sm.k, rg, be4[cg]);
    kv_store<NR, RG>(S, rows + jc, V, V, K, rg, jc, p.state_vec);
  }
  __syncthreads();
  decode_epilogue<KMAX>(p, sm, hin, n, h);
}

// ---------------------------------------------------------------------------------------------
// vk: S[i][j] at head + j K + i (vk_load / vk_store: kda_device.cuh, rows K floats apart).
template <int KG, int KC, int NV, int VG>
__device__ __forceinline__ void vk_prefetch(const float* at, int K, int V, int jt, int kg) {
#pragma unroll
  for (int m = 0; m < NV; ++m)
#pragma unroll
    for (int c = 0; c < KC; ++c)
      if (jt + VG * m < V && 4 * kg + 4 * KG * c < K) prefetch_l2(at + m * int64_t(VG) * K + 4 * KG * c);
}
// vk register kernel, kda_decode_step_vk_kernel<KG, KC, NV, MIN_CTAS>: the header's vk mapping, each tile of BV
// columns by vk_load / vk_store (kda_device.cuh) from and to the pool.
template <int KG, int KC, int NV, int MIN_CTAS>
__global__ void __launch_bounds__(kThreads, MIN_CTAS) kda_decode_step_vk_kernel(const __grid_constant__ DecodeParams p) {
  pdl_launch_dependents();  // pdl.cuh: launched with programmatic_launch
  pdl_wait();
  constexpr int VG = kThreads / KG;  // column groups
  constexpr int BV = VG * NV;        // columns per tile
  constexpr int KMAX = 4 * KG * KC;
  static_assert(KG <= 32 && 32 % KG == 0, "a column's K groups lie in one warp");
  __shared__ Token<KMAX> sm;

  const int64_t n = blockIdx.x / p.H;
  const int h = int(blockIdx.x % p.H);
  const int tid = threadIdx.x;
  const int kg = tid % KG, vg = tid / KG;
  const int K = p.K, V = p.V;
  const ChanIn cin = chan_inputs<KMAX>(p, n, h, tid);  // in flight while the slot is read
  const HeadIn hin = head_inputs(p, n, h);
  const int64_t s = head_slot(p, n, h);
  if (s < 0) return;
  float* const head = p.state + (s * p.H + h) * int64_t(K) * V + 4 * kg;  // + column j * K: the thread's K slot 0

  vk_prefetch<KG, KC, NV, VG>(head + int64_t(vg) * K, K, V, vg, kg);  // tile 0
  const TokenScalars ts = decode_prologue<KMAX>(p, sm, cin, hin, n, h, s);
  float4 S[NV][KC];

  // This thread's K slots (16-byte shared loads; KMAX is a multiple of 4, rows 16-byte aligned).
  float a[KC][4], kk[KC][4], qq[KC][4];
  vk_token_slots<KC, KG>(sm.a, sm.k, sm.q, kg, a, kk, qq);

  for (int j0 = 0; j0 < V; j0 += BV) {
    const int jt = j0 + vg;  // the thread's first column; columns jt + VG m
    vk_load<KG, KC, NV, VG>(S, head + int64_t(jt) * K, K, K, V, jt, kg, p.state_vec);
#pragma unroll
    for (int m = 0; m < NV; ++m) {
      float pk, pq;
      vk_decay_dots<KC, KG>(S[m], a, kk, qq, pk, pq);
      const int j = jt + VG * m;
      const float ev = (j < V ? sm.v[j] : 0.f) - ts.rk * pk;
      if (kg == 0 && j < V) sm.o[j] = ts.rq * pq + ts.beta * ts.qk * ev;
      const float bej = ts.beta * ts.rk * ev;
      vk_add_k<KC>(S[m], kk, bej);
    }
    vk_store<KG, KC, NV, VG>(S, head + int64_t(jt) * K, K, K, V, jt, kg, p.state_vec);
  }
  __syncthreads();
  decode_epilogue<KMAX>(p, sm, hin, n, h);
}

// ---------------------------------------------------------------------------------------------
// The streaming bulk kernels (the launcher's default bulk path): the state only in shared memory, no state tile
// in registers, so that 3 CTAs fit an SM (the 40-register cap of 3 x 512 threads; shared: 64 KB of state plus a
// small static part per CTA), ~190 KB of state in flight or in use per SM. decode_stream.cuh's bulk copies. WM = 4 when
// W <= 4 (the models' width), else kConvMaxWidth: fewer conv values held in the 40 registers. ptxas (CUDA 13.0,
// sm_90a): 40 registers, spills 16 / 28-32 bytes (kv, WM = 4), 8-12 / 16-20 (vk), 32-36 / 52-72 (kv) and 28 / 64 (vk)
// at WM = 8; static shared 8448 (kv, KMAX 128), 9984 (KMAX 256), 2688-3840 (vk): 3 CTAs per SM with a 64 KB block.
// Measured: docs/BENCHMARKS.md (KDA decode step).
//
// kv [K rows][V cols], kda_decode_step_kv_bulk_kernel<CW, KMAX, WM>: decode_stream.cuh kv_stream_update (CW = the power
// of 2 in [32, 256] covering V; its header has the thread mapping and its measurements).
template <int CW, int KMAX, int WM>
__global__ void __launch_bounds__(kThreads, 3)
    kda_decode_step_kv_bulk_kernel(const __grid_constant__ DecodeParams p) {
  __shared__ Token<KMAX> sm;
  __shared__ KvStreamScratch<CW> sc;
  __shared__ uint64_t bulk_bar;

  const int64_t n = blockIdx.x / p.H;
  const int h = int(blockIdx.x % p.H);
  const int tid = threadIdx.x;
  const int K = p.K, V = p.V;
  const ChanIn cin = chan_inputs<KMAX, WM>(p, n, h, tid);  // in flight while the slot is read
  const HeadIn hin = head_inputs(p, n, h);
  const int64_t s = head_slot(p, n, h);
  if (s < 0) return;
  float* const head = p.state + (s * p.H + h) * int64_t(K) * V;
  float* const st = reinterpret_cast<float*>(kda_decode_state_smem);
  if (tid == 0) bulk_load(st, head, K * V * 4, &bulk_bar);
  const TokenScalars ts = decode_prologue<KMAX, WM>(p, sm, cin, hin, n, h, s);
  mbar_wait(&bulk_bar, 0);  // the init is ordered before this by the prologue's barriers
  kv_stream_update(st, sm, sc, ts, K, V);
  fence_proxy_async();
  __syncthreads();
  if (tid == 0) bulk_store(head, st, K * V * 4);
  decode_epilogue<KMAX>(p, sm, hin, n, h);
  if (tid == 0) bulk_wait_read();  // the stores have read the shared block before the CTA exits
}

// vk [V rows][K cols], kda_decode_step_vk_bulk_kernel<KG, KC, NV, MIN_CTAS>: decode_stream.cuh vk_stream_update (the
// register kernel's mapping and math, one column at a time from shared memory).
template <int KG, int KC, int NV, int MIN_CTAS, int WM>
__global__ void __launch_bounds__(kThreads, MIN_CTAS)
    kda_decode_step_vk_bulk_kernel(const __grid_constant__ DecodeParams p) {
  constexpr int KMAX = 4 * KG * KC;
  __shared__ Token<KMAX> sm;
  __shared__ uint64_t bulk_bar;

  const int64_t n = blockIdx.x / p.H;
  const int h = int(blockIdx.x % p.H);
  const int tid = threadIdx.x;
  const int K = p.K, V = p.V;
  const ChanIn cin = chan_inputs<KMAX, WM>(p, n, h, tid);  // in flight while the slot is read
  const HeadIn hin = head_inputs(p, n, h);
  const int64_t s = head_slot(p, n, h);
  if (s < 0) return;
  float* const block = p.state + (s * p.H + h) * int64_t(K) * V;
  float* const sblock = reinterpret_cast<float*>(kda_decode_state_smem);
  if (tid == 0) bulk_load(sblock, block, K * V * 4, &bulk_bar);
  const TokenScalars ts = decode_prologue<KMAX, WM>(p, sm, cin, hin, n, h, s);
  const VkSlots<KC> sl = vk_stream_slots<KG, KC>(sm, K);
  mbar_wait(&bulk_bar, 0);  // the init is ordered before this by the prologue's barriers
  vk_stream_update<KG, KC, NV>(sblock, sm, sl, ts, K, V);
  fence_proxy_async();
  __syncthreads();
  if (tid == 0) bulk_store(block, sblock, K * V * 4);
  decode_epilogue<KMAX>(p, sm, hin, n, h);
  if (tid == 0) bulk_wait_read();  // the stores have read the shared block before the CTA exits
}

}  // namespace kimi::cuda::kda_decode_detail
