// src/cuda/kda/prep_old.cuh: TEMPORARY copy of kda_chunk_prep as of commit ddb5da9 (renamed
// kda_chunk_prep_old), selected by the launcher when KIMI_KDA_PREP_OLD=1, for the before / after A/B of the
// staged-store prep in one device run. Removed right after that measurement.
#pragma once

#include "cuda/kda/prep.cuh"

namespace kimi::cuda::kda_chunk {

template <int D, bool kDiagMma>
__global__ void __launch_bounds__(kPrepThreads, 2) kda_chunk_prep_old(const Params p) {
  using L = PrepSmem<D>;
  constexpr int kThreads = kPrepThreads, kWarps = kThreads / 32;
  constexpr int LDB = L::LDB, LDG = L::LDG, LDT = L::LDT, LDA = L::LDA;
  constexpr int EPL = D / 32;           // channels per lane in row loads
  constexpr int RPW = kC / kWarps;      // contiguous rows per warp
  static_assert(RPW == 4, "row ownership");
  extern __shared__ __align__(16) unsigned char smem[];
  float* const sG = reinterpret_cast<float*>(smem + L::G);             // G2 [64][LDG]        (L - X)
  float* const sT = reinterpret_cast<float*>(smem + L::G);             // T [64][LDA]         (S)
  float* const sP = reinterpret_cast<float*>(smem + L::G + L::kA);     // 3 x [16][16]        (S)
  bf16* const sQ = reinterpret_cast<bf16*>(smem + L::Q);               // q raw [64][LDB]     (L - X)
  bf16* const sKg = reinterpret_cast<bf16*>(smem + L::Q);              // Kg [64][LDB]        (S - P4)
  bf16* const sK = reinterpret_cast<bf16*>(smem + L::K);               // k raw [64][LDB]     (L - X)
  bf16* const sTb = reinterpret_cast<bf16*>(smem + L::K);              // Tb [64][LDT]        (S - P4)
  bf16* const sV = reinterpret_cast<bf16*>(smem + L::V);               // v [64][LDB]         (L - P4)
  float* const sTot = reinterpret_cast<float*>(smem + L::AKK);         // [16][D] warp totals (L)
  float* const sAkk = reinterpret_cast<float*>(smem + L::AKK);         // A_kk [64][LDA]      (A - S)
  float* const sBeta = reinterpret_cast<float*>(smem + L::BETA);
  float* const sMq = reinterpret_cast<float*>(smem + L::MQ);  // per-row multiplier of the raw q
  float* const sMk = reinterpret_cast<float*>(smem + L::MK);  // per-row multiplier of the raw k
  float* const sGC = reinterpret_cast<float*>(smem + L::GC);  // G2[63]

  KDA_CHUNK_ASSERT(blockDim.x == kThreads);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gq = lane >> 2, tq = lane & 3;  // mma fragment coordinates

  const int64_t cid = int64_t(blockIdx.x);  // chunk * H + head
  const int h = int(cid % p.H);
  const int64_t chunk = cid / p.H;
  KDA_CHUNK_ASSERT(chunk < p.nch);
  const int64_t tok0 = p.tab[3 * chunk], bb = p.tab[3 * chunk + 1];
  const int rows = int(p.tab[3 * chunk + 2]);
  KDA_CHUNK_ASSERT(rows >= 1 && rows <= kC);
  bf16* const gaqk = p.scr.aqk + cid * (kC * kC);  // A_qk [64][64]

  // ---- L: rows -> q, k raw (bf16), v (bf16), beta, multipliers; G2 = cumsum(g) log2 e ----------------------
  const int ch = lane * EPL;
  {
    float gl[RPW][EPL];  // g2 of the warp's rows, then their inclusive cumsum
    const RowCtx<D> rc{p, h, tok0, bb, rows, warp, lane, sQ, sK, sV, sBeta, sMq, sMk};
    if (p.rows_bf16) {  // uniform branches: the dtype and gate tests leave the per-element code
      if (p.gate == kGateBounded)
        prep_load_rows<D, kGateBounded, true>(rc, gl);
      else if (p.gate == kGateSoftplus)
        prep_load_rows<D, kGateSoftplus, true>(rc, gl);
      else
        prep_load_rows<D, kGateNone, true>(rc, gl);
    } else {
      prep_load_rows<D, kGateRuntime, false>(rc, gl);
    }
#pragma unroll
    for (int rr = 1; rr < RPW; ++rr)
#pragma unroll
      for (int e = 0; e < EPL; ++e) gl[rr][e] += gl[rr - 1][e];
    sts_f32<EPL>(sTot + warp * D + ch, gl[RPW - 1]);
    __syncthreads();
    float pre[EPL];
#pragma unroll
    for (int e = 0; e < EPL; ++e) pre[e] = 0.f;
    for (int w = 0; w < warp; ++w) {
      float t[EPL];
      lds_f32<EPL>(t, sTot + w * D + ch);
#pragma unroll
      for (int e = 0; e < EPL; ++e) pre[e] += t[e];
    }
#pragma unroll
    for (int rr = 0; rr < RPW; ++rr) {
#pragma unroll
      for (int e = 0; e < EPL; ++e) gl[rr][e] += pre[e];
      sts_f32<EPL>(sG + (RPW * warp + rr) * LDG + ch, gl[rr]);
    }
    if (warp == kWarps - 1) {  // row 63: GC2, decay = exp(GC) -> scratch
      float dec[EPL];
#pragma unroll
      for (int e = 0; e < EPL; ++e) dec[e] = ex2(gl[RPW - 1][e]);
      sts_f32<EPL>(sGC + ch, gl[RPW - 1]);
      sts_f32<EPL>(p.scr.decay + cid * D + ch, dec);
    }
  }
  __syncthreads();  // G2, raw rows, multipliers visible; the totals are dead (A_kk may be written)

  // ---- A: one 16 x 16 block (a, b) of A_qk and A_kk per warp, operands formed in registers ----------------
  constexpr int kUnits = kDiagMma ? 10 : 6;
  if (warp < kUnits) {
    int a, b;
    if constexpr (kDiagMma) {
      a = warp < 1 ? 0 : warp < 3 ? 1 : warp < 6 ? 2 : 3;
      b = warp - a * (a + 1) / 2;
    } else {
      a = warp < 1 ? 1 : warp < 3 ? 2 : 3;
      b = warp - a * (a - 1) / 2;
    }
    const float* const Ra = sG + (a ? 16 * a - 1 : 0) * LDG;  // R_a = G2[16a - 1] (R_0 = 0)
    const int i0 = 16 * a + gq, j0 = 16 * b + gq;
    float acc[2][2][4] = {};  // [A_qk, A_kk][n8 tile][fragment]
#pragma unroll 2
    for (int k0 = 0; k0 < D; k0 += 16) {
      float2 R[2];
#pragma unroll
      for (int y = 0; y < 2; ++y)
        R[y] = a ? *reinterpret_cast<const float2*>(Ra + k0 + 2 * tq + 8 * y) : make_float2(0.f, 0.f);
      uint32_t fq[4], fk[4], fb[2][2];
#pragma unroll
      for (int x = 0; x < 4; ++x) {  // A fragment x: row i0 + 8 (x & 1), columns k0 + 2 tq + 8 (x >> 1) + {0, 1}
        const int i = i0 + 8 * (x & 1), c = k0 + 2 * tq + 8 * (x >> 1);
        const float2 gg = *reinterpret_cast<const float2*>(sG + i * LDG + c);
        const float e0 = ex2(gg.x - R[x >> 1].x), e1 = ex2(gg.y - R[x >> 1].y);
        const uint32_t uq = lds32(sQ + i * LDB + c), uk = lds32(sK + i * LDB + c);
        fq[x] = pack_bf16(bf_lo(uq) * e0, bf_hi(uq) * e1);
        fk[x] = pack_bf16(bf_lo(uk) * e0, bf_hi(uk) * e1);
      }
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int y = 0; y < 2; ++y) {  // B fragment y of tile n: row j0 + 8 n, columns k0 + 2 tq + 8 y + {0, 1}
          const int j = j0 + 8 * n, c = k0 + 2 * tq + 8 * y;
          const float2 gg = *reinterpret_cast<const float2*>(sG + j * LDG + c);
          const float e0 = ex2(R[y].x - gg.x), e1 = ex2(R[y].y - gg.y);
          const uint32_t uk = lds32(sK + j * LDB + c);
          fb[n][y] = pack_bf16(bf_lo(uk) * e0, bf_hi(uk) * e1);
        }
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        mma_bf16(acc[0][n], fq, fb[n]);
        mma_bf16(acc[1][n], fk, fb[n]);
      }
    }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int i = i0 + 8 * rr;
      const float mqi = sMq[i], mki = sMk[i] * sBeta[i];
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const int j = j0 - gq + 8 * n + 2 * tq;  // columns j, j + 1
        const float mk0 = sMk[j], mk1 = sMk[j + 1];
        const float q0 = j <= i ? acc[0][n][2 * rr] * mqi * mk0 : 0.f;
        const float q1 = j + 1 <= i ? acc[0][n][2 * rr + 1] * mqi * mk1 : 0.f;
        *reinterpret_cast<uint32_t*>(gaqk + i * kC + j) = pack_bf16(q0, q1);
        sAkk[i * LDA + j] = j < i ? acc[1][n][2 * rr] * mki * mk0 : 0.f;
        sAkk[i * LDA + j + 1] = j + 1 < i ? acc[1][n][2 * rr + 1] * mki * mk1 : 0.f;
      }
    }
  }
  if constexpr (!kDiagMma) {
    // diagonal blocks per pair i >= j (136 a block), D / 32 lanes a pair: exp(G_i - G_j) <= 1 for any g <= 0
    constexpr int kParts = D / 32, kItems = 4 * 136 * kParts;
    static_assert(kItems % 32 == 0, "whole warps per iteration (full-mask shuffles)");
    for (int e = tid; e < kItems; e += kThreads) {
      const int part = e % kParts, pr = e / kParts;
      const int a = pr / 136, t = pr % 136;
      int i = int((sqrtf(8.f * float(t) + 1.f) - 1.f) * 0.5f);  // t = i (i + 1) / 2 + j, j <= i
      if ((i + 1) * (i + 2) / 2 <= t) ++i;
      if (i * (i + 1) / 2 > t) --i;
      const int j = t - i * (i + 1) / 2;
      const int I = 16 * a + i, J = 16 * a + j;
      float sq = 0.f, sk = 0.f;
#pragma unroll 4
      for (int c = 32 * part; c < 32 * part + 32; c += 2) {
        const float2 gi = *reinterpret_cast<const float2*>(sG + I * LDG + c);
        const float2 gj = *reinterpret_cast<const float2*>(sG + J * LDG + c);
        const float e0 = ex2(gi.x - gj.x), e1 = ex2(gi.y - gj.y);
        const uint32_t uq = lds32(sQ + I * LDB + c), uki = lds32(sK + I * LDB + c), ukj = lds32(sK + J * LDB + c);
        const float kj0 = bf_lo(ukj) * e0, kj1 = bf_hi(ukj) * e1;
        sq += bf_lo(uq) * kj0 + bf_hi(uq) * kj1;
        sk += bf_lo(uki) * kj0 + bf_hi(uki) * kj1;
      }
#pragma unroll
      for (int o = 1; o < kParts; o <<= 1) {
        sq += __shfl_xor_sync(0xffffffffu, sq, o);
        sk += __shfl_xor_sync(0xffffffffu, sk, o);
      }
      if (part == 0) {
        gaqk[I * kC + J] = __float2bfloat16_rn(sq * sMq[I] * sMk[J]);
        sAkk[I * LDA + J] = j < i ? sk * sMk[I] * sMk[J] * sBeta[I] : 0.f;
      }
    }
  }

  // ---- X: Qg -> scratch, Kg -> registers; KdT -> scratch; zeros of A_qk above the diagonal ----------------
  constexpr int kX1 = kC * (D / 8) / kThreads;  // items (row, 8 channels) per thread
  static_assert(kX1 >= 1 && kX1 * kThreads == kC * (D / 8), "whole items");
  uint4 kg[kX1];
