// bench/cuda/bench_state_stream.cu: how fast can a decode step stream its recurrent state? The structures a KDA
// decode kernel can take for its in-place update of one fp32 block per (sequence, head) (64 KB at K = V = 128),
// measured without the decode's math, on the same pool (256 x 32 heads = 512 MB, far beyond L2), beside
// cudaMemcpy of the same bytes. Each item: the block read, a model of the per-element work (one shared-memory
// read-modify-write pass, `work` extra FMAs per element), the block written back in place; optionally a model of the
// decode's prologue, `chain` dependent global loads from a 64 MB table (the slot, the inputs, the conv cache).
//   bulk:  one CTA per item, 512 threads, the block through shared memory by the bulk copy engine (4 copies of
//          16 KB on one mbarrier), stored back by bulk copies: decode_step.cuh's streaming kernels (3 CTAs / SM).
//   ring:  persistent, `ctas` per SM, each CTA a ring of NBUF block buffers: item k + NBUF - 1 is loaded while
//          item k is computed, its buffer refilled once item k - 1's store has read it.
//   regs:  one CTA per item, each thread's 32 floats by 16-byte global loads into registers and back.
// Output: one line per structure, TB/s of bytes read + written and the fraction of BENCH.md's copy ceiling.
// Usage: kimi_bench_state_stream [item KB = 64] [work = 4] [chain = 0]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/bulk_copy.cuh"

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

namespace {

using namespace kimi::cuda;

constexpr int kThreads = 512;
constexpr int kPiece = 16 * 1024;
constexpr double kCopyBytesPerS = 4.25e12;  // BENCH.md: H200 device-to-device copy, read + written

struct Args {
  float* pool;          // items x item_bytes
  int items, item_bytes;
  int work, chain;
  const int* table;     // 16 M ints, a random cycle
};

// `chain` dependent loads (each address from the previous value): the prologue's memory round trips.
__device__ __forceinline__ int prologue(const Args& a, int item) {
  int x = item * 7919 & ((1 << 24) - 1);
  for (int c = 0; c < a.chain; ++c) x = __ldcg(a.table + x);
  return x;
}

// The constant of update4, from the prologue's result, so that the prologue's loads are not dead code.
__device__ __forceinline__ float update_constant(int seed) { return seed == -1 ? 1.f : 1e-3f; }
// The model of the per-element work on 4 elements: their sum through `work` FMAs, reduced over the warp (the
// decode's dot products), then one FMA each.
__device__ __forceinline__ void update4(float4& v, int work, float c) {
  const float m = 0.999f;
  float s = v.x + v.y + v.z + v.w;
  for (int w = 0; w < work; ++w) s = fmaf(s, m, c);
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  v.x = fmaf(v.x, m, s * 1e-9f), v.y = fmaf(v.y, m, c), v.z = fmaf(v.z, m, c), v.w = fmaf(v.w, m, c);
}

// All threads: one read-modify-write pass over the block in shared memory (update4 on each 16 bytes).
__device__ __forceinline__ void compute(float* buf, int floats, int work, int seed) {
  const float c = update_constant(seed);
  for (int i = 4 * threadIdx.x; i < floats; i += 4 * kThreads) {
    float4 v = *reinterpret_cast<float4*>(buf + i);
    update4(v, work, c);
    *reinterpret_cast<float4*>(buf + i) = v;
  }
}

__device__ __forceinline__ void load_item(const Args& a, char* buf, int item, uint64_t* bar) {
  mbar_expect_tx(bar, uint32_t(a.item_bytes));
  const char* src = reinterpret_cast<const char*>(a.pool) + size_t(item) * a.item_bytes;
  for (int off = 0; off < a.item_bytes; off += kPiece) bulk_g2s(buf + off, src + off, kPiece, bar);
}
__device__ __forceinline__ void store_item(const Args& a, const char* buf, int item) {
  char* dst = reinterpret_cast<char*>(a.pool) + size_t(item) * a.item_bytes;
  for (int off = 0; off < a.item_bytes; off += kPiece) bulk_s2g(dst + off, buf + off, kPiece);
  bulk_commit();
}

extern __shared__ __align__(128) char dyn[];

__global__ void __launch_bounds__(kThreads, 3) bulk_kernel(const Args a) {
  __shared__ uint64_t bar;
  const int item = blockIdx.x;
  if (threadIdx.x == 0) {
    mbar_init(&bar, 1);
    mbar_init_fence();
    load_item(a, dyn, item, &bar);
  }
  const int seed = prologue(a, item);
  __syncthreads();
  mbar_wait(&bar, 0);
  compute(reinterpret_cast<float*>(dyn), a.item_bytes / 4, a.work, seed);
  fence_proxy_async();
  __syncthreads();
  if (threadIdx.x == 0) {
    store_item(a, dyn, item);
    bulk_wait_read();
  }
}

template <int NBUF>
__global__ void __launch_bounds__(kThreads, 1) ring_kernel(const Args a) {
  __shared__ uint64_t full[NBUF];
  const int mine = (a.items - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x);  // items blockIdx.x + k grid
  auto item_of = [&](int k) { return int(blockIdx.x) + k * int(gridDim.x); };
  if (threadIdx.x == 0) {
    for (int b = 0; b < NBUF; ++b) mbar_init(&full[b], 1);
    mbar_init_fence();
    for (int k = 0; k < NBUF - 1 && k < mine; ++k) load_item(a, dyn + size_t(k) * a.item_bytes, item_of(k), &full[k]);
  }
  __syncthreads();
  for (int k = 0; k < mine; ++k) {
    const int b = k % NBUF;
    char* buf = dyn + size_t(b) * a.item_bytes;
    const int seed = prologue(a, item_of(k));
    mbar_wait(&full[b], uint32_t(k / NBUF) & 1u);
    compute(reinterpret_cast<float*>(buf), a.item_bytes / 4, a.work, seed);
    fence_proxy_async();
    __syncthreads();
    if (threadIdx.x == 0) {
      store_item(a, buf, item_of(k));
      const int next = k + NBUF - 1;  // into buffer (k - 1) % NBUF, once item k - 1's store has read it
      if (next < mine) {
        asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
        load_item(a, dyn + size_t(next % NBUF) * a.item_bytes, item_of(next), &full[next % NBUF]);
      }
    }
  }
  if (threadIdx.x == 0) bulk_wait_read();
}

__global__ void __launch_bounds__(kThreads, 3) regs_kernel(const Args a) {
  constexpr int kMax = 8;  // float4 per thread: 64 KB items only
  float4* blk = reinterpret_cast<float4*>(reinterpret_cast<char*>(a.pool) + size_t(blockIdx.x) * a.item_bytes);
  float4 v[kMax];
#pragma unroll
  for (int i = 0; i < kMax; ++i) v[i] = __ldcs(blk + threadIdx.x + i * kThreads);
  const float c = update_constant(prologue(a, blockIdx.x));
#pragma unroll
  for (int i = 0; i < kMax; ++i) update4(v[i], a.work, c);
#pragma unroll
  for (int i = 0; i < kMax; ++i) __stcs(blk + threadIdx.x + i * kThreads, v[i]);
}

template <class F>
double median_ms(F&& launch, int reps = 15) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  launch();  // warm-up
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void report(const char* name, double bytes, double ms) {
  const double tbs = bytes / (ms * 1e-3) / 1e12;
  std::printf("%-34s %8.1f us  %5.2f TB/s  %5.1f%% of copy\n", name, ms * 1e3, tbs, 100 * tbs * 1e12 / kCopyBytesPerS);
}

}  // namespace

