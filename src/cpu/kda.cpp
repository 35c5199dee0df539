// CPU Kimi Delta Attention (SPEC 5, 5.1): fused gate, beta, token recurrence and the chunkwise (UT transform)
// form.
//
// Both forward forms thread over (sequence, head) pairs; each pair keeps its K x V state in fp32 in the
// kv layout internally (row d of S is key channel d), whatever the layout of initial/final state.
// Inputs are read a block of tokens at a time and turned into fp32 q (L2-normalized, scaled), k
// (L2-normalized), v, g (log decay, fused gate applied) and beta (sigmoid applied) by the same loader.
#include "cpu/kda.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "cpu/tensor_io.h"
#include "cpu/vec_math.h"

namespace kimi::cpu {

namespace {

inline float sigmoidf(float z) {
  return 1.f / (1.f + std::exp(-z));
}

// exp(x) for float arrays (Cephes expf polynomial, < 1 ulp on [-87, 87]), written with integer selects
// so that GCC vectorizes it without -ffast-math, cloned for AVX-512 / AVX2 / baseline x86-64.
// Below -87 it returns 0 (no denormal ever enters the products), above 87 it saturates at e^87; NaN
// stays NaN. The chunk form only calls it with x <= 0 (differences of a non-increasing cumulative sum).
__attribute__((target_clones("avx512f", "avx2", "default"))) void exp_array(const float* x, float* y,
                                                                            int64_t n) {
  constexpr uint32_t k87 = kExpClampBits;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(x[i]);
    const uint32_t mag = u & 0x7fffffffu, sign = u & 0x80000000u;
    const uint32_t keep = (sign != 0u && mag > k87) ? 0u : 0xffffffffu;  // below -87: 0
    const uint32_t nan = mag > 0x7f800000u ? 0x7fc00000u : 0u;
    const float v = std::bit_cast<float>((mag < k87 ? mag : k87) | sign);  // clamped to [-87, 87]
    y[i] = std::bit_cast<float>((std::bit_cast<uint32_t>(exp_clamped(v)) & keep) | nan);
  }
}

// log1p(y) for y in [0, 1] (Cephes logf polynomial on 1 + y, plus the correction (y - (u - 1)) / u for the
// rounding of u = 1 + y; < 1.5 ulp), integer selects so that it vectorizes.
__attribute__((target_clones("avx512f", "avx2", "default"))) void log1p_unit(const float* in, float* out,
                                                                             int64_t n) {
  constexpr uint32_t kSqrt2 = 0x3FB504F3u;  // bits of 1.41421356f
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float y = in[i];
    const float u = 1.f + y;
    const uint32_t hi = std::bit_cast<uint32_t>(u) > kSqrt2 ? 0xffffffffu : 0u;
    // u = 2^e (1 + x), x in [sqrt(1/2) - 1, sqrt(2) - 1], computed exactly
    const float x = std::bit_cast<float>((std::bit_cast<uint32_t>(u * 0.5f - 1.f) & hi) |
                                         (std::bit_cast<uint32_t>(u - 1.f) & ~hi));
    const float e = std::bit_cast<float>(0x3f800000u & hi);
    const float z = x * x;
    float p = 7.0376836292e-2f;
    p = p * x - 1.1514610310e-1f;
    p = p * x + 1.1676998740e-1f;
    p = p * x - 1.2420140846e-1f;
    p = p * x + 1.4249322787e-1f;
    p = p * x - 1.6668057665e-1f;
    p = p * x + 2.0000714765e-1f;
    p = p * x - 2.4999993993e-1f;
    p = p * x + 3.3333331174e-1f;
    float r = p * x * z;
    r += e * -2.12194440e-4f;
    r += -0.5f * z;
    r = x + r + e * 0.693359375f;
    out[i] = r + (y - (u - 1.f)) / u;
  }
}

