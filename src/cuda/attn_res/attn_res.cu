// Launcher of src/cuda/attn_res/attn_res.h: the candidate table (pointer, row stride, dtype of every block and
// then partial) passed in the kernel's parameters (capturable in a CUDA graph; K3 has ~10 candidates), or uploaded
// once per call beyond kAttnResInlineCands (refused under capture), one CTA of kAttnResThreads per token.
#include <algorithm>
#include <vector>

#include "cuda/attn_res/attn_res.cuh"
#include "cuda/attn_res/attn_res.h"
#include "cuda/check.cuh"
#include "cuda/scratch.cuh"

namespace kimi::cuda {

void attn_res(TensorView partial, std::span<const TensorView> blocks, TensorView proj_w, TensorView norm_w,
              float eps, TensorView out, const Context& ctx) {
  const int64_t T = partial.size(0), d = partial.size(1);
  if (T == 0 || d == 0) return;
  if (T > int64_t(0x7fffffff)) throw Error("cuda attn_res: too many rows for one launch: " + std::to_string(T));
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const int m = int(blocks.size()) + 1;
  if (m > kAttnResMaxCands)
    throw Error("cuda attn_res: at most " + std::to_string(kAttnResMaxCands - 1) + " blocks, got " + std::to_string(m - 1));
  if (m > kAttnResInlineCands) refuse_capture(s, "attn_res with more than 63 blocks");
  const DeviceGuard device_guard(partial.device.index);
  std::vector<AttnResCand> cands;
  for (const TensorView& b : blocks) cands.push_back({b.data, b.strides[0], elem_type(b.dtype)});
  cands.push_back({partial.data, partial.strides[0], elem_type(partial.dtype)});
  auto launch = [&](auto table) {
    attn_res_kernel<<<unsigned(T), kAttnResThreads, 0, s>>>(
        table, m, proj_w.data, elem_type(proj_w.dtype), proj_w.strides[0], norm_w.data, elem_type(norm_w.dtype),
        norm_w.strides[0], eps, out.data, elem_type(out.dtype), out.strides[0], int(d));
  };
  if (m <= kAttnResInlineCands) {
    AttnResInline table{};
    std::copy(cands.begin(), cands.end(), table.c);
    launch(table);
  } else {
    const Scratch table = upload(cands, s);
    launch(table.get<AttnResCand>());
  }
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