int main(int argc, char** argv) {
  const int item_kb = argc > 1 ? std::atoi(argv[1]) : 64;
  const int work = argc > 2 ? std::atoi(argv[2]) : 4;
  const int chain = argc > 3 ? std::atoi(argv[3]) : 0;
  const size_t pool_bytes = size_t(512) << 20;
  Args a{};
  a.item_bytes = item_kb * 1024;
  a.items = int(pool_bytes / a.item_bytes);
  a.work = work;
  a.chain = chain;
  if (item_kb % 16 || item_kb > 64) {
    std::fprintf(stderr, "item KB: expected a multiple of 16 up to 64, got %d\n", item_kb);
    return 2;
  }
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* other = nullptr;
  int* table = nullptr;
  CK(cudaMalloc(&a.pool, pool_bytes));
  CK(cudaMalloc(&other, pool_bytes));
  CK(cudaMemset(a.pool, 0, pool_bytes));
  {
    const int n = 1 << 24;
    std::vector<int> h(n);
    for (int i = 0; i < n; ++i) h[i] = int((int64_t(i) * 48271 + 12345) % n);
    CK(cudaMalloc(&table, size_t(n) * 4));
    CK(cudaMemcpy(table, h.data(), size_t(n) * 4, cudaMemcpyHostToDevice));
    a.table = table;
  }
  const double bytes = 2.0 * double(pool_bytes);
  std::printf("state stream: %d items of %d KB, work %d, chain %d, %d SMs\n", a.items, item_kb, work, chain, sms);
  report("cudaMemcpy D2D", bytes, median_ms([&] { CK(cudaMemcpyAsync(other, a.pool, pool_bytes,
                                                                        cudaMemcpyDeviceToDevice)); }));
  if (item_kb == 64)
    report("regs: 1 CTA / item", bytes, median_ms([&] { regs_kernel<<<a.items, kThreads>>>(a); }));
  CK(cudaFuncSetAttribute(bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, a.item_bytes));
  report("bulk: 1 CTA / item", bytes, median_ms([&] { bulk_kernel<<<a.items, kThreads, a.item_bytes>>>(a); }));
  auto ring = [&](auto kernel, int nbuf, int per_sm) {
    const int smem = nbuf * a.item_bytes;
    if (smem > 227 * 1024 || per_sm * (smem + 1024) > 228 * 1024) return;
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    char name[64];
    std::snprintf(name, sizeof name, "ring: %d x %d KB, %d CTA / SM", nbuf, item_kb, per_sm);
    report(name, bytes, median_ms([&] { kernel<<<sms * per_sm, kThreads, smem>>>(a); }));
  };
  ring(ring_kernel<2>, 2, 1);
  ring(ring_kernel<3>, 3, 1);
  ring(ring_kernel<4>, 4, 1);
  ring(ring_kernel<6>, 6, 1);
  ring(ring_kernel<2>, 2, 2);
  ring(ring_kernel<3>, 3, 2);
  ring(ring_kernel<2>, 2, 3);
  ring(ring_kernel<3>, 3, 3);
  CK(cudaFree(a.pool));
  CK(cudaFree(other));
  CK(cudaFree(table));
  return 0;
}