// SPEC 5 gate over n channels of one head: g = gate(f + dt_bias), a = exp(A_log[h]); t1, t2: n floats.
//   softplus: g = -a * softplus(x), softplus(x) = max(x, 0) + log1p(exp(-|x|)) (stable for every x; equals
//             x for x > 20 and log1p(exp(x)) otherwise to float precision)
//   bounded:  g = lb * sigmoid(a x) = lb / (1 + exp(-a x))
void gate_row(GateForm form, float a, float lb, const float* f, const float* dt, float* g, int64_t n,
              float* t1, float* t2) {
  for (int64_t i = 0; i < n; ++i) g[i] = f[i] + dt[i];
  if (form == GateForm::softplus) {
    for (int64_t i = 0; i < n; ++i) t1[i] = -std::fabs(g[i]);
    exp_array(t1, t2, n);
    log1p_unit(t2, t1, n);
    for (int64_t i = 0; i < n; ++i) {  // max(x, 0) as a bit mask (vectorizes): 0 when the sign bit is set
      const uint32_t u = std::bit_cast<uint32_t>(g[i]);
      g[i] = -a * (std::bit_cast<float>(u & ((u >> 31) - 1u)) + t1[i]);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) t1[i] = -a * g[i];
    exp_array(t1, t2, n);
    for (int64_t i = 0; i < n; ++i) g[i] = lb / (1.f + t2[i]);
  }
}

