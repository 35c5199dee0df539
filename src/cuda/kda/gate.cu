// Launchers of kimi::kda_gate and kimi::kda_beta on CUDA (src/cuda/kda/gate.cuh): row offsets uploaded once per
// call (cuda/rows.cuh), one warp per row.
#include "cuda/kda/gate.cuh"
#include "cuda/kda/kda.h"
#include "cuda/rows.cuh"

namespace kimi::cuda {

void kda_gate(TensorView f, const KdaGate& gate, TensorView g, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(f.device.index);
  const RowLaunch l = row_launch("kda_gate", {f, g}, s);
  if (l.rows == 0) return;
  const int64_t* off = l.offsets->get<int64_t>();
  const int H = int(f.size(-2)), K = int(f.size(-1));
  kda_gate_kernel<<<l.blocks, kRowWarps * 32, 0, s>>>(
      f.data, elem_type(f.dtype), off, static_cast<const float*>(gate.A_log.data), gate.A_log.strides[0],
      static_cast<const float*>(gate.dt_bias.data), gate.form == GateForm::bounded ? kda_gate_bounded : kda_gate_softplus,
      gate.lower_bound, g.data, elem_type(g.dtype), off + l.rows, l.rows, H, K);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void kda_beta(TensorView b, TensorView beta, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(b.device.index);
  const RowLaunch l = row_launch("kda_beta", {b, beta}, s);
  if (l.rows == 0) return;
  const int64_t* off = l.offsets->get<int64_t>();
  kda_beta_kernel<<<l.blocks, kRowWarps * 32, 0, s>>>(b.data, elem_type(b.dtype), off, beta.data,
                                                       elem_type(beta.dtype), off + l.rows, l.rows, int(b.size(-1)));
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
