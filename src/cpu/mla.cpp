// CPU gated MLA (SPEC 6). Prefill is the explicit form: k_nope and v for every token come from one
// projection (kimi::linear), then per (sequence, head, block of queries) causal attention with two
// sgemms and an fp32 max-subtracted softmax. Decode is the absorbed form: queries are folded into
// the latent space per head, each sequence's cache rows are read once for a group of heads, and the
// value projection is applied to the attention-weighted latent sum.
#include "cpu/mla.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/linear.h"
#include "cpu/tensor_io.h"
#include "kimi/ops/linear.h"

namespace kimi::cpu {

namespace {
constexpr int64_t kQueryBlock = 64;  // prefill queries per task

float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// load_row with a branch-free inner loop for bf16 (the decode cache is read through this).
void load_row_fast(const TensorView& t, int64_t row, float* dst) {
  if (t.dtype != DType::bf16) return load_row(t, row, dst);
  const uint16_t* s = reinterpret_cast<const uint16_t*>(row_ptr(t, row));
  const int64_t n = t.size(-1);
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_from_bits(uint32_t(s[i]) << 16);
}

// Row r of s (row length n, leading dimension ld): s[j] = softmax over j < valid, 0 beyond.
void softmax_row(float* s, int64_t valid, int64_t n) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < valid; ++j) mx = std::max(mx, s[j]);
  double sum = 0;
  for (int64_t j = 0; j < valid; ++j) {
    s[j] = std::exp(s[j] - mx);
    sum += s[j];
  }
  const float inv = float(1.0 / sum);
  for (int64_t j = 0; j < valid; ++j) s[j] *= inv;
  for (int64_t j = valid; j < n; ++j) s[j] = 0.f;
}

// o_h (Dv values) *= sigmoid(gate[row, h*Dv ..]) and stored to o row `orow`.
void gate_store(const TensorView& gate, int64_t grow, int64_t h, int64_t dv, float* oh, const TensorView& o, int64_t orow) {
  if (gate.present()) {
    const char* g = row_ptr(gate, grow);
    for (int64_t e = 0; e < dv; ++e) oh[e] *= sigmoid(load_as_f32(g, gate.dtype, h * dv + e));
  }
  store_row(o, orow, oh);
}

// Keeps OpenBLAS single-threaded inside our own OpenMP regions (as cpu/linear.cpp does).
struct BlasSingleThread {
  int saved = openblas_get_num_threads();
  BlasSingleThread() { openblas_set_num_threads(1); }
  ~BlasSingleThread() { openblas_set_num_threads(saved); }
};
}  // namespace

void mla_prefill(TensorView q, TensorView latent, TensorView k_pe, const Weight& w_kvb, TensorView gate,
                 const std::vector<int64_t>& cu, const MlaDims& d, TensorView o, const Context& ctx) {
  const int64_t B = q.size(0), T = q.size(1), M = B * T;
  const int64_t H = d.heads, R = d.kv_lora, P = d.qk_rope, Dn = d.qk_nope, Dv = d.v_dim;
  const int64_t Dk = Dn + P, Dkv = Dn + Dv;
  if (M == 0) return;
  struct Seg {
    int64_t m0, len;  // first token (flattened over B, T) and length
  };
  std::vector<Seg> segs;
  if (!cu.empty()) {
    for (size_t i = 0; i + 1 < cu.size(); ++i)
      if (cu[i + 1] > cu[i]) segs.push_back({cu[i], cu[i + 1] - cu[i]});
  } else {
    for (int64_t b = 0; b < B; ++b) segs.push_back({b * T, T});
  }
  const int nt = threads(ctx);

  // [k_nope | v] for every token and head: kv [M, H*(Dn+Dv)] = latent W_kvb^T.
  std::vector<float> kv(static_cast<size_t>(M * H * Dkv));
  {
    std::vector<float> lat(static_cast<size_t>(M * R));
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t m = 0; m < M; ++m) load_row(latent, m, lat.data() + m * R);
    // host scratch, labelled with the weight's host device (the model's tests run blocks on a second host
    // device, Device{cpu, 1}, and kimi::linear checks that its arguments share one device)
    const Device host = w_kvb.w.device;
    kimi::linear(TensorView(lat.data(), DType::f32, {M, R}, host), w_kvb,
                 TensorView(kv.data(), DType::f32, {M, H * Dkv}, host), 0.f, ctx);
  }
  // Per-head contiguous Q [H, M, Dk], K [H, M, Dk], V [H, M, Dv].
  std::vector<float> Q(static_cast<size_t>(H * M * Dk)), K(Q.size()), V(static_cast<size_t>(H * M * Dv));
