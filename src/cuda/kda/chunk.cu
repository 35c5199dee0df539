// Launcher of src/cuda/kda/chunk.h: resolve sequences, pick the V split and the diagonal-block path, launch.
//
// Heuristics:
//  - V split: one CTA per (sequence, head) keeps the whole 128 x 128 fp32 state (NV = 1). When that leaves
//    more than half the SMs idle (2 * N * H <= SM count), split V in two (NV = 2): twice the CTAs, each
//    recomputing the V-independent A_qk, A_kk and T of its head. Measured on the H200 (BENCH.md shapes, both
//    forced): the rule picks the faster variant on all six (split: 1x16384 H64 7.9 vs 9.0 ms, 1x65536 H8
//    30.2 vs 34.5 ms; no split: 8x4096 H32 4.5 vs 7.9 ms, 10x819 H64 2.4 vs 4.1 ms). -DKIMI_KDA_CHUNK_FORCE_SPLIT=0/1
//    overrides it for benchmarking.
//  - Diagonal 16 x 16 blocks of A_qk / A_kk on tensor cores only for the bounded gate with lower bound >= -5
//    (exp(-G) <= e^80 inside a 16-row block); the softplus gate and a given g take the per-pair fp32 path.
//  - chunk_size is ignored: the GPU always uses 64-row chunks (same math, different rounding only).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/kda/chunk.cuh"
#include "cuda/kda/chunk.h"
#include "kimi/error.h"

namespace kimi::cuda {

namespace {

static_assert(kda_chunk::kDtF32 == int(DType::f32) && kda_chunk::kDtBf16 == int(DType::bf16) &&
                  kda_chunk::kDtF16 == int(DType::f16),
              "dtype codes");

void strides3(const TensorView& t, int64_t (&s)[3]) {
  for (int d = 0; d < 3; ++d) s[d] = t.strides[d];
}

template <int D, int VT, bool kDiag>
void launch(const kda_chunk::Params& p, int64_t ctas, cudaStream_t s) {
  constexpr size_t bytes = kda_chunk::Smem<D, VT>::TOTAL;
  auto* kernel = kda_chunk::kda_chunk_kernel<D, VT, kDiag>;
  KIMI_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  kernel<<<dim3(unsigned(ctas)), dim3(kda_chunk::kThreads), bytes, s>>>(p);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

template <int D, int VT>
void launch_diag(const kda_chunk::Params& p, bool diag_mma, int64_t ctas, cudaStream_t s) {
  if (diag_mma)
    launch<D, VT, true>(p, ctas, s);
  else
    launch<D, VT, false>(p, ctas, s);
}

}  // namespace

void kda_chunk_fwd(const KdaArgs& a, int chunk_size, const Context& ctx) {
  (void)chunk_size;  // always 64 on the GPU (see chunk.h)
  const int64_t B = a.q.size(0), T = a.q.size(1), H = a.q.size(2), K = a.q.size(3), V = a.v.size(3);
  if (!(K == V && (K == 64 || K == 128)))
    throw Error("kda_chunk_fwd: CUDA backend supports K = V in {64, 128}; got K = " + std::to_string(K) +
                ", V = " + std::to_string(V));

  // sequences
  const bool varlen = a.cu_seqlens.present();
  std::vector<int64_t> cu;
  if (varlen) {
    const int64_t n1 = a.cu_seqlens.shape[0];
    const int64_t cs = a.cu_seqlens.strides[0];
    const size_t esz = a.cu_seqlens.element_size();
    std::vector<unsigned char> raw(size_t(n1 > 0 ? (n1 - 1) * cs + 1 : 0) * esz);
    if (a.cu_seqlens.device.type == DeviceType::cuda) {
      KIMI_CUDA_CHECK(cudaSetDevice(a.cu_seqlens.device.index));
      KIMI_CUDA_CHECK(cudaMemcpy(raw.data(), a.cu_seqlens.data, raw.size(), cudaMemcpyDeviceToHost));
    } else if (!raw.empty()) {
      std::copy_n(static_cast<const unsigned char*>(a.cu_seqlens.data), raw.size(), raw.data());
    }
    cu.resize(size_t(n1));
    for (int64_t i = 0; i < n1; ++i)
      cu[size_t(i)] = a.cu_seqlens.dtype == DType::i32 ? int64_t(reinterpret_cast<const int32_t*>(raw.data())[i * cs])
                                                       : reinterpret_cast<const int64_t*>(raw.data())[i * cs];
  }
  const int64_t N = varlen ? int64_t(cu.size()) - 1 : B;
  if (N <= 0 || H <= 0) return;

  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const int dev = a.q.device.index;
  KIMI_CUDA_CHECK(cudaSetDevice(dev));
  int sms = 132;
  KIMI_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));

