// Launcher of the tensor-core attend (decode_tc.h, decode_tc.cuh): the kernel instance by cache dtype, head blocks
// (MB = 2 for H <= 32, else 4) and latent n-blocks per warp (RN = 2 for R <= 128, else 8).
#include <cuda_runtime.h>

#include "cuda/check.cuh"
#include "cuda/mla/decode_tc.cuh"
#include "cuda/mla/decode_tc.h"

namespace kimi::cuda::mla {

namespace {
int tc_mb(int64_t H) { return H <= 32 ? 2 : 4; }
size_t tc_smem(DType cache, int64_t H, int64_t RP) {
  const bool f32 = cache == DType::f32;
  return TcSmem(16 * tc_mb(H), int(RP), f32 ? kTcStages<float> : kTcStages<__nv_bfloat16>, f32 ? 4 : 2).total;
}

template <class T, int MB, int RN>
void launch(const TcParams& p, int64_t N, size_t smem, cudaStream_t s) {
  auto* k = mla_attend_tc_kernel<T, MB, RN>;
  KIMI_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  k<<<dim3(unsigned(p.S), unsigned(N)), kTcThreads, smem, s>>>(p);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_t(const TcParams& p, int64_t N, size_t smem, cudaStream_t s) {
  const int mb = tc_mb(p.H);
  if (mb == 2)
    p.R <= 128 ? launch<T, 2, 2>(p, N, smem, s) : launch<T, 2, 8>(p, N, smem, s);
  else
    p.R <= 128 ? launch<T, 4, 2>(p, N, smem, s) : launch<T, 4, 8>(p, N, smem, s);
}
}  // namespace

bool tc_attend_fits(DType cache, int64_t H, int64_t R, int64_t RP, int dev) {
  if (cache != DType::f32 && cache != DType::bf16) return false;
  if (H < 1 || H > kTcMaxH || R < 1 || R > kTcMaxR || RP > 4096) return false;
  int optin = 0;
  KIMI_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return tc_smem(cache, H, RP) <= size_t(optin);
}

void tc_attend(const float* QL, const TensorView& cache, const int64_t* lens, const int64_t* slots, float* Opart,
               float* ML, int64_t N, int64_t S, int64_t H, int64_t R, float scale, void* stream) {
  const int64_t RP = cache.size(2), esz = cache.dtype == DType::f32 ? 4 : 2;
  TcParams p{};
  p.QL = QL;
  p.cache = cache.data, p.c_s0 = cache.strides[0], p.c_s1 = cache.strides[1];
  p.lens = lens, p.slots = slots, p.Opart = Opart, p.ML = ML;
  p.H = int(H), p.R = int(R), p.RP = int(RP), p.S = int(S), p.scale = scale;
  p.vec = reinterpret_cast<uintptr_t>(cache.data) % 16 == 0 && (cache.strides[0] * esz) % 16 == 0 &&
          (cache.strides[1] * esz) % 16 == 0 && (RP * esz) % 16 == 0;
  const size_t smem = tc_smem(cache.dtype, H, RP);
  const auto s = static_cast<cudaStream_t>(stream);
  if (cache.dtype == DType::f32)
    launch_t<float>(p, N, smem, s);
  else
    launch_t<__nv_bfloat16>(p, N, smem, s);
}

}  // namespace kimi::cuda::mla