// C[M x N] = (C +) A[M x K] B[K x N], row-major with leading dimensions: the dense products of the chunk
// form.
//
// NOTE: a register-tiled kernel (8 x 32 accumulators: 16 AVX-512 registers, enough independent FMA
// chains for two FMA ports at latency 4) rather than cblas_sgemm. The OpenBLAS of this machine detects
// its CPU as "Prescott" and runs SSE3 kernels (7-12 GMAC/s at 64..128 x 128 x 128); this kernel, cloned
// for AVX-512 / AVX2, runs an estimated 55-80 GMAC/s inside the chunk form (see docs/ops/kda.md).
template <int MR, int NR>
__attribute__((always_inline)) inline void gemm_tile(int64_t K, const float* A, int64_t sai, int64_t sap,
                                                     const float* B, int64_t ldb, float* C, int64_t ldc,
                                                     bool accumulate) {
  float acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = accumulate ? C[i * ldc + j] : 0.f;
  for (int64_t p = 0; p < K; ++p) {
    const float* b = B + p * ldb;
    for (int i = 0; i < MR; ++i) {
      const float x = A[i * sai + p * sap];
      for (int j = 0; j < NR; ++j) acc[i][j] += x * b[j];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) C[i * ldc + j] = acc[i][j];
}

// A(i, p) = A[i * sai + p * sap]: row-major A (sai = lda, sap = 1) or a transposed one (sai = 1, sap = lda).
__attribute__((always_inline)) inline void gemm_any(int64_t M, int64_t N, int64_t K, const float* A,
                                                    int64_t sai, int64_t sap, const float* B, int64_t ldb,
                                                    float* C, int64_t ldc, bool accumulate) {
  constexpr int MR = 8, NR = 32;
  const int64_t N0 = N - N % NR;
  int64_t i = 0;
  const int64_t M0 = M - M % MR;
  constexpr int64_t MB = 32;  // rows of A per pass: MB x K of A and a K x NR strip of B stay in L1
  for (int64_t ib = 0; ib < M0; ib += MB)
    for (int64_t j = 0; j < N0; j += NR)
      for (i = ib; i < std::min(M0, ib + MB); i += MR)
        gemm_tile<MR, NR>(K, A + i * sai, sai, sap, B + j, ldb, C + i * ldc + j, ldc, accumulate);
  i = M0;
  // rows left over (all columns), then the columns left over of the tiled rows: one row at a time
  for (int64_t r = 0; r < M; ++r) {
    const int64_t j0 = r < i ? N0 : 0;
    if (j0 == N) continue;
    float* c = C + r * ldc;
    if (!accumulate)
      for (int64_t j = j0; j < N; ++j) c[j] = 0.f;
    for (int64_t p = 0; p < K; ++p) {
      const float x = A[r * sai + p * sap];
      const float* b = B + p * ldb;
      for (int64_t j = j0; j < N; ++j) c[j] += x * b[j];
    }
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void gemm_nn(int64_t M, int64_t N, int64_t K,
                                                                          const float* A, int64_t lda,
                                                                          const float* B, int64_t ldb,
                                                                          float* C, int64_t ldc,
                                                                          bool accumulate) {
  gemm_any(M, N, K, A, lda, 1, B, ldb, C, ldc, accumulate);
}

// C[M x N] (+)= A^T B with A [K x M] row-major (leading dimension lda).
__attribute__((target_clones("avx512f", "avx2", "default"))) void gemm_tn(int64_t M, int64_t N, int64_t K,
                                                                          const float* A, int64_t lda,
                                                                          const float* B, int64_t ldb,
                                                                          float* C, int64_t ldc,
                                                                          bool accumulate) {
  gemm_any(M, N, K, A, 1, lda, B, ldb, C, ldc, accumulate);
}

// Rows [i0, i1) of U += NL U among themselves (j in [i0, i)).
__attribute__((target_clones("avx512f", "avx2", "default"))) void forward_rows(int64_t i0, int64_t i1,
                                                                               int64_t n, const float* NL,
                                                                               int64_t ldl, float* U) {
  for (int64_t i = i0 + 1; i < i1; ++i) {
    float* ui = U + i * n;
    for (int64_t j = i0; j < i; ++j) {
      const float x = NL[i * ldl + j];
      const float* uj = U + j * n;
      for (int64_t c = 0; c < n; ++c) ui[c] += x * uj[c];
    }
  }
}

// U <- (I + L)^-1 U by forward substitution; NL = -L strictly lower triangular [m x m] (ld ldl), U [m x n].
// Blocks of kSub rows: the rows of a block first take the earlier blocks in one product, then substitute
// among themselves row by row.
void forward_subst(int64_t m, int64_t n, const float* NL, int64_t ldl, float* U, int64_t blk) {
  for (int64_t i0 = 0; i0 < m; i0 += blk) {
    const int64_t i1 = std::min(m, i0 + blk);
    if (i0 > 0) gemm_nn(i1 - i0, n, i0, NL + i0 * ldl, ldl, U, n, U + i0 * n, n, true);
    forward_rows(i0, i1, n, NL, ldl, U);
  }
}

const char* elem(const TensorView& t, int64_t b, int64_t s, int64_t h) {
  return static_cast<const char*>(t.data) +
         (b * t.strides[0] + s * t.strides[1] + h * t.strides[2]) * int64_t(t.element_size());
}

// n contiguous elements of dtype t <-> f32 (bf16 and f32 without a per-element switch, so that they
// vectorize).
void load_span(const void* p, DType t, int64_t n, float* dst) {
  if (t == DType::f32) {
    std::memcpy(dst, p, static_cast<size_t>(n) * sizeof(float));
  } else if (t == DType::bf16) {
    const uint16_t* h = static_cast<const uint16_t*>(p);
    for (int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(uint32_t(h[i]) << 16);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = load_as_f32(p, t, i);
  }
}

void store_span(void* p, DType t, int64_t n, const float* src) {
  if (t == DType::f32) {
    std::memcpy(p, src, static_cast<size_t>(n) * sizeof(float));
  } else if (t == DType::bf16) {
    uint16_t* h = static_cast<uint16_t*>(p);
    for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) store_from_f32(p, t, i, src[i]);
  }
}

void load_vec(const TensorView& t, int64_t b, int64_t s, int64_t h, int64_t n, float* dst) {
  load_span(elem(t, b, s, h), t.dtype, n, dst);
}

void store_vec(const TensorView& t, int64_t b, int64_t s, int64_t h, int64_t n, const float* src) {
  store_span(const_cast<char*>(elem(t, b, s, h)), t.dtype, n, src);
}

// x *= 1 / sqrt(sum(x^2) + 1e-6) * mul (SPEC 3, sum not mean), or x *= mul without the norm.
void normalize(float* x, int64_t n, bool l2, float mul) {
  double s = mul;
  if (l2) {
    double lane[8] = {};  // 8 partial sums so that the loop vectorizes (no -ffast-math)
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; ++l) lane[l] += double(x[i + l]) * x[i + l];
    for (int l = 0; i < n; ++i, ++l) lane[l] += double(x[i]) * x[i];
    double ss = 0;
    for (double v : lane) ss += v;
    s = mul / std::sqrt(ss + 1e-6);
  }
  const float sf = float(s);
  for (int64_t i = 0; i < n; ++i) x[i] *= sf;
}

// Reads tokens [t, t + n) of one (sequence, head) into fp32 arrays (rows of K or V values).
struct Loader {
  const KdaArgs& a;
  const KdaDims& d;
  int64_t h;
  float gate_a = 0.f;              // exp(A_log[h])
  const float* dt_bias = nullptr;  // K values of head h
  mutable std::vector<float> t1, t2;

  // NOTE: the rows of one head are H * K elements apart (4 KB at H = 8, K = 128 f32): each row is on a
  // page of its own, where the hardware prefetchers do not follow. The chunk form asks for the next
  // chunk's rows while it reads this chunk's (measured: see docs/ops/kda.md).
  void prefetch_row(const TensorView& x, int64_t b, int64_t s, int64_t n) const {
    const char* p = elem(x, b, s, h);
    const int64_t bytes = n * int64_t(x.element_size());
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 2);
  }

  Loader(const KdaArgs& args, const KdaDims& dims, int64_t head) : a(args), d(dims), h(head) {
    if (a.gate) {
      const TensorView& al = a.gate->A_log;
      gate_a = std::exp(static_cast<const float*>(al.data)[h * al.strides[0]]);
      dt_bias = static_cast<const float*>(a.gate->dt_bias.data) + h * d.K;
      t1.resize(static_cast<size_t>(d.K));
      t2.resize(static_cast<size_t>(d.K));
    }
  }

  // ahead > 0: also prefetch the rows of token s + ahead (< end) for each token s read.
  void load(int64_t b, int64_t t, int64_t n, float* q, float* k, float* v, float* g, float* beta,
            int64_t ahead = 0, int64_t end = 0) const {
    const int64_t K = d.K, V = d.V;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t s = t + r;
      if (ahead > 0 && s + ahead < end) {
        prefetch_row(a.q, b, s + ahead, K);
        prefetch_row(a.k, b, s + ahead, K);
        prefetch_row(a.v, b, s + ahead, V);
        prefetch_row(a.g, b, s + ahead, K);
      }
      float* qr = q + r * K;
      float* kr = k + r * K;
      float* gr = g + r * K;
      load_vec(a.q, b, s, h, K, qr);
      load_vec(a.k, b, s, h, K, kr);
      load_vec(a.v, b, s, h, V, v + r * V);
      load_vec(a.g, b, s, h, K, gr);
      normalize(qr, K, a.qk_l2norm_in_kernel, d.scale);
      if (a.qk_l2norm_in_kernel) normalize(kr, K, true, 1.f);
      if (a.gate)
        gate_row(a.gate->form, gate_a, a.gate->lower_bound, gr, dt_bias, gr, K, t1.data(), t2.data());
      const float bt = load_as_f32(elem(a.beta, b, s, h), a.beta.dtype, 0);
      beta[r] = a.beta_sigmoid_in_kernel ? sigmoidf(bt) : bt;
    }
  }
};