  kda_chunk::Params p{};
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.g = a.g.data;
  p.beta = a.beta.data;
  p.o = a.o.data;
  p.dt_q = int(a.q.dtype);
  p.dt_k = int(a.k.dtype);
  p.dt_v = int(a.v.dtype);
  p.dt_g = int(a.g.dtype);
  p.dt_beta = int(a.beta.dtype);
  p.dt_o = int(a.o.dtype);
  strides3(a.q, p.s_q);
  strides3(a.k, p.s_k);
  strides3(a.v, p.s_v);
  strides3(a.g, p.s_g);
  strides3(a.beta, p.s_beta);
  strides3(a.o, p.s_o);
  p.gate = kda_chunk::kGateNone;
  bool diag_mma = false;
  if (a.gate) {
    p.gate = a.gate->form == GateForm::bounded ? kda_chunk::kGateBounded : kda_chunk::kGateSoftplus;
    p.A_log = static_cast<const float*>(a.gate->A_log.data);
    p.s_A = a.gate->A_log.strides[0];
    p.dt_bias = static_cast<const float*>(a.gate->dt_bias.data);
    p.lb = a.gate->lower_bound;
    diag_mma = a.gate->form == GateForm::bounded && a.gate->lower_bound >= -5.f;
  }
  p.beta_sigmoid = a.beta_sigmoid_in_kernel ? 1 : 0;
  p.l2norm = a.qk_l2norm_in_kernel ? 1 : 0;
  p.scale = a.scale ? *a.scale : float(1.0 / std::sqrt(double(K)));
  p.s0 = a.initial_state.present() ? static_cast<const float*>(a.initial_state.data) : nullptr;
  p.s1 = a.final_state.present() ? static_cast<float*>(a.final_state.data) : nullptr;
  p.vk = a.state_layout == StateLayout::vk ? 1 : 0;
  p.T = T;
  p.H = int(H);
  p.N = int(N);

  int64_t* d_cu = nullptr;
  if (varlen) {
    KIMI_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&d_cu), cu.size() * sizeof(int64_t), s));
    KIMI_CUDA_CHECK(cudaMemcpyAsync(d_cu, cu.data(), cu.size() * sizeof(int64_t), cudaMemcpyHostToDevice, s));
    p.cu = d_cu;
  }

  if (K == 128) {
#ifdef KIMI_KDA_CHUNK_FORCE_SPLIT  // benchmarking knob: 0 = never split V, 1 = always
    const bool split = KIMI_KDA_CHUNK_FORCE_SPLIT != 0;
    (void)sms;
#else
    const bool split = 2 * N * H <= int64_t(sms);
#endif
    if (split)
      launch_diag<128, 64>(p, diag_mma, N * H * 2, s);
    else
      launch_diag<128, 128>(p, diag_mma, N * H, s);
  } else {
    launch_diag<64, 64>(p, diag_mma, N * H, s);
  }

  if (d_cu) KIMI_CUDA_CHECK(cudaFreeAsync(d_cu, s));
}

}  // namespace kimi::cuda
