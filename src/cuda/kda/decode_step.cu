// Launcher of cuda::kda_decode_step (src/cuda/kda/kda.h): args (validated by the caller) -> DecodeParams
// -> the layout's kernel for the head dims -> one launch on ctx.cuda_stream. Device code and the math:
// src/cuda/kda/decode_step.cuh.
//
// Slots reach the kernel without a per-call allocation: absent (row n), host values (validated by the caller)
// by value in the parameter struct up to kInlineSlots sequences, or a CUDA tensor read by the kernel; so the
// call is capturable in a CUDA graph. Only host slots of more than kInlineSlots sequences are uploaded
// (stream-ordered scratch, refused inside capture).
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/kda/decode_step.cuh"
#include "cuda/kda/kda.h"
#include "cuda/kernel_attrs.cuh"
#include "cuda/runtime.h"
#include "cuda/scratch.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda {

namespace {
using namespace kda_decode_detail;

Act act(const TensorView& t) {
  if (!t.present()) return {nullptr, 0, 0};
  return {t.data, t.strides[0], elem_type(t.dtype)};
}

ConvPool conv_pool(const TensorView& w, const TensorView& cache) {
  ConvPool c{};
  c.w = w.data, c.w_c = w.strides[0], c.w_j = w.strides[w.ndim - 1], c.tw = elem_type(w.dtype);
  if (cache.present()) {
    c.cache = cache.data, c.c_s = cache.strides[0], c.c_c = cache.strides[1], c.c_j = cache.strides[2];
    c.tc = elem_type(cache.dtype);
  }
  return c;
}

// One launch of kKernel; smem > 0: the bulk path's dynamic shared memory (the head's state block), allowed once
// per device (kernel_attrs.cuh).
template <auto kKernel>
void launch(const DecodeParams& p, int64_t ctas, int smem, int dev, cudaStream_t s) {
  if (smem > 0) allow_dynamic_smem<kKernel>(dev, kBulkMaxBytes);
  programmatic_launch(kKernel, dim3(unsigned(ctas)), dim3(kThreads), size_t(smem), s, p);
}

// kv: CG column groups of 4 (BV = 4 CG), RG = 512 / CG row groups, NR >= K / RG rows each.
void launch_kv(const DecodeParams& p, int64_t ctas, int smem, int dev, cudaStream_t s) {
  const int K = p.K;
  if (p.V <= 64) {  // CG = 16, RG = 32
    if (K <= 64) launch<kda_decode_step_kv_kernel<16, 2, 2>>(p, ctas, smem, dev, s);
    else if (K <= 128) launch<kda_decode_step_kv_kernel<16, 4, 2>>(p, ctas, smem, dev, s);
    else launch<kda_decode_step_kv_kernel<16, 8, 2>>(p, ctas, smem, dev, s);
  } else {  // CG = 32, RG = 16: a warp reads 512 contiguous bytes of a row
    if (K <= 64) launch<kda_decode_step_kv_kernel<32, 4, 2>>(p, ctas, smem, dev, s);
    else if (K <= 128) launch<kda_decode_step_kv_kernel<32, 8, 2>>(p, ctas, smem, dev, s);
    else launch<kda_decode_step_kv_kernel<32, 16, 1>>(p, ctas, smem, dev, s);
  }
}

// vk: KG lanes x 4 K per column (KC slots of 4 KG), VG = 512 / KG column groups, NV columns each.
void launch_vk(const DecodeParams& p, int64_t ctas, int smem, int dev, cudaStream_t s) {
  const int K = p.K;
  if (K <= 32) launch<kda_decode_step_vk_kernel<8, 1, 4, 2>>(p, ctas, smem, dev, s);          // BV = 256
  else if (K <= 64) launch<kda_decode_step_vk_kernel<16, 1, 8, 2>>(p, ctas, smem, dev, s);    // BV = 256
  else if (K <= 128) launch<kda_decode_step_vk_kernel<32, 1, 8, 2>>(p, ctas, smem, dev, s);   // BV = 128
  else launch<kda_decode_step_vk_kernel<32, 2, 8, 1>>(p, ctas, smem, dev, s);                 // BV = 128
}

// The streaming bulk kernels (decode_step.cuh), tiled as decode_stream.cuh kv_stream_tiling / vk_stream_tiling say.
template <int WM>
void launch_kv_stream_w(const DecodeParams& p, int64_t ctas, int smem, int dev, cudaStream_t s) {
  kv_stream_tiling(p.K, p.V, [&]<int CW, int KMAX>() {
    launch<kda_decode_step_kv_bulk_kernel<CW, KMAX, WM>>(p, ctas, smem, dev, s);
  });
}
template <int WM>
void launch_vk_stream_w(const DecodeParams& p, int64_t ctas, int smem, int dev, cudaStream_t s) {
  vk_stream_tiling(p.K, [&]<int KG, int KC, int NV, int MIN_CTAS>() {
    launch<kda_decode_step_vk_bulk_kernel<KG, KC, NV, MIN_CTAS, WM>>(p, ctas, smem, dev, s);
  });
}
void launch_kv_stream(const DecodeParams& p, int64_t ctas, int smem, int dev, cudaStream_t s) {
  if (p.W <= 4) launch_kv_stream_w<4>(p, ctas, smem, dev, s);
  else launch_kv_stream_w<kConvMaxWidth>(p, ctas, smem, dev, s);
}
void launch_vk_stream(const DecodeParams& p, int64_t ctas, int smem, int dev, cudaStream_t s) {
  if (p.W <= 4) launch_vk_stream_w<4>(p, ctas, smem, dev, s);
  else launch_vk_stream_w<kConvMaxWidth>(p, ctas, smem, dev, s);
}

// The bulk path (decode_step.cuh) needs the head's K V fp32 block to be whole 16-byte units at a 16-byte aligned
// address, its shared copy's 16-byte accesses aligned, and the block to fit kBulkMaxBytes: the pool 16-byte
// aligned and the row length (V for kv, K for vk) a multiple of 4 (p.state_vec: then every head block, at
// (s H + h) K V floats from the pool, is aligned and K V is a multiple of 4), and K V <= 16384 (K = V = 128).
// Otherwise the register path. The bulk path runs the streaming kernels (3 CTAs per SM; for kv the sums over K
// in another fp32 order than the register kernel, the per-element operations the same).
// Measured on the H200 (docs/gpu/2026-11-30-h200-run10.txt, K = V = 128, time per step in a 20-step graph):
// bulk against registers kv 131.5 vs 143.8 us (32 x 96), 329.8 vs 374.3 us (256 x 32), but 10.2 vs 8.4 us at
// 1 x 96; vk 119.8 vs 146.3, 310.2 vs 376.1, 8.5 vs 8.8 us. So kv keeps the register kernel while its grid fits
// one wave of one CTA per SM (ctas <= sms: each CTA's latency chain is the time, and the streaming kv kernel's
// two passes over shared memory lengthen it); vk takes the bulk path whenever it can. KdaLaunchOptions::decode
// (tests, benchmarks) overrides the grid-size rule.
bool use_bulk(const DecodeParams& p, bool kv, int64_t ctas, int sms, KdaDecodePath path) {
  if (path == KdaDecodePath::registers || (path == KdaDecodePath::automatic && kv && ctas <= sms)) return false;
  return p.state_vec && int64_t(p.K) * p.V * 4 <= kBulkMaxBytes;
}
}  // namespace

