// CPU row gather (kimi/ops/gather.h): one output row per loop iteration, converted through f32.
#include "cpu/gather.h"

#include "cpu/tensor_io.h"

namespace kimi::cpu {

void gather_rows(TensorView src, const std::vector<int64_t>& rows, TensorView out, const Context& ctx) {
  const int64_t N = int64_t(rows.size()), D = src.size(1);
  const size_t src_row = size_t(src.stride(0)) * src.element_size(), out_row = size_t(out.stride(0)) * out.element_size();
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> r(static_cast<size_t>(D));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      load_f32(static_cast<const char*>(src.data) + size_t(rows[size_t(n)]) * src_row, src.dtype, D, r.data());
      store_f32(static_cast<char*>(out.data) + size_t(n) * out_row, out.dtype, D, r.data());
    }
  }
}

}  // namespace kimi::cpu
