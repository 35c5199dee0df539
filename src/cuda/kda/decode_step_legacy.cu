// TEMPORARY (removed after the A/B run): the decode kernels of ddb5da9 (decode_step_legacy.cuh) behind
// KIMI_DECODE_SPLIT=0, so that bench_kda_decode measures before and after in one device call.
#include <cstring>

#include "cuda/check.cuh"
#include "cuda/kda/decode_step_legacy.cuh"

namespace kimi::cuda {
namespace {
using namespace kda_decode_legacy;
template <class Kernel>
void launch(Kernel kernel, const DecodeParams& p, int64_t ctas, cudaStream_t s) {
  kernel<<<dim3(unsigned(ctas)), dim3(kThreads), 0, s>>>(p);
}
}  // namespace

void kda_decode_legacy_launch(const void* params, size_t size, bool kv, int64_t ctas, cudaStream_t s) {
  if (size != sizeof(DecodeParams)) throw Error("kda_decode_legacy_launch: parameter struct size mismatch");
  DecodeParams p;
  std::memcpy(&p, params, size);
  const int K = p.K, V = p.V;
  if (kv) {
    if (V <= 64) {
      if (K <= 64) launch(kda_decode_step_kv_kernel<16, 2, 2>, p, ctas, s);
      else if (K <= 128) launch(kda_decode_step_kv_kernel<16, 4, 2>, p, ctas, s);
      else launch(kda_decode_step_kv_kernel<16, 8, 2>, p, ctas, s);
    } else {
      if (K <= 64) launch(kda_decode_step_kv_kernel<32, 4, 2>, p, ctas, s);
      else if (K <= 128) launch(kda_decode_step_kv_kernel<32, 8, 2>, p, ctas, s);
      else launch(kda_decode_step_kv_kernel<32, 16, 1>, p, ctas, s);
    }
  } else {
    if (K <= 32) launch(kda_decode_step_vk_kernel<8, 1, 4, 2>, p, ctas, s);
    else if (K <= 64) launch(kda_decode_step_vk_kernel<16, 1, 8, 2>, p, ctas, s);
    else if (K <= 128) launch(kda_decode_step_vk_kernel<32, 1, 8, 2>, p, ctas, s);
    else launch(kda_decode_step_vk_kernel<32, 2, 8, 1>, p, ctas, s);
  }
}
}  // namespace kimi::cuda