void kda_decode_step(const KdaDecodeArgs& a, const std::vector<int64_t>& host_rows, const Context& ctx,
                     const KdaLaunchOptions* options) {
  const KdaLaunchOptions& opt = kda_launch_options(options);
  const int64_t N = a.x_q.shape[0], H = a.b.shape[1];
  const int64_t K = a.x_q.shape[1] / H, V = a.x_v.shape[1] / H, S = a.state.shape[0];
  if (N == 0) return;
  if (K < 1 || K > kMaxV || V < 1 || V > kMaxV) throw Error("cuda kda_decode_step: K and V must be in [1, 256]");
  const int64_t ctas = N * H;
  if (ctas > int64_t(std::numeric_limits<int>::max())) throw Error("cuda kda_decode_step: grid N * H too large");

  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const int dev = a.x_q.device.index;
  const DeviceGuard device_guard(dev);

  DecodeParams p{};
  p.xq = act(a.x_q), p.xk = act(a.x_k), p.xv = act(a.x_v), p.f = act(a.f), p.b = act(a.b), p.z = act(a.z);
  p.y = a.y.data, p.y_n = a.y.strides[0], p.ty = elem_type(a.y.dtype);
  p.cq = conv_pool(a.conv_q, a.cache_q), p.ck = conv_pool(a.conv_k, a.cache_k), p.cv = conv_pool(a.conv_v, a.cache_v);
  p.W = int(a.conv_q.shape[a.conv_q.ndim - 1]);
  p.gate = a.gate.form == GateForm::bounded ? gate_bounded : gate_softplus;
  p.A_log = static_cast<const float*>(a.gate.A_log.data), p.A_s = a.gate.A_log.strides[0];
  p.dt_bias = static_cast<const float*>(a.gate.dt_bias.data);  // contiguous [H*K] or [H, K]
  p.lower_bound = a.gate.lower_bound;
  p.scale = a.scale ? *a.scale : float(1.0 / std::sqrt(double(K)));
  p.norm_eps = a.norm_eps;
  p.o_norm = a.o_norm.data, p.t_on = elem_type(a.o_norm.dtype);
  const bool kv = a.state_layout == StateLayout::kv;
  p.state = static_cast<float*>(a.state.data);
  p.state_vec = reinterpret_cast<uintptr_t>(a.state.data) % 16 == 0 && (kv ? V : K) % 4 == 0;
  p.S = S, p.H = int(H), p.K = int(K), p.V = int(V);

  std::optional<Scratch> uploaded;
  if (a.slots.present() && a.slots.device.type == DeviceType::cuda) {
    p.slot_mode = slots_device;
    p.dslots = a.slots.data, p.dslots_stride = a.slots.strides[0], p.dslots_i64 = a.slots.dtype == DType::i64;
  } else if (!a.slots.present()) {
    p.slot_mode = slots_identity;
  } else if (N <= kInlineSlots && S <= int64_t(std::numeric_limits<int32_t>::max())) {
    p.slot_mode = slots_inline;
    for (int64_t n = 0; n < N; ++n) p.islots[n] = int32_t(host_rows[size_t(n)]);
  } else {
    refuse_capture(s, "kda_decode_step with more than 256 host slots (pass 'slots' as a CUDA tensor to capture it)");
    uploaded.emplace(upload(host_rows, s));
    p.slot_mode = slots_device;
    p.dslots = uploaded->get<int64_t>(), p.dslots_stride = 1, p.dslots_i64 = 1;
  }

  const bool bulk = use_bulk(p, kv, ctas, sm_count(dev), opt.decode);
  if (opt.record) ++(bulk ? opt.record->decode_bulk : opt.record->decode_registers);
  const int smem = bulk ? int(K * V * 4) : 0;
  if (kv) bulk ? launch_kv_stream(p, ctas, smem, dev, s) : launch_kv(p, ctas, smem, dev, s);
  else bulk ? launch_vk_stream(p, ctas, smem, dev, s) : launch_vk(p, ctas, smem, dev, s);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