#pragma unroll
  for (int it = 0; it < kX1; ++it) {
    const int e = tid + it * kThreads;
    const int r = e / (D / 8), c = 8 * (e % (D / 8));
    const float4 g0 = *reinterpret_cast<const float4*>(sG + r * LDG + c);
    const float4 g1 = *reinterpret_cast<const float4*>(sG + r * LDG + c + 4);
    const float gg[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
    const uint4 uq = *reinterpret_cast<const uint4*>(sQ + r * LDB + c);
    const uint4 uk = *reinterpret_cast<const uint4*>(sK + r * LDB + c);
    const float mq = sMq[r], mk = sMk[r];
    const uint32_t wq[4] = {uq.x, uq.y, uq.z, uq.w}, wk[4] = {uk.x, uk.y, uk.z, uk.w};
    uint32_t oq[4], ok[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const float e0 = ex2(gg[2 * m]), e1 = ex2(gg[2 * m + 1]);
      oq[m] = pack_bf16(bf_lo(wq[m]) * mq * e0, bf_hi(wq[m]) * mq * e1);
      ok[m] = pack_bf16(bf_lo(wk[m]) * mk * e0, bf_hi(wk[m]) * mk * e1);
    }
    stg128(p.scr.qg + cid * (kC * D) + r * D + c, make_uint4(oq[0], oq[1], oq[2], oq[3]));
    kg[it] = make_uint4(ok[0], ok[1], ok[2], ok[3]);
  }
  constexpr int kX2 = D * (kC / 8) / kThreads;  // items (channel, 8 rows) per thread
  static_assert(kX2 >= 1 && kX2 * kThreads == D * (kC / 8), "whole items");
#pragma unroll
  for (int it = 0; it < kX2; ++it) {
    const int e = tid + it * kThreads;
    const int c = e % D, r0 = 8 * (e / D);
    const float gc = sGC[c];
    uint32_t wd[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int r = r0 + 2 * m;
      const float k0 = bf2f(sK[r * LDB + c]) * sMk[r], k1 = bf2f(sK[(r + 1) * LDB + c]) * sMk[r + 1];
      wd[m] = pack_bf16(k0 * ex2(gc - sG[r * LDG + c]), k1 * ex2(gc - sG[(r + 1) * LDG + c]));
    }
    stg128(p.scr.kdt + cid * (D * kC) + c * kC + r0, make_uint4(wd[0], wd[1], wd[2], wd[3]));
  }
  static_assert(kC * 8 % kThreads == 0, "whole items");
#pragma unroll
  for (int it = 0; it < kC * 8 / kThreads; ++it) {  // A_qk segments (row r, columns 8 s .. + 8)
    const int e = tid + it * kThreads;
    const int r = e >> 3, s = e & 7;
    bf16* const dst = gaqk + r * kC + 8 * s;
    if ((s >> 1) > (r >> 4)) {
      stg128(dst, make_uint4(0u, 0u, 0u, 0u));
    } else if (!kDiagMma && (s >> 1) == (r >> 4)) {  // diagonal block: the pair loop wrote j <= r
#pragma unroll
      for (int x = 0; x < 8; ++x)
        if (8 * s + x > r) dst[x] = __float2bfloat16_rn(0.f);
    }
  }
  __syncthreads();  // every read of q, k raw and G2 is done; A_kk complete

  // ---- S: Kg -> shared memory; T = (I + A_kk)^-1; Tb = T diag(beta) -------------------------------------
#pragma unroll
  for (int it = 0; it < kX1; ++it) {
    const int e = tid + it * kThreads;
    const int r = e / (D / 8), c = 8 * (e % (D / 8));
    *reinterpret_cast<uint4*>(sKg + r * LDB + c) = kg[it];
  }
  if (warp < 4 && lane < 16) {  // diagonal blocks: forward substitution, lane = column j of block warp
    // row i of L by 16-byte broadcast loads (not one dependent load per product), two partial sums
    const int base = 16 * warp, j = lane;
    float col[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float Li[16];
#pragma unroll
      for (int q = 0; q < (i + 3) / 4; ++q) {
        const float4 v = *reinterpret_cast<const float4*>(sAkk + (base + i) * LDA + base + 4 * q);
        Li[4 * q] = v.x, Li[4 * q + 1] = v.y, Li[4 * q + 2] = v.z, Li[4 * q + 3] = v.w;
      }
      float s0 = 0.f, s1 = 0.f;
#pragma unroll
      for (int m = 0; m < i; m += 2) {
        s0 += Li[m] * col[m];
        if (m + 1 < i) s1 += Li[m + 1] * col[m + 1];
      }
      col[i] = (i == j ? 1.f : 0.f) - (s0 + s1);
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) sT[(base + i) * LDA + base + j] = col[i];
  }
  __syncthreads();
#pragma unroll 1
  for (int d = 1; d < 4; ++d) {  // blocks (a, a - d): T_ab = -T_aa sum_{m=b}^{a-1} L_am T_mb
    const int nblk = 4 - d;
    for (int e = tid; e < nblk * 256; e += kThreads) {
      const int a = d + (e >> 8), b = a - d, i = (e >> 4) & 15, j = e & 15;
      float s = 0.f;
      for (int m = b; m < a; ++m)
#pragma unroll
        for (int x = 0; x < 16; ++x) s += sAkk[(16 * a + i) * LDA + 16 * m + x] * sT[(16 * m + x) * LDA + 16 * b + j];
      sP[(e >> 8) * 256 + i * 16 + j] = s;
    }
    __syncthreads();
    for (int e = tid; e < nblk * 256; e += kThreads) {
      const int a = d + (e >> 8), b = a - d, i = (e >> 4) & 15, j = e & 15;
      float s = 0.f;
#pragma unroll
      for (int x = 0; x < 16; ++x) s += sT[(16 * a + i) * LDA + 16 * a + x] * sP[(e >> 8) * 256 + x * 16 + j];
      sT[(16 * a + i) * LDA + 16 * b + j] = -s;
    }
    __syncthreads();
  }
#pragma unroll
  for (int it = 0; it < kC * kC / kThreads; ++it) {
    const int e = tid + it * kThreads;
    const int i = e >> 6, j = e & 63;
    const float val = (j >> 4) > (i >> 4) ? 0.f : sT[i * LDA + j] * sBeta[j];  // blocks above: never written
    sTb[i * LDT + j] = __float2bfloat16_rn(val);
  }
  __syncthreads();

  // ---- P4: Wn = -Tb Kg, U0 = Tb V -> scratch (one product after the other: 16 accumulators) ------------------
  {
    constexpr int NT = D / 32;  // n8 tiles per warp (D / 4 columns)
    static_assert(NT % 2 == 0, "ldmatrix.x4 covers two n8 tiles");
    const int t0 = 16 * (warp >> 2), n0 = (warp & 3) * (D / 4);
    const int64_t base = cid * (kC * D);
#pragma unroll
    for (int prod = 0; prod < 2; ++prod) {
      const bf16* const Bm = prod == 0 ? sKg : sV;  // row-major [64][LDB]: k = row
      float acc[NT][4] = {};
#pragma unroll
      for (int k0 = 0; k0 < kC; k0 += 16) {
        uint32_t af[4];
        const int o = (t0 + gq) * LDT + k0 + 2 * tq;
        af[0] = lds32(sTb + o);
        af[1] = lds32(sTb + o + 8 * LDT);
        af[2] = lds32(sTb + o + 8);
        af[3] = lds32(sTb + o + 8 * LDT + 8);
        const int lo = (k0 + (lane & 15)) * LDB + n0 + 8 * (lane >> 4);  // ldmatrix row address of this lane
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          uint32_t bm[4];
          ldsm_x4_trans(bm, Bm + lo + 16 * np);
          const uint32_t b0[2] = {bm[0], bm[1]}, b1[2] = {bm[2], bm[3]};
          mma_bf16(acc[2 * np], af, b0);
          mma_bf16(acc[2 * np + 1], af, b1);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int64_t off = base + (t0 + gq + 8 * rr) * D + n0 + 8 * nt + 2 * tq;
          if (prod == 0) {
            const float w0 = -acc[nt][2 * rr], w1 = -acc[nt][2 * rr + 1];
            const uint32_t hi = pack_bf16(w0, w1);
            *reinterpret_cast<uint32_t*>(p.scr.wh + off) = hi;
            *reinterpret_cast<uint32_t*>(p.scr.wl + off) = pack_bf16(w0 - bf_lo(hi), w1 - bf_hi(hi));
          } else {
            *reinterpret_cast<float2*>(p.scr.u0 + off) = make_float2(acc[nt][2 * rr], acc[nt][2 * rr + 1]);
          }
        }
    }
  }
}

}  // namespace kimi::cuda::kda_chunk
