// src/cuda/mla/prefill_flash.cu: the launcher of the fused bf16 causal attention (flash_fa3.cuh, the FlashAttention-3
// schedule on wgmma and TMA, or flash.cuh on mma.sync for the head sizes fa3 cannot take: same tiles, parameters and
// instances) for mla_prefill, run by mla_prefill_gemm (prefill_gemm.cu) on the bf16 kv expansion it made with cuBLAS.
//   flash_supported: the fused kernel's conditions (flash.cuh "Global layouts"): Dn, P, Dv multiples of 8,
//     Dn + P <= 256, Dv <= 128, q / k_pe token and head strides multiples of 8 elements, 16-byte aligned data.
//   Tiles: per sequence, query tiles of kFlBQ (the last one partial), latest tiles first (the longest causal rows
//     start first, the short ones fill the tail of the wave); grid (tiles, heads), consecutive CTAs share a head's
//     keys in L2.
//   Instances (DK, DV): the smallest of (64, 64), (128, 128), (192, 128), (256, 128) that holds (Dn + P, Dv); the
//     padded columns are zero and cost only their share of the tensor-core work.
//   The FlashAttention-3 form (flash_fa3.cuh) loads K and V by tensor-map boxes of 64 x 64: it takes Dn, P and Dv
//     multiples of 64 that fill the instance exactly (Kimi's 128 / 64 / 128: (192, 128)) and tokens that fit the
//     boxes' int32 coordinates (mla_flash_fa3_supported); asked for other shapes, the launcher throws.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/mla/flash.cuh"
#include "cuda/mla/flash_fa3.cuh"
#include "cuda/mla/mla.h"
#include "cuda/scratch.cuh"
#include "cuda/tensor_map.h"

