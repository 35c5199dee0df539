// cuda::register_kda_ops (src/cuda/register.h): the CUDA backend's KDA operators, and which kernel runs a call.
//
// kda_chunk_fwd: the tensor-core chunk kernel (chunk.cu) for bf16/f16 q, k, v at K = V in {64, 128}; every other
// call runs the fp32 recurrent kernel (recurrent.cu), the same operator result. Both take state_slots (state pools
// read and written in place).
#include <vector>

#include "cuda/kda/chunk.h"
#include "cuda/kda/kda.h"
#include "cuda/register.h"

namespace kimi::cuda {

namespace {

// NOTE: the tensor-core chunk kernel's bf16 operands give ~3e-3 relative error, inside SPEC 14's bf16 bar but not
// its fp32 one, so f32 inputs take the recurrent kernel (exact in fp32, docs/ops/kda.md), as do head sizes the
// chunk kernel has no tiles for.
bool tensor_cores(const KdaArgs& a, const KdaDims& d) {
  return a.q.dtype != DType::f32 && a.k.dtype != DType::f32 && a.v.dtype != DType::f32 && d.K == d.V &&
         (d.K == 64 || d.K == 128);
}

// The launchers are called as cuda::...: KdaArgs lives in kimi, so argument-dependent lookup would also find the
// public operators of the same name.
void chunk_fwd(const KdaArgs& a, const KdaDims& d, int chunk_size, const Context& ctx) {
  if (tensor_cores(a, d))
    cuda::kda_chunk_fwd(a, chunk_size, ctx);
  else
    cuda::kda_recurrent_fwd(a, ctx);
}

void recurrent_fwd(const KdaArgs& a, const KdaDims&, const Context& ctx) { cuda::kda_recurrent_fwd(a, ctx); }

// The launcher's options (options.h) stay at their defaults here: tests set them for their thread.
void decode_step(const KdaDecodeArgs& a, const std::vector<int64_t>& slots, const Context& ctx) {
  cuda::kda_decode_step(a, slots, ctx);
}

}  // namespace

void register_kda_ops(Registry& r) {
  constexpr Backend b = Backend::cuda;
  r.kda_gate.set(b, kda_gate);
  r.kda_beta.set(b, kda_beta);
  r.kda_recurrent_fwd.set(b, recurrent_fwd);
  r.kda_chunk_fwd.set(b, chunk_fwd);
  r.kda_decode_step.set(b, decode_step);
}

}  // namespace kimi::cuda
