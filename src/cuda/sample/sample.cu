// CUDA sampling (kimi/ops/sample.h): one block per row, no sort. The row is read in passes (from L2 / HBM; nothing
// is written but the token):
//   1. max, argmax (lowest id) and NaN check: the greedy answer, and m for the weights.
//   2. top-k (0 < top_k < V): radix select of the K-th largest order key kk, 8 bits per pass (4 passes): a 256-bin
//      histogram of the next byte among the keys matching the bytes chosen so far, then the highest bin where the
//      count of larger keys reaches K. gt = #keys > kk; the K - gt lowest ids with key kk are candidates.
//   3. top-p (top_p < 1): the same radix select over the integer weights (core/sample_math.h) of the candidates:
//      the largest key kp whose candidates' mass at or above it reaches need; the first level's histogram total is
//      Z. The key-kk candidates are left out of the histograms and their mass (K - gt) * w(kk) added to kk's bin.
//      The kept set is {key > kp} plus the q lowest ids with key kp, q = ceil((need - mass above kp) / w(kp)).
//   4. inverse CDF in id order: each thread owns a contiguous chunk of ids; block scans of the chunks' boundary-tie
//      counts (which tie ids are kept) and of their kept mass give W and each chunk's start; the thread whose chunk
//      holds t = floor(h * W / 2^64) walks it to the token.
// All sums are integers (shared-memory atomics are then order-independent), every float step is core/sample_math.h's,
// so the token is the CPU backend's, and a graph replay's, bit for bit.
#include <cub/block/block_scan.cuh>

#include <cfloat>
#include <climits>

#include "core/sample_math.h"
#include "cuda/check.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/sample/sample.h"

