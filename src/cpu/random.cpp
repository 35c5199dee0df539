// Implementation of src/cpu/random.h: element i from src/core/splitmix.h (the CUDA kernel's exact operations).
#include "cpu/random.h"

#include "core/splitmix.h"
#include "cpu/tensor_io.h"

namespace kimi::cpu {

namespace {
// Threads only for large fills: a model's thousand small tensors would pay a parallel region each.
constexpr int64_t kParallelFrom = int64_t(1) << 16;

template <class F>
void each(int64_t n, const Context& ctx, F&& f) {
#pragma omp parallel for schedule(static) num_threads(threads(ctx)) if (n >= kParallelFrom)
  for (int64_t i = 0; i < n; ++i) f(i);
}
}  // namespace

void fill_random(TensorView t, const RandomFill& r, const Context& ctx) {
  const int64_t n = t.numel();
  const uint64_t s = r.state;
  switch (t.dtype) {
    case DType::f32: {
      float* p = static_cast<float*>(t.data);
      each(n, ctx, [&](int64_t i) { p[i] = splitmix::uniform_f32(splitmix::element(s, uint64_t(i)), r.lo, r.width); });
      break;
    }
    case DType::bf16: {
      uint16_t* p = static_cast<uint16_t*>(t.data);
      each(n, ctx, [&](int64_t i) {
        p[i] = splitmix::bf16_bits(splitmix::uniform_f32(splitmix::element(s, uint64_t(i)), r.lo, r.width));
      });
      break;
    }
    case DType::u8: {
      uint8_t* p = static_cast<uint8_t*>(t.data);
      const int64_t lo = int64_t(r.lo);
      each(n, ctx, [&](int64_t i) { p[i] = uint8_t(splitmix::uniform_int(splitmix::element(s, uint64_t(i)), lo, r.count)); });
      break;
    }
    case DType::i32: {
      int32_t* p = static_cast<int32_t*>(t.data);
      const int64_t lo = int64_t(r.lo);
      each(n, ctx, [&](int64_t i) { p[i] = int32_t(splitmix::uniform_int(splitmix::element(s, uint64_t(i)), lo, r.count)); });
      break;
    }
    default:
      break;  // refused by validation (src/ops/random.cpp)
  }
}

}  // namespace kimi::cpu
