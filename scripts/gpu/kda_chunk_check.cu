// Standalone GPU check of kimi::cuda::kda_chunk_fwd vs a plain fp64 recurrence (SPEC 5), outside the CMake
// build and the test harness (written before the op was wired into src/ops). On the GPU machine, from the root:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I include -I src \
//        scripts/gpu/kda_chunk_check.cu src/cuda/kda/chunk.cu src/cuda/kda/options.cu -o /tmp/kda_chunk_check
//   /tmp/kda_chunk_check          # 14 cases: both gate forms + given g, D 64/128, V split or not, kv/vk,
//                                 # varlen with empty sequences, f32/f16/bf16, strided, T = 0 .. 3063
//   /tmp/kda_chunk_check big      # + T = 65536 (bounded and softplus)
//   /tmp/kda_chunk_check a b c    # timings of the BENCH.md shapes (direct launcher call)
// Prints the relative RMS error of o and of the final state; FAIL above 5e-3 or on NaN/Inf.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/kda/chunk.h"
#include "kimi/dtype.h"

using namespace kimi;

#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::printf("%s: %s line %d\n", #x, cudaGetErrorString(e_), __LINE__);     \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

struct HostT {
  DType dt;
  std::vector<int64_t> shape, strides;
  std::vector<uint8_t> bytes;
  int64_t nelem_alloc;
  double get(int64_t i) const { return load_as_f32(bytes.data(), dt, i); }
};

// Buffer [B,T,H,D] with a padded token stride (pad elements) when pad > 0.
HostT make(DType dt, int64_t B, int64_t T, int64_t H, int64_t D, int64_t pad, std::mt19937& rng, float lo, float hi) {
  HostT h;
  h.dt = dt;
  h.shape = {B, T, H, D};
  const int64_t sH = D, sT = H * D + pad, sB = T * sT;
  h.strides = {sB, sT, sH, 1};
  h.nelem_alloc = std::max<int64_t>(1, B * sB);
  h.bytes.assign(size_t(h.nelem_alloc) * dtype_size(dt), 0);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < h.nelem_alloc; ++i) store_from_f32(h.bytes.data(), dt, i, d(rng));
  return h;
}
HostT make3(DType dt, int64_t B, int64_t T, int64_t H, std::mt19937& rng, float lo, float hi) {
  HostT h;
  h.dt = dt;
  h.shape = {B, T, H};
  h.strides = {T * H, H, 1};
  h.nelem_alloc = std::max<int64_t>(1, B * T * H);
  h.bytes.assign(size_t(h.nelem_alloc) * dtype_size(dt), 0);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < h.nelem_alloc; ++i) store_from_f32(h.bytes.data(), dt, i, d(rng));
  return h;
}

TensorView to_dev(const HostT& h, void** keep) {
  void* p;
  CK(cudaMalloc(&p, h.bytes.size()));
  CK(cudaMemcpy(p, h.bytes.data(), h.bytes.size(), cudaMemcpyHostToDevice));
  *keep = p;
  TensorView v;
  v.data = p;
  v.dtype = h.dt;
  v.device = Device::cuda(0);
  v.ndim = int(h.shape.size());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = h.shape[d];
    v.strides[d] = h.strides[d];
  }
  return v;
}

struct Case {
  const char* name;
  int B, T, H, D;
  std::vector<int64_t> lens;  // varlen if non-empty (B = 1, T = sum)
  DType dt, dto;
  int gate;  // 0 none (g given), 1 bounded, 2 softplus
  float grange;
  bool vk, init, final_alias, l2, bsig;
  int pad;
};