namespace kimi::cuda {

namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// A 2-d bf16 tensor map [rows][cols] (row stride ld elements), 128B swizzle, box 64 x 64, zeros outside.
void encode_box_map(CUtensorMap& map, const void* base, int64_t cols, int64_t rows, int64_t ld, const char* what) {
  const auto encode = tensor_map_encoder();
  if (!encode)
    throw Error("mla_prefill: the FlashAttention-3 kernel needs the driver's cuTensorMapEncodeTiled, which this "
                "driver lacks (use MlaPrefillPath::fused)");
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(ld) * 2};
  const cuuint32_t box[2] = {64, 64}, unit[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
                            unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(std::string("mla_prefill: cuTensorMapEncodeTiled refused the ") + what + " map (CUresult " +
                std::to_string(int(r)) + ")");
}


template <int DK, int DV>
void launch(const mla::FlashParams& p, const CUtensorMap* maps, unsigned ntiles, unsigned heads,
            MlaFlashKernel kernel, cudaStream_t s) {
  static_assert(mla::kFlBQ == mla::kFaBQ, "one tile table for both kernels");
  if (kernel == MlaFlashKernel::fa3) {
    constexpr size_t smem = mla::flash_fa3_smem_bytes<DK, DV>();
    KIMI_CUDA_CHECK(cudaFuncSetAttribute(mla::mla_flash_fa3_kernel<DK, DV>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    const mla::Fa3Params a{p, maps[0], maps[1]};
    mla::mla_flash_fa3_kernel<DK, DV><<<dim3(ntiles, heads), mla::kFaThreads, smem, s>>>(a);
  } else {
    constexpr size_t smem = mla::flash_smem_bytes<DK, DV>();
    KIMI_CUDA_CHECK(cudaFuncSetAttribute(mla::mla_flash_kernel<DK, DV>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(smem)));
    mla::mla_flash_kernel<DK, DV><<<dim3(ntiles, heads), mla::kFlThreads, smem, s>>>(p);
  }
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

// flash_fa3.cuh's conditions beyond mla_flash_supported: whole 64-column boxes filling the instance (DK, DV) and
// tokens + 64 in int32 box coordinates.
bool mla_flash_fa3_supported(const MlaDims& d, int64_t tokens) {
  const int64_t Dn = d.qk_nope, P = d.qk_rope, Dv = d.v_dim, Dk = Dn + P;
  const int64_t DK = Dk <= 64 && Dv <= 64 ? 64 : Dk <= 128 ? 128 : Dk <= 192 ? 192 : 256, DV = DK == 64 ? 64 : 128;
  return Dn % 64 == 0 && P % 64 == 0 && Dv % 64 == 0 && Dk == DK && Dv == DV && tokens + 64 < (int64_t(1) << 31) &&
         d.heads * (Dn + Dv) < (int64_t(1) << 31);
}

bool mla_flash_supported(TensorView q, TensorView k_pe, const MlaDims& d) {
  const int64_t Dk = d.qk_nope + d.qk_rope;
  return d.qk_nope % 8 == 0 && d.qk_rope % 8 == 0 && d.v_dim % 8 == 0 && Dk <= 256 && d.v_dim <= 128 &&
         d.heads <= 65535 && q.strides[1] % 8 == 0 && q.strides[2] % 8 == 0 && k_pe.strides[1] % 8 == 0 &&
         aligned16(q.data) && aligned16(k_pe.data);
}

void mla_prefill_flash(TensorView q, const void* kv, TensorView k_pe, TensorView gate,
                       const std::vector<int64_t>& cu, const MlaDims& d, TensorView o, MlaFlashKernel kernel,
                       const Context& ctx) {
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const int64_t B = q.size(0), T = q.size(1), H = d.heads, Dn = d.qk_nope, P = d.qk_rope, Dv = d.v_dim;
  std::vector<std::pair<int64_t, int64_t>> seqs;  // (first token m0, length)
  if (!cu.empty()) {
    for (size_t i = 0; i + 1 < cu.size(); ++i)
      if (cu[i + 1] > cu[i]) seqs.push_back({cu[i], cu[i + 1] - cu[i]});
  } else {
    for (int64_t b = 0; b < B; ++b) seqs.push_back({b * T, T});
  }
  struct Tile {
    int64_t m0, i0, nq;
  };
  std::vector<Tile> tiles;
  for (auto [m0, len] : seqs)
    for (int64_t i0 = 0; i0 < len; i0 += mla::kFlBQ) tiles.push_back({m0, i0, std::min<int64_t>(mla::kFlBQ, len - i0)});
  if (kernel == MlaFlashKernel::fa3 && !mla_flash_fa3_supported(d, B * T))
    throw Error("mla_prefill: the FlashAttention-3 kernel needs qk_nope, qk_rope, v_dim multiples of 64 filling an "
                "instance ((Dn + P, Dv) one of (64, 64), (128, 128), (192, 128), (256, 128)) and fewer than 2^31 - 64 "
                "tokens; got qk_nope " + std::to_string(Dn) + ", qk_rope " + std::to_string(P) + ", v_dim " +
                std::to_string(Dv) + ", " + std::to_string(B * T) + " tokens (use MlaPrefillPath::fused)");
  if (tiles.empty()) return;
  std::stable_sort(tiles.begin(), tiles.end(), [](const Tile& a, const Tile& b) { return a.i0 > b.i0; });
  if (tiles.size() > 0x7fffffffu)
    throw Error("mla_prefill: CUDA grid too large: query tiles = " + std::to_string(tiles.size()));
  std::vector<int64_t> tab;
  tab.reserve(tiles.size() * 3);
  for (const Tile& t : tiles) tab.insert(tab.end(), {t.m0, t.i0, t.nq});
  const Scratch tab_d = upload(tab, s);

  mla::FlashParams p{};
  p.q = static_cast<const __nv_bfloat16*>(q.data), p.q_tok = q.strides[1], p.q_head = q.strides[2];
  p.kv = static_cast<const __nv_bfloat16*>(kv), p.ldkv = H * (Dn + Dv);
  p.pe = static_cast<const __nv_bfloat16*>(k_pe.data), p.pe_tok = k_pe.strides[1];
  if (gate.present()) p.gate = gate.data, p.tg = elem_type(gate.dtype), p.g_tok = gate.strides[1];
  p.o = o.data, p.to = elem_type(o.dtype), p.o_tok = o.strides[1], p.o_head = o.strides[2];
  p.tiles = tab_d.get<int64_t>();
  p.Dn = int(Dn), p.P = int(P), p.Dv = int(Dv);
  p.scale_log2 = float(double(d.scale) * 1.4426950408889634);  // log2(e)
  const unsigned n = unsigned(tiles.size()), h = unsigned(H);
  CUtensorMap maps[2]{};  // kv [B T][H (Dn + Dv)], k_pe [B T][P]
  if (kernel == MlaFlashKernel::fa3) {
    encode_box_map(maps[0], kv, H * (Dn + Dv), B * T, p.ldkv, "kv");
    encode_box_map(maps[1], k_pe.data, P, B * T, p.pe_tok, "k_pe");
  }
  const int64_t Dk = Dn + P;
  if (Dk <= 64 && Dv <= 64) launch<64, 64>(p, maps, n, h, kernel, s);
  else if (Dk <= 128) launch<128, 128>(p, maps, n, h, kernel, s);
  else if (Dk <= 192) launch<192, 128>(p, maps, n, h, kernel, s);
  else launch<256, 128>(p, maps, n, h, kernel, s);
}

}  // namespace kimi::cuda