namespace kimi::cuda {
namespace {

namespace sm = sample_math;
using u64 = unsigned long long;
constexpr int kThreads = 512, kWarps = kThreads / 32;

struct Args {
  const char* logits;
  int type;
  int64_t row_bytes, V;
  const float* temperature;
  const int32_t* top_k;
  const float* top_p;
  const int64_t *seed, *sequence, *step;
  int64_t st, sk, sp, ss, sq, sn;  // the parameters' strides (elements)
  int32_t* tokens;
};

struct Shared {
  u64 hist[256];
  u64 pick_above;
  uint32_t pick_bin;
  u64 total;
  float best[kWarps];
  int best_id[kWarps];
  int nan[kWarps];
  typename cub::BlockScan<u64, kThreads>::TempStorage scan;
};

// Warp 0: the highest bin b with above + sum(hist[b..255]) >= target (one exists); returns it and the new `above`
// (above + sum(hist[b+1..255])) in sh.pick_bin / sh.pick_above. Called by every thread; synchronizes.
__device__ void pick_bin(Shared& sh, u64 above, u64 target) {
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = int(threadIdx.x);
    u64 mine = 0;
    for (int b = 0; b < 8; ++b) mine += sh.hist[lane * 8 + b];
    u64 suffix = mine;  // sum over lanes >= lane
    for (int off = 1; off < 32; off <<= 1) {
      const u64 v = __shfl_down_sync(0xffffffffu, suffix, off);
      if (lane + off < 32) suffix += v;
    }
    const unsigned ok = __ballot_sync(0xffffffffu, above + suffix >= target);
    if (lane == 31 - __clz(int(ok))) {
      u64 cum = above + suffix - mine;
      for (int b = lane * 8 + 7; b >= lane * 8; --b) {
        if (cum + sh.hist[b] >= target) {
          sh.pick_bin = uint32_t(b);
          sh.pick_above = cum;
          break;
        }
        cum += sh.hist[b];
      }
    }
  }
  __syncthreads();
}

__device__ void clear_hist(Shared& sh) {
  for (int b = int(threadIdx.x); b < 256; b += kThreads) sh.hist[b] = 0;
  __syncthreads();
}

// Every thread: the sum of the 256 bins (warp 0 adds them, then a broadcast).
__device__ u64 hist_total(Shared& sh) {
  __syncthreads();
  if (threadIdx.x < 32) {
    u64 s = 0;
    for (int b = 0; b < 8; ++b) s += sh.hist[threadIdx.x * 8 + b];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (threadIdx.x == 0) sh.total = s;
  }
  __syncthreads();
  return sh.total;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(Args a) {
  __shared__ Shared sh;
  const int64_t n = blockIdx.x, V = a.V;
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const void* row = a.logits + n * a.row_bytes;
  auto x_at = [&](int64_t i) { return load_f32(row, i, a.type); };
  const float T = a.temperature[n * a.st], p = a.top_p[n * a.sp];
  const int32_t k = a.top_k[n * a.sk];

  // 1. max, lowest argmax, NaN.
  float best = -INFINITY;
  int best_id = INT_MAX, nan = 0;
  for (int64_t i = tid; i < V; i += kThreads) {
    const float x = x_at(i);
    if (x != x) nan = 1;
    else if (x > best || best_id == INT_MAX) best = x, best_id = int(i);
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float ob = __shfl_down_sync(0xffffffffu, best, off);
    const int oi = __shfl_down_sync(0xffffffffu, best_id, off);
    if (ob > best || (ob == best && oi < best_id)) best = ob, best_id = oi;
  }
  nan = __any_sync(0xffffffffu, nan);
  if (lane == 0) sh.best[warp] = best, sh.best_id[warp] = best_id, sh.nan[warp] = nan;
  __syncthreads();
  best = sh.best[0], best_id = sh.best_id[0], nan = sh.nan[0];
  for (int w = 1; w < kWarps; ++w) {
    nan |= sh.nan[w];
    if (sh.best[w] > best || (sh.best[w] == best && sh.best_id[w] < best_id)) best = sh.best[w], best_id = sh.best_id[w];
  }
  const float m = best;
  const bool bad = nan || !(m >= -FLT_MAX && m <= FLT_MAX) || !(T >= 0.f && T <= FLT_MAX) || k < 0 || !(p > 0.f && p <= 1.f);
  if (bad || T == 0.f) {
    if (tid == 0) a.tokens[n] = bad ? -1 : best_id;
    return;
  }

  // 2. top-k: kk, the K-th largest key, and how many of its ties are candidates.
  const int64_t K = k > 0 && k < V ? k : V;
  const bool cut_k = K < V;
  uint32_t kk = 0;
  u64 tie_k = 0;
  if (cut_k) {
    uint32_t prefix = 0, mask = 0;
    u64 above = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      clear_hist(sh);
      for (int64_t i = tid; i < V; i += kThreads) {
        const uint32_t key = sm::order_key(x_at(i));
        if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & 255u], 1ull);
      }
      pick_bin(sh, above, u64(K));
      above = sh.pick_above;
      prefix |= sh.pick_bin << shift, mask |= 255u << shift;
    }
    kk = prefix;
    tie_k = u64(K) - above;
  }

  // 3. top-p: kp and its tie allowance; without it the cut is kk (or nothing).
  uint32_t cut = cut_k ? kk : 0u;
  u64 allow = cut_k ? tie_k : u64(V);
  if (p < 1.f) {
    const u64 tie_mass = cut_k ? tie_k * sm::weight(sm::key_logit(kk), m, T) : 0;
    uint32_t prefix = 0, mask = 0;
    u64 above = 0, need = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      clear_hist(sh);
      for (int64_t i = tid; i < V; i += kThreads) {
        const float x = x_at(i);
        const uint32_t key = sm::order_key(x);
        if ((cut_k && key <= kk) || (key & mask) != prefix) continue;
        const u64 w = sm::weight(x, m, T);
        if (w) atomicAdd(&sh.hist[(key >> shift) & 255u], w);
      }
      __syncthreads();
      if (tid == 0 && cut_k && (kk & mask) == prefix) sh.hist[(kk >> shift) & 255u] += tie_mass;
      if (shift == 24) need = sm::nucleus_need(p, hist_total(sh));
      pick_bin(sh, above, need);
      above = sh.pick_above;
      prefix |= sh.pick_bin << shift, mask |= 255u << shift;
    }
    cut = prefix;
    const u64 w = sm::weight(sm::key_logit(cut), m, T);
    allow = (need - above + w - 1) / w;
  }

  // 4. inverse CDF over the kept tokens in id order.
  const u64 w_cut = sm::weight(sm::key_logit(cut), m, T);
  const int64_t chunk = (V + kThreads - 1) / kThreads, lo = min(V, tid * chunk), hi = min(V, lo + chunk);
  u64 mass = 0, ties = 0;
  for (int64_t i = lo; i < hi; ++i) {
    const float x = x_at(i);
    const uint32_t key = sm::order_key(x);
    if (key > cut) mass += sm::weight(x, m, T);
    else if (key == cut) ++ties;
  }
  using Scan = cub::BlockScan<u64, kThreads>;
  u64 ties_before = 0, mass_before = 0, total = 0;
  Scan(sh.scan).ExclusiveSum(ties, ties_before);
  const u64 kept_ties = ties_before >= allow ? 0 : min(ties, allow - ties_before);
  mass += kept_ties * w_cut;
  __syncthreads();
  Scan(sh.scan).ExclusiveSum(mass, mass_before, total);
  const u64 h = sm::draw(uint64_t(a.seed[n * a.ss]), uint64_t(a.sequence[n * a.sq]), uint64_t(a.step[n * a.sn]));
  const u64 t = sm::scale_draw(h, total);
  if (mass_before <= t && t < mass_before + mass) {
    u64 cum = mass_before, rank = ties_before;
    for (int64_t i = lo; i < hi; ++i) {
      const float x = x_at(i);
      const uint32_t key = sm::order_key(x);
      u64 w = 0;
      if (key > cut) {
        w = sm::weight(x, m, T);
      } else if (key == cut) {
        w = rank < allow ? w_cut : 0;
        ++rank;
      }
      if ((cum += w) > t) {
        a.tokens[n] = int32_t(i);
        return;
      }
    }
  }
}

}  // namespace

void sample_tokens(TensorView logits, const SampleParams& params, TensorView tokens, const Context& ctx) {
  const int64_t N = logits.size(0);
  if (N == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(ctx.cuda_stream);
  const DeviceGuard device_guard(logits.device.index);
  Args a;
  a.logits = static_cast<const char*>(logits.data);
  a.type = elem_type(logits.dtype);
  a.row_bytes = logits.stride(0) * int64_t(logits.element_size());
  a.V = logits.size(1);
  a.temperature = static_cast<const float*>(params.temperature.data), a.st = params.temperature.stride(0);
  a.top_k = static_cast<const int32_t*>(params.top_k.data), a.sk = params.top_k.stride(0);
  a.top_p = static_cast<const float*>(params.top_p.data), a.sp = params.top_p.stride(0);
  a.seed = static_cast<const int64_t*>(params.seed.data), a.ss = params.seed.stride(0);
  a.sequence = static_cast<const int64_t*>(params.sequence.data), a.sq = params.sequence.stride(0);
  a.step = static_cast<const int64_t*>(params.step.data), a.sn = params.step.stride(0);
  a.tokens = static_cast<int32_t*>(tokens.data);
  sample_kernel<<<unsigned(N), kThreads, 0, s>>>(a);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::cuda