void run(const Case& c) {
  std::mt19937 rng(1234);
  const bool varlen = !c.lens.empty();
  int64_t B = c.B, T = c.T;
  std::vector<int64_t> off;
  if (varlen) {
    B = 1;
    off.push_back(0);
    for (auto l : c.lens) off.push_back(off.back() + l);
    T = off.back();
  }
  const int64_t H = c.H, D = c.D, N = varlen ? int64_t(c.lens.size()) : B;
  HostT q = make(c.dt, B, T, H, D, c.pad, rng, -1, 1), k = make(c.dt, B, T, H, D, c.pad, rng, -1, 1);
  HostT v = make(c.dt, B, T, H, D, c.pad, rng, -1, 1);
  HostT g = c.gate ? make(c.dt, B, T, H, D, 0, rng, -c.grange, c.grange) : make(c.dt, B, T, H, D, 0, rng, -c.grange, 0);
  HostT beta = c.bsig ? make3(c.dt, B, T, H, rng, -4, 4) : make3(c.dt, B, T, H, rng, 0, 1);
  HostT o = make(c.dto, B, T, H, D, c.pad, rng, 0, 0);
  if (!c.l2) {  // keep magnitudes sane without the norm
    std::uniform_real_distribution<float> d(-1, 1);
    for (int64_t i = 0; i < q.nelem_alloc; ++i) store_from_f32(q.bytes.data(), c.dt, i, d(rng) * 0.09f);
    for (int64_t i = 0; i < k.nelem_alloc; ++i) store_from_f32(k.bytes.data(), c.dt, i, d(rng) * 0.09f);
  }
  std::uniform_real_distribution<float> du(-1, 1);
  std::vector<float> A_log(static_cast<size_t>(H)), dtb(static_cast<size_t>(H * D));
  for (auto& x : A_log) x = du(rng) * 1.5f - 0.5f;
  for (auto& x : dtb) x = du(rng) * c.grange;
  const size_t ns = size_t(N * H * D * D);
  std::vector<float> s0(ns);
  for (auto& x : s0) x = c.init ? du(rng) * 0.1f : 0.f;

  // fp64 reference
  std::vector<double> oref(size_t(B * T * H * D), 0.0), sref(ns);
  const double scale = 1.0 / std::sqrt(double(D));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> S(static_cast<size_t>(D * D));  // [k][v]
      for (int64_t i = 0; i < D; ++i)
        for (int64_t j = 0; j < D; ++j) {
          const size_t si = size_t(((n * H + h) * D) * D) + (c.vk ? size_t(j * D + i) : size_t(i * D + j));
          S[size_t(i * D + j)] = s0[si];
        }
      const int64_t bb = varlen ? 0 : n, bos = varlen ? off[size_t(n)] : 0, len = varlen ? c.lens[size_t(n)] : T;
      const size_t Dz = static_cast<size_t>(D);
      std::vector<double> qq(Dz), kk(Dz), vv(Dz), gg(Dz), e(Dz);
      for (int64_t t = bos; t < bos + len; ++t) {
        auto idx = [&](const HostT& x, int64_t d) { return bb * x.strides[0] + t * x.strides[1] + h * x.strides[2] + d; };
        double sq = 0, sk = 0;
        for (int64_t d = 0; d < D; ++d) {
          qq[size_t(d)] = q.get(idx(q, d));
          kk[size_t(d)] = k.get(idx(k, d));
          vv[size_t(d)] = v.get(idx(v, d));
          const double f = g.get(idx(g, d));
          if (c.gate == 0) gg[size_t(d)] = f;
          else {
            const double a = std::exp(double(A_log[size_t(h)])), x = f + dtb[size_t(h * D + d)];
            gg[size_t(d)] = c.gate == 1 ? -5.0 / (1.0 + std::exp(-a * x)) : -a * (x > 20 ? x : std::log1p(std::exp(x)));
          }
          sq += qq[size_t(d)] * qq[size_t(d)];
          sk += kk[size_t(d)] * kk[size_t(d)];
        }
        const double mq = c.l2 ? scale / std::sqrt(sq + 1e-6) : scale, mk = c.l2 ? 1 / std::sqrt(sk + 1e-6) : 1.0;
        for (int64_t d = 0; d < D; ++d) {
          qq[size_t(d)] *= mq;
          kk[size_t(d)] *= mk;
        }
        double b = beta.get(bb * beta.strides[0] + t * beta.strides[1] + h);
        if (c.bsig) b = 1 / (1 + std::exp(-b));
        for (int64_t i = 0; i < D; ++i) {
          const double al = std::exp(gg[size_t(i)]);
          for (int64_t j = 0; j < D; ++j) S[size_t(i * D + j)] *= al;
        }
        for (int64_t j = 0; j < D; ++j) {
          double s = 0;
          for (int64_t i = 0; i < D; ++i) s += S[size_t(i * D + j)] * kk[size_t(i)];
          e[size_t(j)] = vv[size_t(j)] - s;
        }
        for (int64_t i = 0; i < D; ++i)
          for (int64_t j = 0; j < D; ++j) S[size_t(i * D + j)] += b * kk[size_t(i)] * e[size_t(j)];
        for (int64_t j = 0; j < D; ++j) {
          double s = 0;
          for (int64_t i = 0; i < D; ++i) s += S[size_t(i * D + j)] * qq[size_t(i)];
          oref[size_t(((bb * T + t) * H + h) * D + j)] = s;
        }
      }
      for (int64_t i = 0; i < D; ++i)
        for (int64_t j = 0; j < D; ++j) {
          const size_t si = size_t(((n * H + h) * D) * D) + (c.vk ? size_t(j * D + i) : size_t(i * D + j));
          sref[si] = S[size_t(i * D + j)];
        }
    }

  // GPU
  std::vector<void*> keep(12, nullptr);
  KdaArgs a;
  a.q = to_dev(q, &keep[0]);
  a.k = to_dev(k, &keep[1]);
  a.v = to_dev(v, &keep[2]);
  a.g = to_dev(g, &keep[3]);
  a.beta = to_dev(beta, &keep[4]);
  a.o = to_dev(o, &keep[5]);
  float *dA, *dD, *dS0, *dS1;
  CK(cudaMalloc(&dA, A_log.size() * 4));
  CK(cudaMalloc(&dD, dtb.size() * 4));
  CK(cudaMalloc(&dS0, ns * 4));
  CK(cudaMalloc(&dS1, ns * 4));
  CK(cudaMemcpy(dA, A_log.data(), A_log.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dD, dtb.data(), dtb.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dS0, s0.data(), ns * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(dS1, 0xff, ns * 4));
  auto f32view = [](float* p, std::vector<int64_t> shape) {
    TensorView t;
    t.data = p;
    t.dtype = DType::f32;
    t.device = Device::cuda(0);
    t.ndim = int(shape.size());
    int64_t s = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      t.shape[d] = shape[size_t(d)];
      t.strides[d] = s;
      s *= shape[size_t(d)];
    }
    return t;
  };
  if (c.gate) {
    KdaGate gt;
    gt.form = c.gate == 1 ? GateForm::bounded : GateForm::softplus;
    gt.A_log = f32view(dA, {H});
    gt.dt_bias = f32view(dD, {H * D});
    gt.lower_bound = -5.f;
    a.gate = gt;
  }
  a.beta_sigmoid_in_kernel = c.bsig;
  a.qk_l2norm_in_kernel = c.l2;
  a.state_layout = c.vk ? StateLayout::vk : StateLayout::kv;
  if (c.init) a.initial_state = f32view(dS0, {N, H, D, D});
  a.final_state = f32view(c.final_alias && c.init ? dS0 : dS1, {N, H, D, D});
  std::vector<int32_t> cu32(off.begin(), off.end());
  if (varlen) {
    TensorView t;
    t.data = cu32.data();
    t.dtype = DType::i32;
    t.ndim = 1;
    t.shape[0] = int64_t(cu32.size());
    t.strides[0] = 1;
    a.cu_seqlens = t;
  }
  try {
    kimi::cuda::kda_chunk_fwd(a, 64, Context{});
  } catch (const std::exception& ex) {
    std::printf("%-34s EXCEPTION %s\n", c.name, ex.what());
    return;
  }
  CK(cudaDeviceSynchronize());
  std::vector<uint8_t> ob(o.bytes.size());
  CK(cudaMemcpy(ob.data(), a.o.data, ob.size(), cudaMemcpyDeviceToHost));
  std::vector<float> s1(ns);
  CK(cudaMemcpy(s1.data(), a.final_state.data, ns * 4, cudaMemcpyDeviceToHost));
  double eo = 0, no = 0, es = 0, nss = 0;
  bool bad = false;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t bb = varlen ? 0 : n, bos = varlen ? off[size_t(n)] : 0, len = varlen ? c.lens[size_t(n)] : T;
    for (int64_t t = bos; t < bos + len; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const double x = load_as_f32(ob.data(), c.dto, bb * o.strides[0] + t * o.strides[1] + h * o.strides[2] + d);
          const double r = oref[size_t(((bb * T + t) * H + h) * D + d)];
          if (!std::isfinite(x)) bad = true;
          eo += (x - r) * (x - r);
          no += r * r;
        }
  }
  for (size_t i = 0; i < ns; ++i) {
    if (!std::isfinite(s1[i])) bad = true;
    es += (s1[i] - sref[i]) * (s1[i] - sref[i]);
    nss += sref[i] * sref[i];
  }
  const double ro = std::sqrt(eo / std::max(no, 1e-300)), rs = std::sqrt(es / std::max(nss, 1e-300));
  std::printf("%-34s o rel %.3e  state rel %.3e %s%s\n", c.name, ro, rs, bad ? " NONFINITE" : "",
              (ro > 5e-3 || rs > 5e-3 || bad) ? "  FAIL" : "");
  for (void* p : keep) cudaFree(p);
  cudaFree(dA);
  cudaFree(dD);
  cudaFree(dS0);
  cudaFree(dS1);
}