#pragma omp parallel num_threads(nt)
  {
    std::vector<float> pe(static_cast<size_t>(P));
#pragma omp for schedule(static)
    for (int64_t m = 0; m < M; ++m) {
      load_row(k_pe, m, pe.data());
      const float* kvm = kv.data() + m * H * Dkv;
      for (int64_t h = 0; h < H; ++h) {
        load_row(q, m * H + h, Q.data() + (h * M + m) * Dk);
        float* k = K.data() + (h * M + m) * Dk;
        std::copy(kvm + h * Dkv, kvm + h * Dkv + Dn, k);
        std::copy(pe.begin(), pe.end(), k + Dn);
        std::copy(kvm + h * Dkv + Dn, kvm + (h + 1) * Dkv, V.data() + (h * M + m) * Dv);
      }
    }
  }
  kv = {};

  struct Task {
    int64_t m0, i0, nq, h;  // segment start, first query within it, queries, head
  };
  std::vector<Task> tasks;
  for (const Seg& s : segs)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i0 = 0; i0 < s.len; i0 += kQueryBlock) tasks.push_back({s.m0, i0, std::min(kQueryBlock, s.len - i0), h});
  // Longest (latest) blocks first for the dynamic schedule.
  std::stable_sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) { return a.i0 > b.i0; });

  BlasSingleThread single;
#pragma omp parallel num_threads(nt)
  {
    std::vector<float> S, O(static_cast<size_t>(kQueryBlock * Dv));
#pragma omp for schedule(dynamic, 1)
    for (size_t ti = 0; ti < tasks.size(); ++ti) {
      const Task& t = tasks[ti];
      const int64_t nk = t.i0 + t.nq;  // keys 0 .. nk-1 of the segment (causal)
      S.resize(static_cast<size_t>(t.nq * nk));
      const float* Qh = Q.data() + (t.h * M + t.m0 + t.i0) * Dk;
      const float* Kh = K.data() + (t.h * M + t.m0) * Dk;
      const float* Vh = V.data() + (t.h * M + t.m0) * Dv;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(t.nq), int(nk), int(Dk), d.scale, Qh, int(Dk), Kh, int(Dk),
                  0.f, S.data(), int(nk));
      for (int64_t i = 0; i < t.nq; ++i) softmax_row(S.data() + i * nk, t.i0 + i + 1, nk);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(t.nq), int(Dv), int(nk), 1.f, S.data(), int(nk), Vh,
                  int(Dv), 0.f, O.data(), int(Dv));
      for (int64_t i = 0; i < t.nq; ++i) {
        const int64_t m = t.m0 + t.i0 + i;
        gate_store(gate, m, t.h, Dv, O.data() + i * Dv, o, m * H + t.h);
      }
    }
  }
}

void mla_cache_write(TensorView latent, TensorView k_pe, TensorView cache, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& slots, const Context& ctx) {
  const int64_t N = latent.size(0), T = latent.size(1), R = latent.size(2), P = k_pe.size(2), L = cache.size(1);
  const int64_t rows = N * T;
  // A decode step appends a handful of rows: not worth waking threads for.
#pragma omp parallel num_threads(threads(ctx)) if (rows * (R + P) >= (int64_t(1) << 16))
  {
    std::vector<float> r(static_cast<size_t>(R + P));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t n = i / T, t = i % T;
      load_row(latent, i, r.data());
      load_row(k_pe, i, r.data() + R);
      store_row(cache, slots[size_t(n)] * L + start[size_t(n)] + t, r.data());
    }
  }
}