// State slot (n, h) of an f32 [N, H, K, V] / [N, H, V, K] tensor <-> S (K x V, row-major).
void load_state(const KdaArgs& a, const KdaDims& d, int64_t n, int64_t h, float* S) {
  const int64_t K = d.K, V = d.V;
  if (!a.initial_state.present()) {
    std::fill(S, S + K * V, 0.f);
    return;
  }
  const float* p = static_cast<const float*>(a.initial_state.data) + (d.state_rows[size_t(n)] * d.H + h) * K * V;
  if (a.state_layout == StateLayout::kv) {
    std::memcpy(S, p, size_t(K * V) * sizeof(float));
  } else {
    for (int64_t j = 0; j < V; ++j)
      for (int64_t i = 0; i < K; ++i) S[i * V + j] = p[j * K + i];
  }
}

void store_state(const KdaArgs& a, const KdaDims& d, int64_t n, int64_t h, const float* S) {
  if (!a.final_state.present()) return;
  const int64_t K = d.K, V = d.V;
  float* p = static_cast<float*>(a.final_state.data) + (d.state_rows[size_t(n)] * d.H + h) * K * V;
  if (a.state_layout == StateLayout::kv) {
    std::memcpy(p, S, size_t(K * V) * sizeof(float));
  } else {
    for (int64_t j = 0; j < V; ++j)
      for (int64_t i = 0; i < K; ++i) p[j * K + i] = S[i * V + j];
  }
}

