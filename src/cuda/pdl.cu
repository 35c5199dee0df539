// Host side of src/cuda/pdl.cuh.
#include <cstdlib>
#include <cstring>

#include "cuda/pdl.cuh"

namespace kimi::cuda {

bool pdl_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("KIMI_CUDA_PDL");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

}  // namespace kimi::cuda
