// Launchers of src/cuda/moe/moe.h: the router, the GLU activation and the dense MLP
//   mlp: h = act(x W_gate^T) * (x W_up^T), then y (=|+=) h W_down^T (cuda::linear). h is formed
//        fused (glu_wgmma_applies: bf16 x, tensor-core weights, enough tiles to fill the device: prefill): ONE
//          grouped-GEMM launch (experts.h glu_wgmma) writes h bf16 [T, I] from its fp32 accumulators; against the
//          separate form it saves the f32 g and u round trip (16 bytes per element of [T, I]) and the glu launch;
//        separate (otherwise): g = x W_gate^T, u = x W_up^T (f32 scratch [T, I], cuda::linear), h = act(g) * u
//          (glu_kernel).
//        x is fully read before y is written, so y may alias x.
//        h, the down-projection's input, is an activation between ops: it follows x's dtype when x is bf16 (the
//        activation dtype policy, docs/model/runtime.md), so the down-projection is one bf16 GEMM; an f32 h would
//        be split into three bf16 parts there (cuda::linear's exact-f32 rule: 3x the down-projection's FLOPs).
#include <optional>
#include <string>

#include "cuda/check.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/grid.cuh"
#include "cuda/linear/linear.h"
#include "cuda/moe/experts.h"
#include "cuda/moe/glu.cuh"
#include "cuda/moe/moe.h"
#include "cuda/moe/options.h"
#include "cuda/moe/router.cuh"
#include "cuda/scratch.cuh"
#include "cuda/pdl.cuh"

namespace kimi::cuda {

namespace {
constexpr int kThreads = 256;

GluView glu_view(const TensorView& t) {
  GluView v{t.data, elem_type(t.dtype), {}};
  for (int d = 0; d + 1 < t.ndim; ++d) v.stride[d] = t.strides[size_t(d)];
  return v;
}
}  // namespace

void moe_router(TensorView logits, TensorView bias, const RouterParams& p, TensorView ids, TensorView weights,
                const Context& ctx) {
  const int64_t t = logits.size(0), e = logits.size(1);
  if (t == 0) return;
  const DeviceGuard device_guard(logits.device.index);
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const RouterArgs a = router_args(logits, bias, p, ids, weights);
  const unsigned grid = grid_1d(t, kRouterWarps, "moe_router"), block = kRouterWarps * 32;
  const auto kernel = p.top_k > 32 || e > 32 * 32 ? router_kernel
                      : e <= 32 * 8                ? router_reg_kernel<8>
                      : e <= 32 * 16               ? router_reg_kernel<16>
                                                   : router_reg_kernel<32>;
  programmatic_launch(kernel, dim3(grid), dim3(block), 0, s, a);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void glu(TensorView gate, TensorView up, const GluParams& p, TensorView h, const Context& ctx) {
  const int64_t total = gate.numel();
  if (total == 0) return;
  if (gate.ndim - 1 > kGluMaxLead) throw Error("glu: at most " + std::to_string(kGluMaxLead + 1) + " dimensions on CUDA");
  const DeviceGuard device_guard(gate.device.index);
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  GluArgs a{};
  a.gate = glu_view(gate);
  a.up = glu_view(up);
  a.h = glu_view(h);
  a.lead = gate.ndim - 1;
  for (int d = 0; d < a.lead; ++d) a.shape[d] = gate.shape[size_t(d)];
  a.inner = gate.size(-1);
  a.total = total;
  a.situ = p.act == GluAct::situ ? 1 : 0;
  a.beta = p.situ_beta;
  a.lbeta = p.situ_linear_beta;
  glu_kernel<<<grid_1d(total, kThreads, "glu"), kThreads, 0, s>>>(a);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void mlp(TensorView x, const MlpWeights& w, const GluParams& p, TensorView y, float beta, const Context& ctx) {
  const int64_t m = x.size(0), inter = w.gate.out_features();
  if (m == 0) return;
  const DeviceGuard device_guard(x.device.index);
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  ExpertPathRecord* const rec = expert_path_options().record;
  if (glu_wgmma_applies(x, w)) {  // h bf16 [T, I] from one grouped-GEMM launch
    if (rec) ++rec->mlp_fused;
    const Scratch h(size_t(m * inter) * 2, s);
    cuda::glu_wgmma(x, w, p, h.get(), s);
    cuda::linear(TensorView(h.get(), DType::bf16, {m, inter}, x.device), w.down, y, beta, ctx);
    return;
  }
  if (rec && x.dtype == DType::bf16) ++rec->mlp_separate;
  const DType ht = x.dtype == DType::bf16 ? DType::bf16 : DType::f32;
  Scratch g(size_t(m * inter) * sizeof(float), s), u(size_t(m * inter) * sizeof(float), s);
  const TensorView gv(g.get(), DType::f32, {m, inter}, x.device), uv(u.get(), DType::f32, {m, inter}, x.device);  // [T, I]
  std::optional<Scratch> h;  // a bf16 h has its own buffer: written over g, element i would land in g[i / 2]'s bytes
  if (ht != DType::f32) h.emplace(size_t(m * inter) * dtype_size(ht), s);
  const TensorView hv(h ? h->get() : g.get(), ht, {m, inter}, x.device);  // [T, I]
  cuda::linear(x, w.gate, gv, 0.f, ctx);
  cuda::linear(x, w.up, uv, 0.f, ctx);
  cuda::glu(gv, uv, p, hv, ctx);
  cuda::linear(hv, w.down, y, beta, ctx);
}

}  // namespace kimi::cuda
