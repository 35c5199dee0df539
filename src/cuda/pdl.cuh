// src/cuda/pdl.cuh: programmatic dependent launch (PDL, sm_90): a kernel launched with
// programmatic_launch() may start while the kernel before it on the stream is still running, once every CTA of
// that kernel has called pdl_launch_dependents() (or exited). It must call pdl_wait() before it touches memory
// that earlier work on the stream writes or reads: pdl_wait() returns when the previous kernel has completed and
// its writes are visible (and so, by induction, all earlier work). Before the wait a kernel may only read what no
// step writes, such as weights: a decode step's weight-streaming kernels (the GEMV, the touched experts) issue
// their first weight loads there, so a layer's next projection streams while the previous kernel finishes,
// instead of after its launch gap and load ramp. The decode step's other kernels (norms, router, grouping,
// combine, the KDA step, convert, the residual add) are launched the same way and wait first: their launch
// latency then overlaps the kernel before them.
// Invariants: every kernel launched by programmatic_launch() calls pdl_wait() on every path that reads or writes
// stream-ordered memory (one documented exception: touched.cuh's down launch reads the expert list before its
// wait, complete by then because the launch before it triggers only after its own wait);
// pdl_launch_dependents() is a hint that any kernel may call (a kernel launched the plain
// way waits for full completion as always). Graph capture keeps the programmatic edges.
// KIMI_CUDA_PDL=0 in the environment launches these kernels the plain way (for A/B measurement; docs/model/runtime.md).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cuda/check.cuh"

namespace kimi::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Whether programmatic_launch() asks for overlap (KIMI_CUDA_PDL=0: no; read once).
bool pdl_enabled();

// kernel<<<grid, block, smem, s>>>(args...) with the programmatic-stream-serialization attribute (pdl_enabled()).
template <class... KernelArgs, class... Args>
void programmatic_launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                         Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  KIMI_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace kimi::cuda