constexpr int64_t kLoadBlock = 64;  // tokens read at a time by the recurrent form

void recurrent_one(const KdaArgs& a, const KdaDims& d, int64_t n, int64_t h) {
  const int64_t K = d.K, V = d.V;
  const KdaSeq sq = d.seqs[size_t(n)];
  const Loader ld(a, d, h);
  std::vector<float> S(static_cast<size_t>(K * V)), q(static_cast<size_t>(kLoadBlock * K)),
      k(static_cast<size_t>(kLoadBlock * K)), v(static_cast<size_t>(kLoadBlock * V)),
      g(static_cast<size_t>(kLoadBlock * K)), beta(static_cast<size_t>(kLoadBlock)),
      kS(static_cast<size_t>(V)), e(static_cast<size_t>(V)), o(static_cast<size_t>(V));
  load_state(a, d, n, h, S.data());
  for (int64_t t0 = 0; t0 < sq.len; t0 += kLoadBlock) {
    const int64_t nb = std::min(kLoadBlock, sq.len - t0);
    ld.load(sq.b, sq.t0 + t0, nb, q.data(), k.data(), v.data(), g.data(), beta.data());
    for (int64_t r = 0; r < nb; ++r) {
      const float* qr = q.data() + r * K;
      const float* kr = k.data() + r * K;
      const float* gr = g.data() + r * K;
      const float* vr = v.data() + r * V;
      // S <- Diag(exp(g)) S ; kS = S^T k
      std::fill(kS.begin(), kS.end(), 0.f);
      for (int64_t i = 0; i < K; ++i) {
        float* Si = S.data() + i * V;
        const float ai = std::exp(gr[i]), ki = kr[i];
        for (int64_t j = 0; j < V; ++j) {
          Si[j] *= ai;
          kS[size_t(j)] += ki * Si[j];
        }
      }
      // e = beta (v - S^T k); S <- S + k e^T ; o = S^T q
      for (int64_t j = 0; j < V; ++j) e[size_t(j)] = beta[size_t(r)] * (vr[j] - kS[size_t(j)]);
      std::fill(o.begin(), o.end(), 0.f);
      for (int64_t i = 0; i < K; ++i) {
        float* Si = S.data() + i * V;
        const float ki = kr[i], qi = qr[i];
        for (int64_t j = 0; j < V; ++j) {
          Si[j] += ki * e[size_t(j)];
          o[size_t(j)] += qi * Si[j];
        }
      }
      store_vec(a.o, sq.b, sq.t0 + t0 + r, h, V, o.data());
    }
  }
  store_state(a, d, n, h, S.data());
}

constexpr int64_t kSub = 16;  // sub-block of the intra-chunk matrices (see chunk_one)

// Sum of 16 lanes as a tree (depth 4: a sequential sum is a 16-add dependency chain per value).
__attribute__((always_inline)) inline float sum16(float* l) {
  for (int i = 0; i < 8; ++i) l[i] += l[i + 8];
  for (int i = 0; i < 4; ++i) l[i] += l[i + 4];
  return (l[0] + l[2]) + (l[1] + l[3]);
}

