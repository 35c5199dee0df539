// cpu::kda_decode_step (src/cpu/kda.h): kimi/ops/kda_decode.h on the CPU, run as its parts with the CPU kernels of
// the unfused operators: three conv updates into f32 q, k, v [N, P|Pv], the recurrence (T = 1, state rows by slot)
// into f32 o [N, Pv], the per-head gated norm into y. Arguments validated by src/ops/kda_decode.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/views.h"
#include "cpu/conv.h"
#include "cpu/kda.h"
#include "cpu/norm.h"

namespace kimi::cpu {
namespace {
// [N, C] row views as [N, 1, C] / [N, 1, H, C/H] / [N, H, C/H].
TensorView as3(const TensorView& t) { return view::insert_dim(t, 1); }
TensorView heads4(const TensorView& t, int64_t H) { return view::insert_dim(view::split_last(t, H), 1); }
TensorView heads3(const TensorView& t, int64_t H) { return view::split_last(t, H); }
}  // namespace

void kda_decode_step(const KdaDecodeArgs& a, const std::vector<int64_t>& pool_rows, const Context& ctx) {
  // sizes as the validation resolved them: x_q [N, H*K], b [N, H], x_v [N, H*V]
  const int64_t N = a.x_q.size(0), H = a.b.size(1), P = a.x_q.size(1), Pv = a.x_v.size(1);
  const int64_t K = P / H, V = Pv / H;
  std::vector<float> tmp(static_cast<size_t>(N * (2 * P + 2 * Pv)));
  float* const t = tmp.data();
  const TensorView q(t, DType::f32, {N, P}), k(t + N * P, DType::f32, {N, P}), v(t + 2 * N * P, DType::f32, {N, Pv}),
      o(t + 2 * N * P + N * Pv, DType::f32, {N, Pv});
  // 1. convs + SiLU, one token per sequence, caches shifted in place
  std::vector<ConvSeq> seqs(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) seqs[size_t(n)] = {n, 0, 1, pool_rows[size_t(n)]};
  const std::array<std::array<TensorView, 4>, 3> convs = {{{a.x_q, a.conv_q, a.cache_q, q},
                                                           {a.x_k, a.conv_k, a.cache_k, k},
                                                           {a.x_v, a.conv_v, a.cache_v, v}}};
  for (const auto& [x, w, cache, y] : convs) cpu::short_conv(as3(x), w, cache, cache, seqs, ConvActivation::silu, as3(y), ctx);
  // 2. gate, beta, L2 norm, recurrence on the pool rows
  const TensorView rows(const_cast<int64_t*>(pool_rows.data()), DType::i64, {N});  // a view: no allocation per step
  KdaArgs r;
  r.q = heads4(q, H), r.k = heads4(k, H), r.v = heads4(v, H), r.g = heads4(a.f, H);
  const int64_t bshape[3] = {N, 1, H}, bstrides[3] = {a.b.stride(0), H, 1};
  r.beta = TensorView(a.b.data, a.b.dtype, bshape, bstrides, a.b.device);
  r.gate = a.gate;
  r.beta_sigmoid_in_kernel = r.qk_l2norm_in_kernel = true;
  r.scale = a.scale;
  r.initial_state = r.final_state = a.state;
  r.state_layout = a.state_layout;
  r.state_slots = rows;
  r.o = heads4(o, H);
  KdaDims d{N, 1, H, K, V, a.scale ? *a.scale : float(1.0 / std::sqrt(double(K))), {}, pool_rows};
  for (int64_t n = 0; n < N; ++n) d.seqs.push_back({n, 0, 1});
  cpu::kda_recurrent_fwd(r, d, ctx);
  // 3. per-head gated RMSNorm
  const TensorView zh = a.z.present() ? heads3(a.z, H) : TensorView{};
  cpu::gated_rms_norm(heads3(o, H), zh, a.o_norm, a.norm_eps, heads3(a.y, H), ctx);
}

}  // namespace kimi::cpu
