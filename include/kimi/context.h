// kimi/context.h: where an operator runs.
//
// The backend is chosen by the device of the operator's tensors (all must agree). The context
// carries what the backend needs beyond the tensors: the CUDA stream (a cudaStream_t passed as
// void* so that this header needs no CUDA), and the CPU thread count (0 = OpenMP's default).
#pragma once

namespace kimi {

struct Context {
  void* cuda_stream = nullptr;
  int cpu_threads = 0;
};

}  // namespace kimi
