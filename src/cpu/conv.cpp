// CPU short convolution (SPEC 4).
//
// Phase 1 computes y in (sequence, chunk of tokens, block of channels) tasks: each task loads the W-1
// inputs before its chunk (from x, or from cache_in before the sequence start) into a small fp32 ring
// buffer, then walks its tokens in order. Phase 2, after every task of phase 1 has read cache_in,
// writes cache_out (the last W-1 inputs per (sequence, channel), read in full before any is written,
// so cache_out may be cache_in). Every output is the same fp32 expression whatever the chunking,
// so prefill and the decode step (a one-token sequence) agree bit for bit.
#include "cpu/conv.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "cpu/tensor_io.h"
#include "cpu/vec_math.h"

namespace kimi::cpu {

namespace {
constexpr int64_t kBlock = 256;  // channels per task
constexpr int64_t kChunk = 128;  // tokens per task

// n elements at base[off0 + i * stride] <-> f32 (the cache's channel dimension).
void load_strided(const void* base, DType t, int64_t off0, int64_t stride, int64_t n, float* dst) {
  switch (t) {
    case DType::f32: {
      const float* s = static_cast<const float*>(base) + off0;
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i * stride];
      return;
    }
    case DType::bf16: {
      const uint16_t* s = static_cast<const uint16_t*>(base) + off0;
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i * stride]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_as_f32(base, t, off0 + i * stride);
  }
}

void store_strided(void* base, DType t, int64_t off0, int64_t stride, int64_t n, const float* src) {
  switch (t) {
    case DType::f32: {
      float* d = static_cast<float*>(base) + off0;
      for (int64_t i = 0; i < n; ++i) d[i * stride] = src[i];
      return;
    }
    case DType::bf16: {
      uint16_t* d = static_cast<uint16_t*>(base) + off0;
      for (int64_t i = 0; i < n; ++i) d[i * stride] = f32_to_bf16(src[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) store_from_f32(base, t, off0 + i * stride, src[i]);
  }
}

// silu(z) = z * sigmoid(z) over a run of floats, written so that GCC vectorizes it at plain -O3 (no
// libm call, no floating-point compare: the clamp and the sign test are integer operations, which
// -ftrapping-math allows to be if-converted). e = exp(-|z|) by Cephes' expf polynomial (rounding by
// the 1.5 * 2^23 trick, Cody-Waite reduction; ~2 ulp), then sigmoid(z) = 1/(1+e) for z >= 0 and
// e/(1+e) for z < 0, so exp never overflows. |z| is clamped at 87 (exp(-87) is still normal;
// silu(z < -87) is below 1e-36 either way). NaN stays NaN.
void silu_inplace(float* o, int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    const float z = o[c];
    const uint32_t zb = std::bit_cast<uint32_t>(z);
    uint32_t a = zb & 0x7fffffffu;            // |z|
    a = a < kExpClampBits ? a : kExpClampBits;  // min(|z|, 87)
    const float x = -std::bit_cast<float>(a);  // -|z| in [-87, 0]
    const float e = exp_clamped(x);
    const float inv = 1.f / (1.f + e);
    const float pos = float(int32_t(1u - (zb >> 31)));  // 1 for z >= +0, 0 for z <= -0
    o[c] = z * inv * (pos + (1.f - pos) * e);
  }
}

// Element offset of cache[row, c, j].
int64_t cache_off(const TensorView& t, int64_t row, int64_t c, int64_t j) {
  return row * t.strides[0] + c * t.strides[1] + j * t.strides[2];
}

// Input k of sequence s (k < 0: before the sequence, from cache_in or zero) for channels c0 .. c0+cb.
void load_input(const TensorView& x, const TensorView& cache_in, const ConvSeq& s, int64_t k, int64_t c0,
                int64_t cb, float* dst) {
  const int64_t H = cache_in.present() ? cache_in.size(2) : 0;
  if (k >= 0) {
    const char* p = static_cast<const char*>(x.data) +
                    (s.b * x.strides[0] + (s.t0 + k) * x.strides[1] + c0) * int64_t(x.element_size());
    load_f32(p, x.dtype, cb, dst);
  } else if (cache_in.present() && H + k >= 0) {
    load_strided(cache_in.data, cache_in.dtype, cache_off(cache_in, s.cache_row, c0, H + k), cache_in.strides[1], cb, dst);
  } else {
    std::fill(dst, dst + cb, 0.f);
  }
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
  // Phase 1 tasks: every (sequence, token chunk), times nblk channel blocks.
  struct Chunk {
    int64_t seq, t_begin, t_end;
  };
  std::vector<Chunk> chunks;
  for (size_t n = 0; n < seqs.size(); ++n)
    for (int64_t t = 0; t < seqs[n].len; t += kChunk) chunks.push_back({int64_t(n), t, std::min(seqs[n].len, t + kChunk)});
  const int64_t ntask = int64_t(chunks.size()) * nblk;
  const bool silu = act == ConvActivation::silu;
  const int64_t yes = int64_t(y.element_size());

#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> ring(static_cast<size_t>(W * kBlock)), out(static_cast<size_t>(kBlock));
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < ntask; ++task) {
      const Chunk& ch = chunks[size_t(task / nblk)];
      const ConvSeq& s = seqs[size_t(ch.seq)];
      const int64_t c0 = (task % nblk) * kBlock, cb = std::min(kBlock, C - c0);
      // Ring position p holds input t_begin - H + p in slot p % W; positions 0 .. H-1 are the history.
      for (int64_t j = 0; j < H; ++j) load_input(x, cache_in, s, ch.t_begin - H + j, c0, cb, ring.data() + j * kBlock);
      int64_t p = H;
      for (int64_t t = ch.t_begin; t < ch.t_end; ++t, ++p) {
        // Read x[t] before y[t] (which may be x[t]) is written.
        load_input(x, cache_in, s, t, c0, cb, ring.data() + (p % W) * kBlock);
        float* o = out.data();
        std::fill(o, o + cb, 0.f);
        for (int64_t j = 0; j < W; ++j) {  // fixed tap order
          const float* r = ring.data() + ((p - H + j) % W) * kBlock;
          const float* wj = wt.data() + j * C + c0;
          for (int64_t c = 0; c < cb; ++c) o[c] += wj[c] * r[c];
        }
        if (silu) silu_inplace(o, cb);
        char* yp = static_cast<char*>(y.data) + (s.b * y.strides[0] + (s.t0 + t) * y.strides[1] + c0) * yes;
        store_f32(yp, y.dtype, cb, o);
      }
    }
    // Phase 2 (after the barrier above): the last H inputs of each sequence, oldest first; they include
    // old cache entries when the sequence is shorter than H.
    if (cache_out.present() && H > 0) {
      const int64_t ntask2 = int64_t(seqs.size()) * nblk;
#pragma omp for schedule(static)
      for (int64_t task = 0; task < ntask2; ++task) {
        const ConvSeq& s = seqs[size_t(task / nblk)];
        const int64_t c0 = (task % nblk) * kBlock, cb = std::min(kBlock, C - c0);
        for (int64_t j = 0; j < H; ++j) load_input(x, cache_in, s, s.len - H + j, c0, cb, ring.data() + j * kBlock);
        for (int64_t j = 0; j < H; ++j)
          store_strided(cache_out.data, cache_out.dtype, cache_off(cache_out, s.cache_row, c0, j), cache_out.strides[1],
                        cb, ring.data() + j * kBlock);
      }
    }
  }
}

}  // namespace kimi::cpu
