// Launcher of the warpgroup-MMA attend (decode_wg.h, decode_wg.cuh): the cache's tensor map and the launch.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/check.cuh"
#include "cuda/index.cuh"
#include "cuda/mla/decode_wg.cuh"
#include "cuda/mla/decode_wg.h"
#include "cuda/pdl.cuh"
#include "cuda/tensor_map.h"
#include "kimi/error.h"

namespace kimi::cuda::mla {

bool wg_attend_fits(const TensorView& cache, int64_t H, int64_t R, int64_t RP, int dev) {
  if (cache.dtype != DType::bf16 || cache.ndim != 3 || R != kWgR || RP != kWgRP || H < 1) return false;
  if (cache.strides[2] != 1 || reinterpret_cast<uintptr_t>(cache.data) % 16 != 0 || cache.strides[1] % 8 != 0 ||
      cache.strides[0] % 8 != 0 || cache.strides[1] < RP || cache.strides[0] < 1)
    return false;
  if (cache.size(0) >= (int64_t(1) << 31) || cache.size(1) >= (int64_t(1) << 31)) return false;
  if (!tensor_map_encoder()) return false;
  int optin = 0;
  KIMI_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return WgSmem::total <= size_t(optin);
}

void wg_attend(const void* QL, const TensorView& cache, const int64_t* lens, const int64_t* slots,
               const TensorView* dlens, const TensorView* dslots, float* Opart, float* ML, int64_t N, int64_t S,
               int64_t H, int64_t hg, float scale, void* stream) {
  WgArgs a{};
  WgParams& p = a.p;
  p.QL = static_cast<const __nv_bfloat16*>(QL);
  p.lens = lens, p.slots = slots, p.Opart = Opart, p.ML = ML;
  p.Nc = cache.size(0), p.L = cache.size(1);
  if (!lens) p.dlens = dev_index(*dlens), p.dslots = dev_index(*dslots);
  p.H = int(H), p.HG = int(std::clamp<int64_t>(hg, 1, kWgMaxHG)), p.S = int(S), p.scale = scale;

  // [Nc][L][576] bf16: box 64 columns x 64 rows x 1 slot, 128-byte swizzle (one wgmma.cuh atom per box).
  const auto encode = tensor_map_encoder();
  if (!encode) throw Error("mla_decode: the wgmma attend needs the driver's cuTensorMapEncodeTiled (wg_attend_fits)");
  const cuuint64_t dims[3] = {cuuint64_t(kWgRP), cuuint64_t(cache.size(1)), cuuint64_t(cache.size(0))};
  const cuuint64_t strides[2] = {cuuint64_t(cache.strides[1]) * 2, cuuint64_t(cache.strides[0]) * 2};
  const cuuint32_t box[3] = {64, uint32_t(kWgBJ), 1}, unit[3] = {1, 1, 1};
  const CUresult r = encode(&a.cache_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, cache.data, dims, strides, box, unit,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error("mla_decode: cuTensorMapEncodeTiled refused the cache map (CUresult " + std::to_string(int(r)) + ")");

  constexpr size_t smem = WgSmem::total;
  KIMI_CUDA_CHECK(cudaFuncSetAttribute(mla_attend_wg_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const unsigned groups = unsigned((p.H + p.HG - 1) / p.HG);
  programmatic_launch(mla_attend_wg_kernel, dim3(groups, unsigned(S), unsigned(N)), dim3(kWgThreads), smem,
                      static_cast<cudaStream_t>(stream), a);
}

}  // namespace kimi::cuda::mla
