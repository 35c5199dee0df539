// Launchers of kimi::kda_gate and kimi::kda_beta on CUDA (src/cuda/kda/gate.cuh): the vectorized row launch
// (cuda/norm/row_vec.cuh) when the views allow 16-byte accesses, else one warp per row; rows at the offsets of
// their views' row maps (cuda/rows.cuh).
#include "cuda/kda/gate.cuh"
#include "cuda/kda/kda.h"
#include "cuda/rows.cuh"

namespace kimi::cuda {

void kda_gate(TensorView f, const KdaGate& gate, TensorView g, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(f.device.index);
  const RowLaunch l = row_launch("kda_gate", f);
  if (l.rows == 0) return;
  const int H = int(f.size(-2)), K = int(f.size(-1));
  const VecRowLaunch v = vec_row_launch("kda_gate", l.rows, K);
  if (v.ok && vec8_view(f) && vec8_view(g) && vec8_aligned(gate.dt_bias.data)) {
    const auto kernel = gate.form == GateForm::bounded ? kda_gate_vec_kernel<kda_gate_bounded>
                                                       : kda_gate_vec_kernel<kda_gate_softplus>;
    kernel<<<v.blocks, v.threads, 0, s>>>(f.data, elem_type(f.dtype), vec_row_map(f),
                                          static_cast<const float*>(gate.A_log.data), gate.A_log.strides[0],
                                          static_cast<const float*>(gate.dt_bias.data), gate.lower_bound, g.data,
                                          elem_type(g.dtype), vec_row_map(g), l.rows, H, K, v.lanes);
    KIMI_CUDA_CHECK(cudaGetLastError());
    return;
  }
  kda_gate_kernel<<<l.blocks, kRowWarps * 32, 0, s>>>(
      f.data, elem_type(f.dtype), row_map(f), static_cast<const float*>(gate.A_log.data), gate.A_log.strides[0],
      static_cast<const float*>(gate.dt_bias.data), gate.form == GateForm::bounded ? kda_gate_bounded : kda_gate_softplus,
      gate.lower_bound, g.data, elem_type(g.dtype), row_map(g), l.rows, H, K);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void kda_beta(TensorView b, TensorView beta, const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(b.device.index);
  const RowLaunch l = row_launch("kda_beta", b);
  if (l.rows == 0) return;
  const VecRowLaunch v = vec_row_launch("kda_beta", l.rows, b.size(-1));
  if (v.ok && vec8_view(b) && vec8_view(beta)) {
    kda_beta_vec_kernel<<<v.blocks, v.threads, 0, s>>>(b.data, elem_type(b.dtype), vec_row_map(b), beta.data,
                                                       elem_type(beta.dtype), vec_row_map(beta), l.rows, int(b.size(-1)),
                                                       v.lanes);
    KIMI_CUDA_CHECK(cudaGetLastError());
    return;
  }
  kda_beta_kernel<<<l.blocks, kRowWarps * 32, 0, s>>>(b.data, elem_type(b.dtype), row_map(b), beta.data,
                                                       elem_type(beta.dtype), row_map(beta), l.rows, int(b.size(-1)));
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
