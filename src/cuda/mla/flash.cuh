// src/cuda/mla/flash.cuh: the fused causal attention of mla_prefill for bf16 operands (SPEC 6, explicit form), a
// FlashAttention-2-structured kernel on mma.sync m16n8k16 bf16 tensor cores. The scores never leave the chip.
//
// Math, per sequence, head h, query i (position within its sequence), keys j <= i of the same sequence:
//   k_j = [k_nope_h,j | k_pe_j]   (Dn from the kv expansion, P from the input k_pe, shared by the heads)
//   s_ij = q_h,i . k_j                                 bf16 products, fp32 accumulation (tensor cores)
//   online softmax over key tiles, in the base-2 domain x = s * scale * log2(e):
//     m_new = max(m, max_j x_ij);  alpha = 2^(m - m_new);  p_ij = 2^(x_ij - m_new)
//     l = l alpha + sum_j p_ij;    acc = acc alpha + P V   (P rounded to bf16 for the tensor cores, l summed in fp32)
//   o_h,i = acc / l * sigmoid(gate_h,i)   (gate optional: any float dtype, raw logits)   stored to o's dtype
//
// Tiling: one CTA of 8 warps per (tile of kBQ = 128 queries of one sequence, head); warp w owns query rows
// 16w .. 16w + 15 of the tile (its Q fragments by ldmatrix each key tile, its S and O accumulators in registers).
// Key tiles of kBK = 64 keys stream from key 0 up to the tile's last query (causal: later tiles are never
// loaded); K and V tiles are double buffered with cp.async (tile j + 1 loads while tile j is computed). A warp
// whose rows all precede a key tile skips it (the diagonal's upper part); a warp whose first row is below the
// tile's last key masks keys j > i with -inf (only the last two key tiles of a query tile can need it). Key 0
// belongs to the first tile, which every row sees, so each row's max is finite from the first tile on: no NaN.
//
// Shared memory (bf16, rows of D = DK or DV elements, 16-byte chunks XOR-swizzled by row: chunk c of row r is
// stored at chunk c ^ (r % 8), so that ldmatrix's 8 rows per matrix hit 8 distinct bank groups):
//   Q [kBQ][DK], K [2][kBK][DK], V [2][kBK][DV]: 128 KB at DK = 192, DV = 128; 160 KB at DK = 256.
// Columns past Dn + P (Q, K) and past Dv (V), rows past the sequence (queries past the tile, keys past the last
// query) are zero-filled by cp.async (src-size 0): zero keys and values keep every product finite.
//
// Global layouts (tokens flattened over B * T, evenly strided; the launcher checks every condition below):
//   q    bf16: token m, head h at q + m q_tok + h q_head, [q_nope (Dn) | q_pe (P)] contiguous
//   kv   bf16 [M, H (Dn + Dv)] (the cuBLAS expansion): token m, head h at kv + m ldkv + h (Dn + Dv): Dn key values,
//        then Dv values
//   pe   bf16: token m at pe + m pe_tok, P values
//   gate any float dtype or null: token m at gate + m g_tok + h Dv + e
//   o    f32 / bf16 / f16: token m, head h at o + m o_tok + h o_head + e
// Every cp.async source is 16-byte aligned: base pointers 16-byte aligned; Dn, P, Dv and the q, pe strides
// multiples of 8 elements. Tile table: per CTA (m0 = first token of its sequence, i0 = first query within it, nq).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/elementwise.cuh"

namespace kimi::cuda::mla {

inline constexpr int kFlBQ = 128, kFlBK = 64, kFlWarps = kFlBQ / 16, kFlThreads = kFlWarps * 32;

struct FlashParams {
  const __nv_bfloat16* q;
  int64_t q_tok, q_head;
  const __nv_bfloat16* kv;
  int64_t ldkv;
  const __nv_bfloat16* pe;
  int64_t pe_tok;
  const void* gate;  // or null
  int tg;
  int64_t g_tok;
  void* o;
  int to;
  int64_t o_tok, o_head;
  const int64_t* tiles;  // [ntiles][3]: m0, i0, nq
  int Dn, P, Dv;
  float scale_log2;  // softmax scale * log2(e)
};

template <int DK, int DV>
constexpr size_t flash_smem_bytes() {
  return sizeof(__nv_bfloat16) * (size_t(kFlBQ) * DK + 2 * size_t(kFlBK) * DK + 2 * size_t(kFlBK) * DV);
}

namespace flash {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Element (r, c) of a swizzled [rows][D] bf16 tile (see the header).
template <int D>
__device__ __forceinline__ int swz(int r, int c) {
  return r * D + (((c >> 3) ^ (r & 7)) << 3) + (c & 7);
}
__device__ __forceinline__ void cp16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// ldmatrix x4: lane l addresses a row of matrix l / 8; r[m] = {M_m[l/4][2(l%4)], +1} (.trans: {M_m[2(l%4)][l/4], ..}).
template <bool kTrans>
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], const __nv_bfloat16* p) {
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
// c += a b: A 16 x 16 row-major fragment, B 16 x 8 column fragment, C 16 x 8 fp32.
__device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The epilogue of every fused form: a row's l from its quad of lanes (the fragment spreads a row over lanes 4 g ..
// 4 g + 3), and o[m, h, c] = v * sigmoid(gate[m, h, c]) (gate optional) stored in o's dtype.
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ void store_o(const FlashParams& p, int64_t m, int h, int c, float v) {
  if (p.gate) v *= sigmoid_f32(load_f32(p.gate, m * p.g_tok + int64_t(h) * p.Dv + c, p.tg));
  store_f32(p.o, m * p.o_tok + int64_t(h) * p.o_head + c, p.to, v);
}

}  // namespace flash