void bench(int nseq, int64_t Tper, int H, bool varlen) {
  const int64_t D = 128, T = nseq * Tper, N = nseq;
  const int64_t B = varlen ? 1 : nseq, TT = varlen ? T : Tper;
  const size_t nqk = size_t(T * H * D);
  void *q, *k, *v, *g, *b, *o, *A, *dt, *st;
  CK(cudaMalloc(&q, nqk * 2)); CK(cudaMalloc(&k, nqk * 2)); CK(cudaMalloc(&v, nqk * 2)); CK(cudaMalloc(&g, nqk * 2));
  CK(cudaMalloc(&o, nqk * 2)); CK(cudaMalloc(&b, size_t(T * H) * 2)); CK(cudaMalloc(&A, size_t(H) * 4));
  CK(cudaMalloc(&dt, size_t(H * D) * 4)); CK(cudaMalloc(&st, size_t(N * H * D * D) * 4));
  CK(cudaMemset(q, 0x3c, nqk * 2)); CK(cudaMemset(k, 0x3c, nqk * 2)); CK(cudaMemset(v, 0x3c, nqk * 2));
  CK(cudaMemset(g, 0x3c, nqk * 2)); CK(cudaMemset(b, 0x3c, size_t(T * H) * 2)); CK(cudaMemset(A, 0, size_t(H) * 4));
  CK(cudaMemset(dt, 0, size_t(H * D) * 4)); CK(cudaMemset(st, 0, size_t(N * H * D * D) * 4));
  auto view = [](void* p, DType dt, std::vector<int64_t> shape) {
    TensorView t; t.data = p; t.dtype = dt; t.device = Device::cuda(0); t.ndim = int(shape.size());
    int64_t s = 1;
    for (int d = t.ndim - 1; d >= 0; --d) { t.shape[d] = shape[size_t(d)]; t.strides[d] = s; s *= shape[size_t(d)]; }
    return t;
  };
  KdaArgs a;
  a.q = view(q, DType::bf16, {B, TT, H, D}); a.k = view(k, DType::bf16, {B, TT, H, D});
  a.v = view(v, DType::bf16, {B, TT, H, D}); a.g = view(g, DType::bf16, {B, TT, H, D});
  a.o = view(o, DType::bf16, {B, TT, H, D}); a.beta = view(b, DType::bf16, {B, TT, H});
  a.gate = KdaGate{GateForm::bounded, view(A, DType::f32, {H}), view(dt, DType::f32, {H * D}), -5.f};
  a.beta_sigmoid_in_kernel = true; a.qk_l2norm_in_kernel = true; a.state_layout = StateLayout::vk;
  a.initial_state = view(st, DType::f32, {N, H, D, D}); a.final_state = a.initial_state;
  std::vector<int32_t> cu;
  for (int i = 0; i <= nseq; ++i) cu.push_back(int32_t(i * Tper));
  if (varlen) { TensorView t; t.data = cu.data(); t.dtype = DType::i32; t.ndim = 1; t.shape[0] = nseq + 1; t.strides[0] = 1; a.cu_seqlens = t; }
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (int i = 0; i < 5; ++i) kimi::cuda::kda_chunk_fwd(a, 64, Context{});
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CK(cudaEventRecord(e0)); kimi::cuda::kda_chunk_fwd(a, 64, Context{}); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
    float t; CK(cudaEventElapsedTime(&t, e0, e1)); ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  std::printf("bench %d x %lld H=%d %s: %.3f ms\n", nseq, (long long)Tper, H, varlen ? "varlen" : "", ms[ms.size() / 2]);
  cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(g); cudaFree(o); cudaFree(b); cudaFree(A); cudaFree(dt); cudaFree(st);
}