struct ChunkScratch {
  std::vector<float> S, q, k, v, g, beta, al, Pf, KQ, Kd, Akk, Aqk, Qr, Ab, Kl, U, P, xv, yv;
  ChunkScratch(int64_t C, int64_t K, int64_t V)
      : S(static_cast<size_t>(K * V)),
        q(static_cast<size_t>(C * K)),
        k(static_cast<size_t>(C * K)),
        v(static_cast<size_t>(C * V)),
        g(static_cast<size_t>(C * K)),
        beta(static_cast<size_t>(C)),
        al(static_cast<size_t>(C * K)),
        Pf(static_cast<size_t>(C * K)),
        KQ(static_cast<size_t>(2 * C * K)),
        Kd(static_cast<size_t>(C * K)),
        Akk(static_cast<size_t>(C * C)),
        Aqk(static_cast<size_t>(C * C)),
        Qr(static_cast<size_t>(2 * kSub * K)),
        Ab(static_cast<size_t>(2 * kSub * (C + 32))),
        Kl(static_cast<size_t>((C + 32) * K)),
        U(static_cast<size_t>(C * V)),
        P(static_cast<size_t>(2 * C * V)),
        xv(static_cast<size_t>(K)),
        yv(static_cast<size_t>(K)) {}
};

// One (sequence, head) pair in chunks of C tokens (SPEC 5.1).
//
// Decay factors are products of the per-token decays a_t = exp(g_t) (one exp per token and channel, as in
// the recurrent form), never exponentials of differences of a cumulative sum: exp(G_i - G_j) =
// a_{j+1} ... a_i for j < i. Every factor is in [0, 1], so nothing overflows, and a product that
// underflows is below 1e-38 (flushed to zero: the region runs with FTZ/DAZ). Each factor is a chain of
// at most C roundings (0.5 ulp each, like the recurrent form's per-token decay of the state), where
// exp(float(G_i - G_j)) loses |G_i - G_j| * 2^-24 of relative precision when G is large.
//   - pairs inside one sub-block of kSub rows: running products per row i (j from i down to i0);
//   - pairs across sub-blocks (j < r <= i with r the first row of i's sub-block):
//     exp(G_i - G_j) = [a_{r+1} ... a_i] [a_{j+1} ... a_r], two factors in [0, 1], so these blocks are
//     dense products (FLA's secondary chunking).
// Cloned for AVX-512 / AVX2 / baseline: its element-wise loops are a good part of the chunk form's time.
__attribute__((target_clones("avx512f", "avx2", "default"))) void chunk_one(const KdaArgs& a,
                                                                            const KdaDims& d, int64_t C,
                                                                            int64_t n, int64_t h,
                                                                            ChunkScratch& s) {
  const int64_t K = d.K, V = d.V;
  const KdaSeq sq = d.seqs[size_t(n)];
  const Loader ld(a, d, h);
  float* S = s.S.data();
  float *xv = s.xv.data(), *yv = s.yv.data();
  load_state(a, d, n, h, S);
  for (int64_t c0 = 0; c0 < sq.len; c0 += C) {
    const int64_t m = std::min(C, sq.len - c0);
    ld.load(sq.b, sq.t0 + c0, m, s.q.data(), s.k.data(), s.v.data(), s.g.data(), s.beta.data(), C,
            sq.t0 + sq.len);
    const float *q = s.q.data(), *k = s.k.data();
    // al = exp(g); Pf_r = a_0 ... a_r = exp(G_r); KQ = [k . Pf; q . Pf] (2m x K)
    float *al = s.al.data(), *Pf = s.Pf.data(), *KQ = s.KQ.data();
    exp_array(s.g.data(), al, m * K);
    std::memcpy(Pf, al, static_cast<size_t>(K) * sizeof(float));
    for (int64_t r = 1; r < m; ++r)
      for (int64_t i = 0; i < K; ++i) Pf[r * K + i] = Pf[(r - 1) * K + i] * al[r * K + i];
    for (int64_t e = 0; e < m * K; ++e) {
      KQ[e] = k[e] * Pf[e];
      KQ[m * K + e] = q[e] * Pf[e];
    }
    // Kd_r = k_r . (a_{r+1} ... a_{m-1}) = k_r . exp(G_C - G_r) (m x K)
    float* Kd = s.Kd.data();
    std::fill(xv, xv + K, 1.f);
    for (int64_t r = m - 1; r >= 0; --r)
      for (int64_t i = 0; i < K; ++i) {
        Kd[r * K + i] = k[r * K + i] * xv[i];
        xv[i] *= al[r * K + i];
      }

    // A_qk (i >= j) and A_kk (i > j, before the beta row scaling), C x C row-major, zero above.
    float *Aqk = s.Aqk.data(), *Akk = s.Akk.data();
    for (int64_t i = 0; i < m; ++i) {
      std::fill(Aqk + i * C, Aqk + i * C + m, 0.f);
      std::fill(Akk + i * C, Akk + i * C + m, 0.f);
    }
    for (int64_t i0 = 0; i0 < m; i0 += kSub) {
      const int64_t i1 = std::min(m, i0 + kSub), bi = i1 - i0;
      if (i0 > 0) {
        // rows of the sub-block against all earlier rows, through the reference row r = i0:
        // Qr = [q_i; k_i] . (a_{r+1} ... a_i), Kl^T[:, j] = k_j . (a_{j+1} ... a_r)
        std::fill(xv, xv + K, 1.f);
        for (int64_t r = 0; r < bi; ++r) {
          if (r > 0)
            for (int64_t i = 0; i < K; ++i) xv[i] *= al[(i0 + r) * K + i];
          for (int64_t i = 0; i < K; ++i) {
            s.Qr[size_t(r * K + i)] = q[(i0 + r) * K + i] * xv[i];
            s.Qr[size_t((bi + r) * K + i)] = k[(i0 + r) * K + i] * xv[i];
          }
        }
        // Kl^T [K, np]: columns padded with zeros to a multiple of 32 so that the product runs on full tiles
        const int64_t np = (i0 + 31) / 32 * 32;
        for (int64_t i = 0; i < K; ++i) std::fill(s.Kl.data() + i * np + i0, s.Kl.data() + (i + 1) * np, 0.f);
        std::memcpy(xv, al + i0 * K, static_cast<size_t>(K) * sizeof(float));
        for (int64_t j = i0 - 1; j >= 0; --j)
          for (int64_t i = 0; i < K; ++i) {
            s.Kl[size_t(i * np + j)] = k[j * K + i] * xv[i];
            xv[i] *= al[j * K + i];
          }
        // [Qr; Kr] Kl^T -> rows i0.. of A_qk and A_kk
        gemm_nn(2 * bi, np, K, s.Qr.data(), K, s.Kl.data(), np, s.Ab.data(), np, false);
        for (int64_t r = 0; r < bi; ++r) {
          std::memcpy(Aqk + (i0 + r) * C, s.Ab.data() + r * np, static_cast<size_t>(i0) * sizeof(float));
          std::memcpy(Akk + (i0 + r) * C, s.Ab.data() + (bi + r) * np, static_cast<size_t>(i0) * sizeof(float));
        }
      }
      // pairs inside the sub-block: for row i, xv = q_i . (a_{j+1} ... a_i), yv = k_i . (a_{j+1} ... a_i)
      // as j goes down from i to i0
      for (int64_t i = i0; i < i1; ++i) {
        std::memcpy(xv, q + i * K, static_cast<size_t>(K) * sizeof(float));
        std::memcpy(yv, k + i * K, static_cast<size_t>(K) * sizeof(float));
        for (int64_t j = i; j >= i0; --j) {
          const float* kj = k + j * K;
          const float* aj = al + j * K;
          // sums over 16 lanes (vectorizes without -ffast-math), then across the lanes
          float lq[16] = {}, lk[16] = {};
          int64_t c = 0;
          for (; c + 16 <= K; c += 16)
            for (int l = 0; l < 16; ++l) {
              lq[l] += xv[c + l] * kj[c + l];
              lk[l] += yv[c + l] * kj[c + l];
              xv[c + l] *= aj[c + l];
              yv[c + l] *= aj[c + l];
            }
          for (int l = 0; c < K; ++c, ++l) {
            lq[l] += xv[c] * kj[c];
            lk[l] += yv[c] * kj[c];
            xv[c] *= aj[c];
            yv[c] *= aj[c];
          }
          Aqk[i * C + j] = sum16(lq);
          if (j < i) Akk[i * C + j] = sum16(lk);
        }
      }
    }
    for (int64_t i = 0; i < m; ++i)  // stored negated: the substitution adds
      for (int64_t j = 0; j < i; ++j) Akk[i * C + j] *= -s.beta[size_t(i)];

    // P = KQ S = [Ke S; Qe S]
    float *U = s.U.data(), *P = s.P.data(), *O = P + m * V;
    gemm_nn(2 * m, V, K, KQ, K, S, V, P, V, false);
    // U = (I + A_kk)^-1 Diag(beta) (V - Ke S): forward substitution (unit lower triangular solve)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < V; ++j)
        U[r * V + j] = s.beta[size_t(r)] * (s.v[size_t(r * V + j)] - P[r * V + j]);
    forward_subst(m, V, Akk, C, U, kSub);
    // O = Qe S + A_qk U
    for (int64_t i0 = 0; i0 < m; i0 += kSub) {  // A_qk is lower triangular: rows i0.. need U rows < i1 only
      const int64_t i1 = std::min(m, i0 + kSub);
      gemm_nn(i1 - i0, V, i1, Aqk + i0 * C, C, U, V, O + i0 * V, V, true);
    }
    for (int64_t r = 0; r < m; ++r) store_vec(a.o, sq.b, sq.t0 + c0 + r, h, V, O + r * V);
    // S <- Diag(exp(G_C)) S + Kd^T U, exp(G_C) = Pf_{m-1}
    const float* GC = Pf + (m - 1) * K;
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < V; ++j) S[i * V + j] *= GC[i];
    gemm_tn(K, V, m, Kd, K, U, V, S, V, true);
  }
  store_state(a, d, n, h, S);
}

}  // namespace