void mla_decode(TensorView q, TensorView cache, const std::vector<int64_t>& lens, const std::vector<int64_t>& slots,
                const Weight& w_kvb, TensorView gate, const MlaDims& d, TensorView o, const Context& ctx) {
  const int64_t N = q.size(0), L = cache.size(1);
  const int64_t H = d.heads, R = d.kv_lora, P = d.qk_rope, Dn = d.qk_nope, Dv = d.v_dim;
  const int64_t Dq = Dn + P, RP = R + P, Dkv = Dn + Dv;
  if (N == 0) return;
  const int nt = threads(ctx);
  BlasSingleThread single;

  // q as f32 [N, H, Dq]; absorbed queries QL [N, H, R+P] = [W_kvb_k[h]^T q_nope | q_pe].
  std::vector<float> qf(static_cast<size_t>(N * H * Dq)), QL(static_cast<size_t>(N * H * RP));
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < N * H; ++r) load_row(q, r, qf.data() + r * Dq);
#pragma omp parallel num_threads(nt)
  {
    std::vector<float> wk(static_cast<size_t>(Dn * R));
#pragma omp for schedule(dynamic, 1)
    for (int64_t h = 0; h < H; ++h) {
      weight_rows_f32(w_kvb, h * Dkv, h * Dkv + Dn, wk.data());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(N), int(R), int(Dn), 1.f, qf.data() + h * Dq,
                  int(H * Dq), wk.data(), int(R), 0.f, QL.data() + h * RP, int(H * RP));
      for (int64_t n = 0; n < N; ++n)
        std::copy_n(qf.data() + (n * H + h) * Dq + Dn, P, QL.data() + (n * H + h) * RP + R);
    }
  }

  // Attention over the cache: ACC [N, H, R] = sum_j a_j c_j. Tasks: (sequence, group of heads),
  // with enough groups per sequence to keep every thread busy when N is small.
  const int64_t groups = std::min<int64_t>(H, std::max<int64_t>(1, (nt + N - 1) / N));
  const int64_t hb = (H + groups - 1) / groups;
  std::vector<float> ACC(static_cast<size_t>(N * H * R));
  const bool direct = cache.dtype == DType::f32 && cache.stride(1) >= RP;
#pragma omp parallel num_threads(nt)
  {
    std::vector<float> C, S;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < N * groups; ++task) {
      const int64_t n = task / groups, h0 = (task % groups) * hb, h1 = std::min(H, h0 + hb);
      if (h0 >= h1) continue;
      const int64_t len = lens[size_t(n)], row0 = slots[size_t(n)] * L;
      const float* cp;
      int64_t ldc;
      if (direct) {
        cp = reinterpret_cast<const float*>(row_ptr(cache, row0));
        ldc = cache.stride(1);
      } else {
        C.resize(static_cast<size_t>(len * RP));
        for (int64_t j = 0; j < len; ++j) load_row_fast(cache, row0 + j, C.data() + j * RP);
        cp = C.data();
        ldc = RP;
      }
      const int64_t nh = h1 - h0;
      S.resize(static_cast<size_t>(nh * len));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(nh), int(len), int(RP), d.scale,
                  QL.data() + (n * H + h0) * RP, int(RP), cp, int(ldc), 0.f, S.data(), int(len));
      for (int64_t i = 0; i < nh; ++i) softmax_row(S.data() + i * len, len, len);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(nh), int(R), int(len), 1.f, S.data(), int(len), cp,
                  int(ldc), 0.f, ACC.data() + (n * H + h0) * R, int(R));
    }
  }

  // o_h = W_kvb_v[h] acc_h, gated.
#pragma omp parallel num_threads(nt)
  {
    std::vector<float> wv(static_cast<size_t>(Dv * R)), O(static_cast<size_t>(N * Dv));
#pragma omp for schedule(dynamic, 1)
    for (int64_t h = 0; h < H; ++h) {
      weight_rows_f32(w_kvb, h * Dkv + Dn, (h + 1) * Dkv, wv.data());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(N), int(Dv), int(R), 1.f, ACC.data() + h * R, int(H * R),
                  wv.data(), int(R), 0.f, O.data(), int(Dv));
      for (int64_t n = 0; n < N; ++n) gate_store(gate, n, h, Dv, O.data() + n * Dv, o, n * H + h);
    }
  }
}

}  // namespace kimi::cpu
