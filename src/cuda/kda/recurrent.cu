// Launcher of cuda::kda_recurrent_fwd (src/cuda/kda/kda.h): args (validated by the caller) -> Params
// -> pick the layout's kernel and tile shape -> launch on ctx.cuda_stream. Device code:
// src/cuda/kda/recurrent.cuh (the token loop and the staged one-token kernels) and recurrent_stream.cuh (the
// streaming one-token kernels).
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/index.cuh"
#include "cuda/kda/kda.h"
#include "cuda/kda/recurrent.cuh"
#include "cuda/kda/recurrent_stream.cuh"
#include "cuda/kernel_attrs.cuh"
#include "cuda/runtime.h"
#include "cuda/scratch.cuh"

namespace kimi::cuda {

namespace {
using namespace kda_detail;

// Element strides of dims 0, 1, 2 of a 4-D [B, T, H, X] view (or 3-D [B, T, H]).
void strides3(const TensorView& t, int64_t& s0, int64_t& s1, int64_t& s2) {
  s0 = t.strides[0];
  s1 = t.strides[1];
  s2 = t.strides[2];
}

// 16-byte state access is valid when the base is 16-byte aligned and every element offset of a
// 4-aligned slot is a multiple of 4: the row length (last dim) and all outer strides divisible by 4.
int state_vec(const TensorView& s, int64_t row_len) {
  const bool aligned = (reinterpret_cast<uintptr_t>(s.data) % 16) == 0;
  return aligned && row_len % 4 == 0 && s.strides[0] % 4 == 0 && s.strides[1] % 4 == 0 && s.strides[2] % 4 == 0;
}

template <class Kernel>
void launch(Kernel kernel, const Params& p, int64_t ctas, cudaStream_t s) {
  if (ctas > int64_t(0x7fffffff)) throw Error("cuda kda_recurrent_fwd: grid too large");
  kernel<<<dim3(unsigned(ctas)), dim3(kThreads), 0, s>>>(p);
}

// The streaming one-token path (recurrent_stream.cuh): one CTA of 512 threads per (sequence, head), the head's
// K V fp32 block through kBulkMaxBytes of dynamic shared memory. It needs every present state tensor to hold each
// head's block as whole contiguous 16-byte units at a 16-byte aligned address (state_vec, and rows adjacent: the row
// stride equal to the row length), the row length a multiple of 4 (also without states: the passes' 4-wide
// accesses), and K V <= 16384 (K = V = 128). The launcher takes it for grids of more heads than SMs: measured on the
// H200 (docs/gpu/2026-11-30-h200-run56.txt, K = V = 128, eager calls, streaming vs staged, kv / vk): 256 x 32
// 276 / 282 vs 380 / 371 us, 8 x 32 16.9 / 16.0 vs 17.7 / 19.2 us, 4 x 96 17.0 / 18.6 vs 20.2 / 21.8 us, but
// 1 x 96 11.9 / 12.5 vs 11.6 / 12.4 us and 1 x 32 12.5 / 11.7 vs 10.3 / 10.6 us: with one CTA per SM or fewer, the
// staged kernels' 4 - 8 CTAs per head shorten each head's chain. KdaLaunchOptions::one_token (tests, benchmarks)
// overrides the grid-size rule.
bool whole_blocks(const TensorView& st, int64_t row_len) {
  return !st.present() || (state_vec(st, row_len) && st.strides[2] == row_len);
}
bool use_stream(const KdaArgs& a, bool kv, int64_t N, int H, int K, int V, int sms, KdaOneTokenPath path) {
  const int64_t row_len = kv ? V : K;
  const bool fits = row_len % 4 == 0 && int64_t(K) * V * 4 <= kda_decode_detail::kBulkMaxBytes &&
                    whole_blocks(a.initial_state, row_len) && whole_blocks(a.final_state, row_len);
  if (!fits || path == KdaOneTokenPath::staged) return false;
  return path == KdaOneTokenPath::streaming || N * H > int64_t(sms);
}

template <auto kKernel>
void launch_stream(const Params& p, int64_t ctas, int dev, cudaStream_t s) {
  allow_dynamic_smem<kKernel>(dev, kda_decode_detail::kBulkMaxBytes);
  if (ctas > int64_t(0x7fffffff)) throw Error("cuda kda_recurrent_fwd: grid too large");
  kKernel<<<dim3(unsigned(ctas)), dim3(kda_decode_detail::kThreads), size_t(p.K) * p.V * 4, s>>>(p);
}
// The decode step's streaming tilings (decode_stream.cuh kv_stream_tiling / vk_stream_tiling).
void launch_one_token_stream(const Params& p, bool kv, int64_t ctas, int dev, cudaStream_t s) {
  using namespace kda_decode_detail;
  if (kv) {
    kv_stream_tiling(p.K, p.V, [&]<int CW, int KMAX>() {
      launch_stream<kda_recurrent_kv_stream_kernel<CW, KMAX>>(p, ctas, dev, s);
    });
  } else {
    vk_stream_tiling(p.K, [&]<int KG, int KC, int NV, int MIN_CTAS>() {
      launch_stream<kda_recurrent_vk_stream_kernel<KG, KC, NV, MIN_CTAS>>(p, ctas, dev, s);
    });
  }
}
}  // namespace

void kda_recurrent_fwd(const KdaArgs& a, const Context& ctx, const KdaLaunchOptions* options) {
  const KdaLaunchOptions& opt = kda_launch_options(options);
  const int64_t B = a.q.shape[0], T = a.q.shape[1];
  const int H = int(a.q.shape[2]), K = int(a.q.shape[3]), V = int(a.v.shape[3]);
  const bool varlen = a.cu_seqlens.present();
  const int64_t N = varlen ? a.cu_seqlens.shape[0] - 1 : B;
  if (N <= 0 || H <= 0) return;
  if (K < 1 || K > 256 || V < 1 || V > 256) throw Error("cuda kda_recurrent_fwd: K and V must be in [1, 256]");

  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const int dev = a.q.device.index;
  const DeviceGuard device_guard(dev);

  Params p{};
  p.q = a.q.data, p.k = a.k.data, p.v = a.v.data, p.g = a.g.data, p.beta = a.beta.data, p.o = a.o.data;
  p.tq = elem_type(a.q.dtype), p.tk = elem_type(a.k.dtype), p.tv = elem_type(a.v.dtype);
  p.tg = elem_type(a.g.dtype), p.tbeta = elem_type(a.beta.dtype), p.to = elem_type(a.o.dtype);
  strides3(a.q, p.q_b, p.q_t, p.q_h);
  strides3(a.k, p.k_b, p.k_t, p.k_h);
  strides3(a.v, p.v_b, p.v_t, p.v_h);
  strides3(a.g, p.g_b, p.g_t, p.g_h);
  strides3(a.beta, p.beta_b, p.beta_t, p.beta_h);
  strides3(a.o, p.o_b, p.o_t, p.o_h);

  p.gate = gate_none;
  if (a.gate) {
    const KdaGate& gt = *a.gate;
    p.gate = gt.form == GateForm::bounded ? gate_bounded : gate_softplus;
    p.A_log = static_cast<const float*>(gt.A_log.data);
    // [H] (any stride), else contiguous ([1,1,H,1] or a padded [>=H]): element h at h * A_s.
    p.A_s = gt.A_log.ndim == 1 ? gt.A_log.strides[0] : 1;
    p.dt_bias = static_cast<const float*>(gt.dt_bias.data);
    if (gt.dt_bias.ndim == 2) {  // [H, K]
      p.dtb_h = gt.dt_bias.strides[0];
      p.dtb_k = gt.dt_bias.strides[1];
    } else {  // [H*K]
      p.dtb_k = gt.dt_bias.ndim == 1 ? gt.dt_bias.strides[0] : 1;
      p.dtb_h = int64_t(K) * p.dtb_k;
    }
    p.lower_bound = gt.lower_bound;
  }
  p.beta_sigmoid = a.beta_sigmoid_in_kernel;
  p.l2norm = a.qk_l2norm_in_kernel;
  p.scale = a.scale ? *a.scale : float(1.0 / std::sqrt(double(K)));

  const bool kv = a.state_layout == StateLayout::kv;
  const int64_t row_len = kv ? V : K;  // the state's contiguous last dim
  if (a.initial_state.present()) {
    p.s_in = static_cast<const float*>(a.initial_state.data);
    p.si_n = a.initial_state.strides[0], p.si_h = a.initial_state.strides[1], p.si_r = a.initial_state.strides[2];
    p.si_vec = state_vec(a.initial_state, row_len);
  }
  if (a.final_state.present()) {
    p.s_out = static_cast<float*>(a.final_state.data);
    p.so_n = a.final_state.strides[0], p.so_h = a.final_state.strides[1], p.so_r = a.final_state.strides[2];
    p.so_vec = state_vec(a.final_state, row_len);
  }
  p.T = T;
  p.H = H, p.K = K, p.V = V;

  // Tile shape: BV = 32 columns per CTA, or 16 when that leaves fewer than two CTAs per SM.
  const int sms = sm_count(dev);
  const bool small = N * H * ((V + 31) / 32) < 2 * int64_t(sms);
  const int BV = small ? 16 : 32;
  p.n_tiles = (V + BV - 1) / BV;
  const int64_t ctas = N * H * p.n_tiles;

  // cu_seqlens and state_slots are host tensors: upload them as int64 ([N+1] offsets, then [N] rows).
  std::vector<int64_t> idx;
  if (varlen) idx = index_values(a.cu_seqlens);
  const size_t slots_at = idx.size();
  if (a.state_slots.present()) {
    const std::vector<int64_t> sl = index_values(a.state_slots);
    idx.insert(idx.end(), sl.begin(), sl.end());
  }
  if (ctas > int64_t(0x7fffffff)) throw Error("cuda kda_recurrent_fwd: grid too large");
  std::optional<Scratch> d_idx;
  if (!idx.empty()) {
    refuse_capture(s, "kda_recurrent_fwd with cu_seqlens or state_slots");
    d_idx.emplace(upload(idx, s));
    if (varlen) p.cu = d_idx->get<int64_t>();
    if (a.state_slots.present()) p.slots = d_idx->get<int64_t>() + slots_at;
  }

  if (!varlen && T == 1 && use_stream(a, kv, N, H, K, V, sms, opt.one_token)) {  // the streaming one-token kernels
    launch_one_token_stream(p, kv, N * H, dev, s);
    if (opt.record) ++opt.record->one_token_streaming;
  } else if (!varlen && T == 1) {  // the staged one-token kernels (recurrent.cuh), same tiles
    if (opt.record) ++opt.record->one_token_staged;
    if (kv) {
      if (!small) {
        if (K <= 64) launch(kda_decode_kv_staged_kernel<8, 4>, p, ctas, s);
        else if (K <= 128) launch(kda_decode_kv_staged_kernel<8, 8>, p, ctas, s);
        else launch(kda_decode_kv_staged_kernel<8, 16>, p, ctas, s);
      } else {
        if (K <= 64) launch(kda_decode_kv_staged_kernel<4, 2>, p, ctas, s);
        else if (K <= 128) launch(kda_decode_kv_staged_kernel<4, 4>, p, ctas, s);
        else launch(kda_decode_kv_staged_kernel<4, 8>, p, ctas, s);
      }
    } else {
      if (!small) {
        if (K <= 32) launch(kda_decode_vk_staged_kernel<8, 1, 2>, p, ctas, s);
        else if (K <= 64) launch(kda_decode_vk_staged_kernel<16, 1, 4>, p, ctas, s);
        else if (K <= 128) launch(kda_decode_vk_staged_kernel<32, 1, 8>, p, ctas, s);
        else launch(kda_decode_vk_staged_kernel<32, 2, 8>, p, ctas, s);
      } else {
        if (K <= 32) launch(kda_decode_vk_staged_kernel<8, 1, 1>, p, ctas, s);
        else if (K <= 64) launch(kda_decode_vk_staged_kernel<16, 1, 2>, p, ctas, s);
        else if (K <= 128) launch(kda_decode_vk_staged_kernel<32, 1, 4>, p, ctas, s);
        else launch(kda_decode_vk_staged_kernel<32, 2, 4>, p, ctas, s);
      }
    }
  } else if (kv) {
    // CG column groups of 4 (BV = 4 * CG), RG = 128 / CG row groups, NR = ceil(K / RG) rows each.
    if (!small) {  // CG = 8, RG = 16
      if (K <= 64) launch(kda_recurrent_kv_kernel<8, 4>, p, ctas, s);
      else if (K <= 128) launch(kda_recurrent_kv_kernel<8, 8>, p, ctas, s);
      else launch(kda_recurrent_kv_kernel<8, 16>, p, ctas, s);
    } else {  // CG = 4, RG = 32
      if (K <= 64) launch(kda_recurrent_kv_kernel<4, 2>, p, ctas, s);
      else if (K <= 128) launch(kda_recurrent_kv_kernel<4, 4>, p, ctas, s);
      else launch(kda_recurrent_kv_kernel<4, 8>, p, ctas, s);
    }
  } else {
    // KG lanes x 4 K per column (KC slots of 4*KG), VG = 128 / KG column groups, NV columns each (BV = VG*NV).
    if (!small) {
      if (K <= 32) launch(kda_recurrent_vk_kernel<8, 1, 2>, p, ctas, s);
      else if (K <= 64) launch(kda_recurrent_vk_kernel<16, 1, 4>, p, ctas, s);
      else if (K <= 128) launch(kda_recurrent_vk_kernel<32, 1, 8>, p, ctas, s);
      else launch(kda_recurrent_vk_kernel<32, 2, 8>, p, ctas, s);
    } else {
      if (K <= 32) launch(kda_recurrent_vk_kernel<8, 1, 1>, p, ctas, s);
      else if (K <= 64) launch(kda_recurrent_vk_kernel<16, 1, 2>, p, ctas, s);
      else if (K <= 128) launch(kda_recurrent_vk_kernel<32, 1, 4>, p, ctas, s);
      else launch(kda_recurrent_vk_kernel<32, 2, 4>, p, ctas, s);
    }
  }
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
