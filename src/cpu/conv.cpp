// CPU short convolution (SPEC 4). Work is split into (sequence, block of channels) tasks; each task
// walks its tokens in order with the last W inputs per channel in a small fp32 ring buffer, so that
// x is read once, y written once, and the cache row is read before and written after its tokens.
#include "cpu/conv.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/tensor_io.h"

namespace kimi::cpu {

namespace {
constexpr int64_t kBlock = 64;  // channels per task

void load_seg(const void* p, DType t, int64_t n, float* dst) {
  switch (t) {
    case DType::f32: std::memcpy(dst, p, size_t(n) * sizeof(float)); return;
    case DType::bf16: {
      const uint16_t* s = static_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::f16: {
      const uint16_t* s = static_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_as_f32(p, t, i);
  }
}

void store_seg(void* p, DType t, int64_t n, const float* src) {
  switch (t) {
    case DType::f32: std::memcpy(p, src, size_t(n) * sizeof(float)); return;
    case DType::bf16: {
      uint16_t* d = static_cast<uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) store_from_f32(p, t, i, src[i]);
  }
}

// Element offset of cache[row, c, j].
int64_t cache_off(const TensorView& t, int64_t row, int64_t c, int64_t j) {
  return row * t.strides[0] + c * t.strides[1] + j * t.strides[2];
}
}  // namespace

void short_conv(TensorView x, TensorView w, TensorView cache_in, TensorView cache_out,
                const std::vector<ConvSeq>& seqs, ConvActivation act, TensorView y, const Context& ctx) {
  const int64_t C = x.size(2), W = w.size(-1), H = W - 1;
  if (C == 0 || seqs.empty()) return;
  // Taps transposed to [W, C] so the inner loop runs over contiguous channels (C * W floats per call).
  std::vector<float> wt(static_cast<size_t>(W * C));
  {
    const std::vector<float> wf = to_f32(w);  // [C, W] row-major ([C, 1, W] flattens the same way)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < W; ++j) wt[size_t(j * C + c)] = wf[size_t(c * W + j)];
  }
  const int64_t nblk = (C + kBlock - 1) / kBlock;
  const int64_t ntask = int64_t(seqs.size()) * nblk;
  const bool silu = act == ConvActivation::silu;
  const int64_t xes = int64_t(x.element_size()), yes = int64_t(y.element_size());

#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> ring(static_cast<size_t>(W * kBlock)), out(static_cast<size_t>(kBlock));
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < ntask; ++task) {
      const ConvSeq& s = seqs[size_t(task / nblk)];
      const int64_t c0 = (task % nblk) * kBlock, cb = std::min(kBlock, C - c0);
      // Ring positions 0 .. H-1: the H inputs before the sequence, oldest first (cache or zeros).
      for (int64_t j = 0; j < H; ++j) {
        float* r = ring.data() + j * kBlock;
        if (cache_in.present()) {
          for (int64_t c = 0; c < cb; ++c)
            r[c] = load_as_f32(cache_in.data, cache_in.dtype, cache_off(cache_in, s.cache_row, c0 + c, j));
        } else {
          std::fill(r, r + cb, 0.f);
        }
      }
      int64_t p = H;  // ring position of the current token (slot p % W)
      for (int64_t t = 0; t < s.len; ++t, ++p) {
        const int64_t tok = s.t0 + t;
        const char* xp = static_cast<const char*>(x.data) + (s.b * x.strides[0] + tok * x.strides[1] + c0) * xes;
        load_seg(xp, x.dtype, cb, ring.data() + (p % W) * kBlock);  // read before y (which may be x) is written
        float* o = out.data();
        std::fill(o, o + cb, 0.f);
        for (int64_t j = 0; j < W; ++j) {  // fixed tap order: prefill and decode round identically
          const float* r = ring.data() + ((p - H + j) % W) * kBlock;
          const float* wj = wt.data() + j * C + c0;
          for (int64_t c = 0; c < cb; ++c) o[c] += wj[c] * r[c];
        }
        if (silu)
          for (int64_t c = 0; c < cb; ++c) o[c] = o[c] / (1.f + std::exp(-o[c]));
        char* yp = static_cast<char*>(y.data) + (s.b * y.strides[0] + tok * y.strides[1] + c0) * yes;
        store_seg(yp, y.dtype, cb, o);
      }
      // The last H inputs (positions p-H .. p-1), which include old cache entries when len < H.
      if (cache_out.present()) {
        for (int64_t j = 0; j < H; ++j) {
          const float* r = ring.data() + ((p - H + j) % W) * kBlock;
          for (int64_t c = 0; c < cb; ++c)
            store_from_f32(cache_out.data, cache_out.dtype, cache_off(cache_out, s.cache_row, c0 + c, j), r[c]);
        }
      }
    }
  }
}

}  // namespace kimi::cpu