void kda_gate(TensorView f, const KdaGate& gate, TensorView g, const Context& ctx) {
  const int64_t rows = num_rows(f), K = f.size(-1), H = f.size(-2);
  const float* dt = static_cast<const float*>(gate.dt_bias.data);
  const float* al = static_cast<const float*>(gate.A_log.data);
  const int64_t als = gate.A_log.strides[0];
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> x(static_cast<size_t>(K)), t1(static_cast<size_t>(K)), t2(static_cast<size_t>(K));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t h = row % H;
      load_span(row_ptr(f, row), f.dtype, K, x.data());
      gate_row(gate.form, std::exp(al[h * als]), gate.lower_bound, x.data(), dt + h * K, x.data(), K,
               t1.data(), t2.data());
      store_span(row_ptr(g, row), g.dtype, K, x.data());
    }
  }
}

void kda_beta(TensorView b, TensorView beta, const Context& ctx) {
  const int64_t rows = num_rows(b), H = b.ndim ? b.size(-1) : 1;
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> x(static_cast<size_t>(H));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      load_row(b, row, x.data());
      for (float& v : x) v = sigmoidf(v);
      store_row(beta, row, x.data());
    }
  }
}

void kda_recurrent_fwd(const KdaArgs& args, const KdaDims& d, const Context& ctx) {
  const int64_t N = int64_t(d.seqs.size()), pairs = N * d.H;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads(ctx))
  for (int64_t p = 0; p < pairs; ++p) recurrent_one(args, d, p / d.H, p % d.H);
}

void kda_chunk_fwd(const KdaArgs& args, const KdaDims& d, int chunk_size, const Context& ctx) {
  const int64_t N = int64_t(d.seqs.size()), pairs = N * d.H, C = chunk_size;
#pragma omp parallel num_threads(threads(ctx))
  {
    ChunkScratch s(C, d.K, d.V);
    // NOTE: flush denormals to zero in this region (restored after). Strongly decaying channels put values
    // below 1.2e-38 into k . exp(G) and the state, and x86 takes a microcode assist on every such operand:
    // measured 2x on the whole chunk form with the softplus gate. Values that small are far below every
    // tolerance (they are 1e-33 of the O(1) terms they are added to).
#if defined(__x86_64__) || defined(__i386__)
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);  // FTZ | DAZ
#endif
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < pairs; ++p) chunk_one(args, d, C, p / d.H, p % d.H, s);
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(csr);
#endif
  }
}

}  // namespace kimi::cpu
