// Launcher of the tensor-core attend (decode_tc.h, decode_tc.cuh): the kernel instance by cache dtype, head blocks
// (MB = ceil(HG / 16), HG = the heads of a group) and latent n-blocks per warp (RN = 2 for R <= 128, else 8).
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/check.cuh"
#include "cuda/index.cuh"
#include "cuda/mla/decode_tc.cuh"
#include "cuda/mla/decode_tc.h"
#include "cuda/pdl.cuh"

namespace kimi::cuda::mla {

namespace {
int tc_mb(int64_t HG) { return int((HG + 15) / 16); }
size_t tc_smem(DType cache, int64_t HG, int64_t RP) {
  const bool f32 = cache == DType::f32;
  return TcSmem(16 * tc_mb(HG), int(RP), f32 ? kTcStages<float> : kTcStages<__nv_bfloat16>, f32 ? 4 : 2).total;
}

template <class T, int MB, int RN>
void launch(const TcParams& p, int64_t N, size_t smem, cudaStream_t s) {
  auto* k = mla_attend_tc_kernel<T, MB, RN>;
  KIMI_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const unsigned groups = unsigned((p.H + p.HG - 1) / p.HG);
  programmatic_launch(k, dim3(groups, unsigned(p.S), unsigned(N)), dim3(kTcThreads), smem, s, p);
}

template <class T>
void launch_t(const TcParams& p, int64_t N, size_t smem, cudaStream_t s) {
  const bool narrow = p.R <= 128;
  switch (tc_mb(p.HG)) {
    case 1: narrow ? launch<T, 1, 2>(p, N, smem, s) : launch<T, 1, 8>(p, N, smem, s); break;
    case 2: narrow ? launch<T, 2, 2>(p, N, smem, s) : launch<T, 2, 8>(p, N, smem, s); break;
    case 3: narrow ? launch<T, 3, 2>(p, N, smem, s) : launch<T, 3, 8>(p, N, smem, s); break;
    default: narrow ? launch<T, 4, 2>(p, N, smem, s) : launch<T, 4, 8>(p, N, smem, s); break;
  }
}
}  // namespace

int64_t tc_head_group(int64_t H) {
  const int64_t groups = (H + kTcMaxHG - 1) / kTcMaxHG;
  return (H + groups - 1) / groups;
}

bool tc_attend_fits(DType cache, int64_t H, int64_t R, int64_t RP, int dev) {
  if (cache != DType::f32 && cache != DType::bf16) return false;
  if (H < 1 || R < 1 || R > kTcMaxR || RP > 4096) return false;
  int optin = 0;
  KIMI_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return tc_smem(cache, tc_head_group(H), RP) <= size_t(optin);
}

int64_t tc_query_cols(int64_t RP) { return tc_kp(int(RP)); }

void tc_attend(const void* QL, const TensorView& cache, const int64_t* lens, const int64_t* slots,
               const TensorView* dlens, const TensorView* dslots, float* Opart, float* ML, int64_t N, int64_t S,
               int64_t H, int64_t hg, int64_t R, float scale, void* stream) {
  const int64_t RP = cache.size(2), esz = cache.dtype == DType::f32 ? 4 : 2;
  TcParams p{};
  p.QL = static_cast<const __nv_bfloat16*>(QL);
  p.cache = cache.data, p.c_s0 = cache.strides[0], p.c_s1 = cache.strides[1];
  p.lens = lens, p.slots = slots, p.Opart = Opart, p.ML = ML;
  if (!lens) p.dlens = dev_index(*dlens), p.dslots = dev_index(*dslots), p.Nc = cache.size(0), p.L = cache.size(1);
  p.H = int(H), p.HG = int(std::clamp<int64_t>(hg, 1, tc_head_group(H)));
  p.R = int(R), p.RP = int(RP), p.S = int(S), p.scale = scale;
  p.vec = reinterpret_cast<uintptr_t>(cache.data) % 16 == 0 && (cache.strides[0] * esz) % 16 == 0 &&
          (cache.strides[1] * esz) % 16 == 0 && (RP * esz) % 16 == 0;
  const size_t smem = tc_smem(cache.dtype, p.HG, RP);
  const auto s = static_cast<cudaStream_t>(stream);
  if (cache.dtype == DType::f32)
    launch_t<float>(p, N, smem, s);
  else
    launch_t<__nv_bfloat16>(p, N, smem, s);
}

}  // namespace kimi::cuda::mla