int main(int argc, char**) {
  if (argc > 3) {
    bench(1, 16384, 64, false); bench(1, 8192, 64, false); bench(1, 65536, 32, false);
    bench(8, 4096, 32, true); bench(1, 65536, 8, false); bench(10, 819, 64, true);
    return 0;
  }
  const bool big = argc > 1;
  const DType bf = DType::bf16, f32 = DType::f32, f16 = DType::f16;
  std::vector<Case> cs = {
      {"bounded T=1 H=2", 1, 1, 2, 128, {}, bf, bf, 1, 8, true, true, false, true, true, 0},
      {"bounded T=17 H=2 D128", 1, 17, 2, 128, {}, bf, bf, 1, 8, true, true, false, true, true, 0},
      {"bounded T=1300 H=4 vk split", 1, 1300, 4, 128, {}, bf, bf, 1, 8, true, true, true, true, true, 0},
      {"bounded T=300 H=80 kv nosplit", 1, 300, 80, 128, {}, bf, bf, 1, 8, false, true, false, true, true, 0},
      {"softplus T=1300 H=4 g+-8", 1, 1300, 4, 128, {}, bf, bf, 2, 8, true, true, false, true, true, 0},
      {"softplus T=700 H=80 nosplit", 1, 700, 80, 128, {}, bf, bf, 2, 8, true, true, false, true, true, 0},
      {"given g T=500 H=3", 1, 500, 3, 128, {}, bf, f32, 0, 1, false, true, false, true, false, 0},
      {"bounded D=64 T=999 H=3", 2, 999, 3, 64, {}, bf, bf, 1, 8, true, true, false, true, true, 0},
      {"softplus D=64 T=130 H=3", 2, 130, 3, 64, {}, bf, bf, 2, 8, false, false, false, true, true, 0},
      {"varlen bounded H=4", 1, 0, 4, 128, {1300, 547, 2048, 0, 963, 271, 3063}, bf, bf, 1, 8, true, true, false, true, true, 0},
      {"varlen softplus H=2 noinit", 1, 0, 2, 128, {65, 64, 63, 1, 0, 200}, bf, bf, 2, 8, false, false, false, true, true, 0},
      {"f32 bounded strided T=333", 2, 333, 3, 128, {}, f32, f32, 1, 8, true, true, false, true, true, 24},
      {"f16 softplus nol2 T=257", 1, 257, 2, 128, {}, f16, f16, 2, 3, true, true, false, false, true, 0},
      {"bounded T=0", 2, 0, 2, 128, {}, bf, bf, 1, 8, true, true, false, true, true, 0},
  };
  if (argc > 2) {
    cs.clear();
    cs.push_back({"bounded T=1 H=2 o f32", 1, 1, 2, 128, {}, bf, f32, 1, 8, true, true, false, true, true, 0});
    cs.push_back({"bounded T=1300 H=4 o f32", 1, 1300, 4, 128, {}, bf, f32, 1, 8, true, true, true, true, true, 0});
    cs.push_back({"softplus T=1300 H=4 o f32", 1, 1300, 4, 128, {}, bf, f32, 2, 8, true, true, true, true, true, 0});
    cs.push_back({"f32 bounded T=1300 H=4 o f32", 1, 1300, 4, 128, {}, f32, f32, 1, 8, true, true, true, true, true, 0});
  }
  if (big) {
    cs.push_back({"bounded T=65536 H=2", 1, 65536, 2, 128, {}, bf, bf, 1, 8, true, true, true, true, true, 0});
    cs.push_back({"softplus T=65536 H=2", 1, 65536, 2, 128, {}, bf, bf, 2, 8, true, true, true, true, true, 0});
  }
  for (const auto& c : cs) run(c);
  return 0;
}