// DK >= Dn + P and DV >= Dv, multiples of 64 (the swizzle needs >= 8 chunks per row).
template <int DK, int DV>
__global__ void __launch_bounds__(kFlThreads, 1) mla_flash_kernel(const FlashParams p) {
  static_assert(DK % 64 == 0 && DV % 64 == 0, "tile rows of whole 8-chunk swizzle groups");
  using bf16 = __nv_bfloat16;
  using flash::swz;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* Qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* Ks = Qs + kFlBQ * DK;  // [2][kFlBK * DK]
  bf16* Vs = Ks + 2 * kFlBK * DK;  // [2][kFlBK * DV]

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int h = blockIdx.y;
  const int64_t m0 = p.tiles[3 * blockIdx.x], i0 = p.tiles[3 * blockIdx.x + 1];
  const int nq = int(p.tiles[3 * blockIdx.x + 2]);
  const int Dn = p.Dn, Dk = p.Dn + p.P, Dv = p.Dv;
  const int64_t kvh = int64_t(h) * (Dn + Dv);
  const int64_t nkeys = i0 + nq;  // keys 0 .. nkeys - 1 of the sequence
  const int ntiles = int((nkeys + kFlBK - 1) / kFlBK);

  // Q tile (group 0, with the first K / V tile)
  for (int idx = tid; idx < kFlBQ * (DK / 8); idx += kFlThreads) {
    const int r = idx / (DK / 8), c = (idx % (DK / 8)) * 8;
    const bool valid = r < nq && c < Dk;
    const bf16* src = valid ? p.q + (m0 + i0 + r) * p.q_tok + h * p.q_head + c : p.q;
    flash::cp16(Qs + swz<DK>(r, c), src, valid);
  }
  const auto load_kv = [&](int t, int buf) {
    const int64_t k0 = int64_t(t) * kFlBK;
    bf16* ks = Ks + buf * kFlBK * DK;
    bf16* vs = Vs + buf * kFlBK * DV;
    for (int idx = tid; idx < kFlBK * (DK / 8); idx += kFlThreads) {
      const int j = idx / (DK / 8), c = (idx % (DK / 8)) * 8;
      const int64_t m = m0 + k0 + j;
      const bool key = k0 + j < nkeys;
      const bf16* src = p.kv;
      bool valid = false;
      if (key && c < Dn) src = p.kv + m * p.ldkv + kvh + c, valid = true;
      else if (key && c < Dk) src = p.pe + m * p.pe_tok + (c - Dn), valid = true;
      flash::cp16(ks + swz<DK>(j, c), src, valid);
    }
    for (int idx = tid; idx < kFlBK * (DV / 8); idx += kFlThreads) {
      const int j = idx / (DV / 8), c = (idx % (DV / 8)) * 8;
      const bool valid = k0 + j < nkeys && c < Dv;
      const bf16* src = valid ? p.kv + (m0 + k0 + j) * p.ldkv + kvh + Dn + c : p.kv;
      flash::cp16(vs + swz<DV>(j, c), src, valid);
    }
  };
  load_kv(0, 0);
  flash::cp_commit();

  // Fragment ownership (m16n8 accumulators): lane holds rows g = lane / 4 and g + 8 of the warp's 16, columns
  // 2 (lane % 4) and + 1 of each 8-column n-tile.
  const int g = lane / 4, t4 = lane % 4;
  const int row0 = warp * 16;                      // the warp's first row in the tile
  const int64_t qi0 = i0 + row0 + g, qi1 = qi0 + 8;  // query positions of the lane's two rows
  const bool warp_active = row0 < nq;
  float acc[DV / 8][4];
#pragma unroll
  for (int n = 0; n < DV / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  float mx0 = -INFINITY, mx1 = -INFINITY, l0 = 0.f, l1 = 0.f;

  for (int t = 0; t < ntiles; ++t) {
    if (t + 1 < ntiles) {
      load_kv(t + 1, (t + 1) & 1);
      flash::cp_commit();
      flash::cp_wait<1>();
    } else {
      flash::cp_wait<0>();
    }
    __syncthreads();
    const int64_t k0 = int64_t(t) * kFlBK;
    // the warp's last row precedes every key of the tile: nothing to add (never the first tile)
    if (warp_active && k0 <= i0 + row0 + 15) {
      const bf16* ks = Ks + (t & 1) * kFlBK * DK;
      const bf16* vs = Vs + (t & 1) * kFlBK * DV;
      // S = Q K^T, 16 x 64 per warp
      float s[kFlBK / 8][4];
#pragma unroll
      for (int n = 0; n < kFlBK / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < DK / 16; ++kk) {
        uint32_t a[4];
        flash::ldsm4<false>(a, Qs + swz<DK>(row0 + lane % 16, kk * 16 + (lane / 16) * 8));
#pragma unroll
        for (int np = 0; np < kFlBK / 16; ++np) {
          uint32_t b[4];
          flash::ldsm4<false>(b, ks + swz<DK>(np * 16 + (lane / 16) * 8 + lane % 8, kk * 16 + ((lane / 8) % 2) * 8));
          flash::mma(s[2 * np], a[0], a[1], a[2], a[3], b[0], b[1]);
          flash::mma(s[2 * np + 1], a[0], a[1], a[2], a[3], b[2], b[3]);
        }
      }
      // scale to base 2, causal mask where the tile reaches past the warp's first row, online softmax
      const bool diag = k0 + kFlBK - 1 > i0 + row0;
      float tm0 = -INFINITY, tm1 = -INFINITY;
#pragma unroll
      for (int n = 0; n < kFlBK / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t kj = k0 + n * 8 + 2 * t4 + e;
          float x0 = s[n][e] * p.scale_log2, x1 = s[n][2 + e] * p.scale_log2;
          if (diag && kj > qi0) x0 = -INFINITY;
          if (diag && kj > qi1) x1 = -INFINITY;
          s[n][e] = x0, s[n][2 + e] = x1;
          tm0 = fmaxf(tm0, x0), tm1 = fmaxf(tm1, x1);
        }
      }
#pragma unroll
      for (int o = 1; o <= 2; o *= 2) {
        tm0 = fmaxf(tm0, __shfl_xor_sync(0xffffffffu, tm0, o));
        tm1 = fmaxf(tm1, __shfl_xor_sync(0xffffffffu, tm1, o));
      }
      const float mn0 = fmaxf(mx0, tm0), mn1 = fmaxf(mx1, tm1);
      // a row with no visible key yet keeps p = 0 without NaN (cannot happen past the first tile; kept for safety)
      const float r0 = mn0 == -INFINITY ? 0.f : mn0, r1 = mn1 == -INFINITY ? 0.f : mn1;
      const float al0 = exp2f(mx0 - r0), al1 = exp2f(mx1 - r1);
      mx0 = mn0, mx1 = mn1;
      float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
      for (int n = 0; n < kFlBK / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          s[n][e] = exp2f(s[n][e] - r0);
          s[n][2 + e] = exp2f(s[n][2 + e] - r1);
          sum0 += s[n][e], sum1 += s[n][2 + e];
        }
      }
      l0 = l0 * al0 + sum0, l1 = l1 * al1 + sum1;  // the lane's partial row sums (reduced over the quad at the end)
#pragma unroll
      for (int n = 0; n < DV / 8; ++n) acc[n][0] *= al0, acc[n][1] *= al0, acc[n][2] *= al1, acc[n][3] *= al1;
      // O += P V: the S accumulators of n-tiles 2kk, 2kk + 1 are the A fragment of key step kk
#pragma unroll
      for (int kk = 0; kk < kFlBK / 16; ++kk) {
        const uint32_t a0 = flash::pack_bf16(s[2 * kk][0], s[2 * kk][1]);
        const uint32_t a1 = flash::pack_bf16(s[2 * kk][2], s[2 * kk][3]);
        const uint32_t a2 = flash::pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        const uint32_t a3 = flash::pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
        for (int dp = 0; dp < DV / 16; ++dp) {
          uint32_t b[4];
          flash::ldsm4<true>(b, vs + swz<DV>(kk * 16 + ((lane / 8) % 2) * 8 + lane % 8, dp * 16 + (lane / 16) * 8));
          flash::mma(acc[2 * dp], a0, a1, a2, a3, b[0], b[1]);
          flash::mma(acc[2 * dp + 1], a0, a1, a2, a3, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // buffer t & 1 is refilled by the next iteration's load
  }

  // epilogue: o = acc / l (* sigmoid(gate)), rows past the tile's queries not stored
  if (!warp_active) return;
  const float inv0 = 1.f / flash::quad_sum(l0), inv1 = 1.f / flash::quad_sum(l1);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = row0 + g + 8 * half;
    if (r >= nq) continue;
    const int64_t m = m0 + i0 + r;
    const float inv = half ? inv1 : inv0;
#pragma unroll
    for (int n = 0; n < DV / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * t4 + e;
        if (c >= Dv) continue;
        flash::store_o(p, m, h, c, acc[n][2 * half + e] * inv);
      }
    }
  }
}

}  // namespace kimi::cuda::mla
