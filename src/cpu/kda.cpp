// CPU Kimi Delta Attention (SPEC 5, 5.1): fused gate, beta, token recurrence and the chunkwise (UT transform) form.
//
// Both forward forms thread over (sequence, head) pairs; each pair keeps its K x V state in fp32 in the
// kv layout internally (row d of S is key channel d), whatever the layout of initial/final state.
// Inputs are read a block of tokens at a time and turned into fp32 q (L2-normalized, scaled), k
// (L2-normalized), v, g (log decay, fused gate applied) and beta (sigmoid applied) by the same loader.
#include "cpu/kda.h"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/tensor_io.h"

namespace kimi::cpu {

namespace {

inline float sigmoidf(float z) { return 1.f / (1.f + std::exp(-z)); }

// SPEC 5 gate for one channel; a = exp(A_log[h]), x = f + dt_bias. Softplus is the stable form.
inline float gate_value(GateForm form, float a, float lb, float x) {
  if (form == GateForm::softplus) return -a * (x > 20.f ? x : std::log1p(std::exp(x)));
  return lb * sigmoidf(a * x);
}

// exp(x) for float arrays, vectorizable (Cephes expf polynomial, ~1 ulp); flushes to 0 below -87 so
// that no denormal ever enters the products, and returns inf above 88.7. The chunk form only calls it
// with x <= 0 (differences of a non-increasing cumulative sum).
void exp_array(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    const bool under = xi < -87.f, over = xi > 88.7f;
    float v = std::min(std::max(xi, -87.f), 88.f);
    const float t = v * 1.44269504088896341f;
    const float m = (t + 12582912.f) - 12582912.f;  // round to nearest integer
    float r = v - m * 0.693359375f;
    r = r - m * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.f;
    const float s = std::bit_cast<float>((static_cast<int32_t>(m) + 127) << 23);
    y[i] = under ? 0.f : over ? INFINITY : p * s;
  }
}

const char* elem(const TensorView& t, int64_t b, int64_t s, int64_t h) {
  return static_cast<const char*>(t.data) +
         (b * t.strides[0] + s * t.strides[1] + h * t.strides[2]) * int64_t(t.element_size());
}

void load_vec(const TensorView& t, int64_t b, int64_t s, int64_t h, int64_t n, float* dst) {
  const char* p = elem(t, b, s, h);
  if (t.dtype == DType::f32) {
    std::memcpy(dst, p, size_t(n) * sizeof(float));
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = load_as_f32(p, t.dtype, i);
  }
}

void store_vec(const TensorView& t, int64_t b, int64_t s, int64_t h, int64_t n, const float* src) {
  char* p = const_cast<char*>(elem(t, b, s, h));
  if (t.dtype == DType::f32) {
    std::memcpy(p, src, size_t(n) * sizeof(float));
  } else {
    for (int64_t i = 0; i < n; ++i) store_from_f32(p, t.dtype, i, src[i]);
  }
}

// x *= 1 / sqrt(sum(x^2) + 1e-6) * mul (SPEC 3, sum not mean), or x *= mul without the norm.
void normalize(float* x, int64_t n, bool l2, float mul) {
  double s = mul;
  if (l2) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
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
  float gate_a = 0.f;             // exp(A_log[h])
  const float* dt_bias = nullptr;  // K values of head h

  Loader(const KdaArgs& args, const KdaDims& dims, int64_t head) : a(args), d(dims), h(head) {
    if (a.gate) {
      const TensorView& al = a.gate->A_log;
      gate_a = std::exp(static_cast<const float*>(al.data)[h * al.strides[0]]);
      dt_bias = static_cast<const float*>(a.gate->dt_bias.data) + h * d.K;
    }
  }

  void load(int64_t b, int64_t t, int64_t n, float* q, float* k, float* v, float* g, float* beta) const {
    const int64_t K = d.K, V = d.V;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t s = t + r;
      float* qr = q + r * K;
      float* kr = k + r * K;
      float* gr = g + r * K;
      load_vec(a.q, b, s, h, K, qr);
      load_vec(a.k, b, s, h, K, kr);
      load_vec(a.v, b, s, h, V, v + r * V);
      load_vec(a.g, b, s, h, K, gr);
      normalize(qr, K, a.qk_l2norm_in_kernel, d.scale);
      if (a.qk_l2norm_in_kernel) normalize(kr, K, true, 1.f);
      if (a.gate) {
        const GateForm form = a.gate->form;
        const float lb = a.gate->lower_bound;
        for (int64_t i = 0; i < K; ++i) gr[i] = gate_value(form, gate_a, lb, gr[i] + dt_bias[i]);
      }
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
  const float* p = static_cast<const float*>(a.initial_state.data) + (n * d.H + h) * K * V;
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
  float* p = static_cast<float*>(a.final_state.data) + (n * d.H + h) * K * V;
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
  std::vector<float> S(static_cast<size_t>(K * V)), q(static_cast<size_t>(kLoadBlock * K)), k(static_cast<size_t>(kLoadBlock * K)),
      v(static_cast<size_t>(kLoadBlock * V)), g(static_cast<size_t>(kLoadBlock * K)), beta(static_cast<size_t>(kLoadBlock)), kS(static_cast<size_t>(V)),
      e(static_cast<size_t>(V)), o(static_cast<size_t>(V));
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

struct ChunkScratch {
  std::vector<float> S, q, k, v, g, beta, Qe, Ke, Kd, Akk, Aqk, Qr, Kr, Kl, U, O, x, w;
  std::vector<double> G;
  ChunkScratch(int64_t C, int64_t K, int64_t V)
      : S(static_cast<size_t>(K * V)), q(static_cast<size_t>(C * K)), k(static_cast<size_t>(C * K)), v(static_cast<size_t>(C * V)), g(static_cast<size_t>(C * K)), beta(static_cast<size_t>(C)),
        Qe(static_cast<size_t>(C * K)), Ke(static_cast<size_t>(C * K)), Kd(static_cast<size_t>(C * K)), Akk(static_cast<size_t>(C * C)), Aqk(static_cast<size_t>(C * C)),
        Qr(static_cast<size_t>(kSub * K)), Kr(static_cast<size_t>(kSub * K)), Kl(static_cast<size_t>(C * K)), U(static_cast<size_t>(C * V)), O(static_cast<size_t>(C * V)),
        x(static_cast<size_t>(C * K)), w(static_cast<size_t>(C * K)), G(static_cast<size_t>(C * K)) {}
};

// One (sequence, head) pair in chunks of C tokens (SPEC 5.1).
//
// The decay factor of a pair i >= j of one chunk is exp(G_i - G_j) with G the cumulative sum of g in
// fp64 (so that G_i - G_j keeps its digits when G is large). Every exponent is <= 0:
//   - pairs inside one sub-block of kSub rows: exp(G_i - G_j) formed per pair;
//   - pairs across sub-blocks (j < r <= i with r the first row of i's sub-block):
//     exp(G_i - G_j) = exp(G_i - G_r) * exp(G_r - G_j), two factors in (0, 1], so these blocks are
//     dense sgemm products (FLA's secondary chunking). Never exp(G_i) * exp(-G_j), which overflows.
void chunk_one(const KdaArgs& a, const KdaDims& d, int64_t C, int64_t n, int64_t h, ChunkScratch& s) {
  const int64_t K = d.K, V = d.V;
  const KdaSeq sq = d.seqs[size_t(n)];
  const Loader ld(a, d, h);
  float* S = s.S.data();
  load_state(a, d, n, h, S);
  for (int64_t c0 = 0; c0 < sq.len; c0 += C) {
    const int64_t m = std::min(C, sq.len - c0);
    const int iK = int(K), iV = int(V), iC = int(C), im = int(m);
    ld.load(sq.b, sq.t0 + c0, m, s.q.data(), s.k.data(), s.v.data(), s.g.data(), s.beta.data());
    const float *q = s.q.data(), *k = s.k.data();
    double* G = s.G.data();
    // G = cumsum(g) (fp64); Qe = q . exp(G), Ke = k . exp(G), Kd = k . exp(G_C - G)
    for (int64_t i = 0; i < K; ++i) G[i] = s.g[size_t(i)];
    for (int64_t r = 1; r < m; ++r)
      for (int64_t i = 0; i < K; ++i) G[r * K + i] = G[(r - 1) * K + i] + s.g[size_t(r * K + i)];
    const double* GC = G + (m - 1) * K;
    for (int64_t e = 0; e < m * K; ++e) s.x[size_t(e)] = float(G[e]);
    exp_array(s.x.data(), s.w.data(), m * K);
    for (int64_t e = 0; e < m * K; ++e) {
      s.Qe[size_t(e)] = q[e] * s.w[size_t(e)];
      s.Ke[size_t(e)] = k[e] * s.w[size_t(e)];
    }
    for (int64_t r = 0; r < m; ++r)
      for (int64_t i = 0; i < K; ++i) s.x[size_t(r * K + i)] = float(GC[i] - G[r * K + i]);
    exp_array(s.x.data(), s.w.data(), m * K);
    for (int64_t e = 0; e < m * K; ++e) s.Kd[size_t(e)] = k[e] * s.w[size_t(e)];

    // A_qk (i >= j) and A_kk (i > j, before the beta row scaling), C x C row-major, zero above.
    float *Aqk = s.Aqk.data(), *Akk = s.Akk.data();
    for (int64_t i = 0; i < m; ++i) {
      std::fill(Aqk + i * C, Aqk + i * C + m, 0.f);
      std::fill(Akk + i * C, Akk + i * C + m, 0.f);
    }
    for (int64_t i0 = 0; i0 < m; i0 += kSub) {
      const int64_t i1 = std::min(m, i0 + kSub), bi = i1 - i0;
      const double* Gr = G + i0 * K;
      if (i0 > 0) {
        // rows of the sub-block against all earlier rows, through the reference row r = i0
        for (int64_t r = 0; r < bi; ++r)
          for (int64_t i = 0; i < K; ++i) s.x[size_t(r * K + i)] = float(G[(i0 + r) * K + i] - Gr[i]);
        exp_array(s.x.data(), s.w.data(), bi * K);
        for (int64_t e = 0; e < bi * K; ++e) {
          s.Qr[size_t(e)] = q[i0 * K + e] * s.w[size_t(e)];
          s.Kr[size_t(e)] = k[i0 * K + e] * s.w[size_t(e)];
        }
        for (int64_t j = 0; j < i0; ++j)
          for (int64_t i = 0; i < K; ++i) s.x[size_t(j * K + i)] = float(Gr[i] - G[j * K + i]);
        exp_array(s.x.data(), s.w.data(), i0 * K);
        for (int64_t e = 0; e < i0 * K; ++e) s.Kl[size_t(e)] = k[e] * s.w[size_t(e)];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(bi), int(i0), iK, 1.f, s.Qr.data(), iK, s.Kl.data(), iK,
                    0.f, Aqk + i0 * C, iC);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(bi), int(i0), iK, 1.f, s.Kr.data(), iK, s.Kl.data(), iK,
                    0.f, Akk + i0 * C, iC);
      }
      // pairs inside the sub-block, per pair
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t nj = i - i0 + 1;
        for (int64_t j = i0; j <= i; ++j)
          for (int64_t c = 0; c < K; ++c) s.x[size_t((j - i0) * K + c)] = float(G[i * K + c] - G[j * K + c]);
        exp_array(s.x.data(), s.w.data(), nj * K);
        for (int64_t j = i0; j <= i; ++j) {
          const float* wj = s.w.data() + (j - i0) * K;
          const float *qi = q + i * K, *ki = k + i * K, *kj = k + j * K;
          float sqk = 0.f, skk = 0.f;
          for (int64_t c = 0; c < K; ++c) {
            const float kw = kj[c] * wj[c];
            sqk += qi[c] * kw;
            skk += ki[c] * kw;
          }
          Aqk[i * C + j] = sqk;
          if (j < i) Akk[i * C + j] = skk;
        }
      }
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < i; ++j) Akk[i * C + j] *= s.beta[size_t(i)];

    // U = (I + A_kk)^-1 Diag(beta) (V - Ke S): forward substitution (unit lower triangular solve)
    float *U = s.U.data(), *O = s.O.data();
    std::memcpy(U, s.v.data(), size_t(m * V) * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, im, iV, iK, -1.f, s.Ke.data(), iK, S, iV, 1.f, U, iV);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < V; ++j) U[r * V + j] *= s.beta[size_t(r)];
    cblas_strsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, im, iV, 1.f, Akk, iC, U, iV);
    // O = Qe S + A_qk U
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, im, iV, iK, 1.f, s.Qe.data(), iK, S, iV, 0.f, O, iV);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, im, iV, im, 1.f, Aqk, iC, U, iV, 1.f, O, iV);
    for (int64_t r = 0; r < m; ++r) store_vec(a.o, sq.b, sq.t0 + c0 + r, h, V, O + r * V);
    // S <- Diag(exp(G_C)) S + Kd^T U
    for (int64_t i = 0; i < K; ++i) s.x[size_t(i)] = float(GC[i]);
    exp_array(s.x.data(), s.w.data(), K);
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < V; ++j) S[i * V + j] *= s.w[size_t(i)];
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, iK, iV, im, 1.f, s.Kd.data(), iK, U, iV, 1.f, S, iV);
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
    std::vector<float> x(static_cast<size_t>(K));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t h = row % H;
      const float A = std::exp(al[h * als]);
      load_row(f, row, x.data());
      for (int64_t i = 0; i < K; ++i)
        x[size_t(i)] = gate_value(gate.form, A, gate.lower_bound, x[size_t(i)] + dt[h * K + i]);
      store_row(g, row, x.data());
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
  // NOTE: (sequence, head) pairs are independent, so threads take pairs and every BLAS call runs
  // single-threaded (the chunk products are small: C x K x V).
  const int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
#pragma omp parallel num_threads(threads(ctx))
  {
    ChunkScratch s(C, d.K, d.V);
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < pairs; ++p) chunk_one(args, d, C, p / d.H, p % d.H, s);
  }
  openblas_set_num_threads(blas_threads);
}

}  // namespace kimi::cpu
