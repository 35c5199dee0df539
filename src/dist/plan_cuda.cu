// dist/plan_cuda.cu: the device plan's launches (the phases: dist/plan_cuda.h; the functions: dist/device_plan.h).
#include "dist/plan_cuda.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/grid.cuh"
#include "kimi/error.h"

namespace kimi::dist {

namespace {

using namespace dplan;
constexpr int kThreads = 128;

__global__ void plan_expert_kernel(Dims d, Global g) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < d.e) plan_expert(d, g, int32_t(e));
}
__global__ void plan_serial_kernel(Dims d, Global g) { plan_serial(d, g); }
__global__ void send_block_kernel(Dims d, Global g, Local l) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x < d.n) send_block(d, g, l, int32_t(x));
}
// number[i] for the T*K slots in slot order by one warp: the lanes routed to one expert (__match_any_sync) number
// themselves after that expert's running count, which the highest of them then advances. seen [E] zeroed first.
__global__ void slot_number_kernel(const int32_t* __restrict__ ids, int64_t slots, int32_t* __restrict__ seen,
                                   int32_t* __restrict__ number) {
  const int lane = int(threadIdx.x);
  for (int64_t base = 0; base < slots; base += 32) {
    const int64_t i = base + lane;
    const bool on = i < slots;
    const int32_t e = on ? ids[i] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const int32_t run = on ? seen[e] : 0;
    __syncwarp();
    if (on) {
      number[i] = run + __popc(peers & ((1u << lane) - 1u));
      if (lane == 31 - __clz(peers)) seen[e] = run + __popc(peers);
    }
    __syncwarp();
  }
}
__global__ void send_row_kernel(Dims d, Global g, Local l) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < d.t * d.k) send_row(d, g, l, i);
}
__global__ void expert_rows_kernel(Dims d, Global g, Local l) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < d.e) expert_rows(d, g, l, int32_t(e));
}
__global__ void source_rows_kernel(Dims d, Local l) {
  const int64_t s = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s < d.n) source_rows(d, l, int32_t(s));
}
__global__ void expert_offsets_kernel(Dims d, Global g, Local l) { expert_offsets(d, g, l); }
__global__ void grouped_rows_kernel(Dims d, Local l) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x < int64_t(d.n) * d.e) grouped_rows(d, l, int32_t(x / d.e), int32_t(x % d.e));
}
__global__ void combine_order_kernel(Dims d, Local l) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < d.t) combine_order(d, l, t);
}

unsigned blocks(int64_t items) { return cuda::grid_1d(items, kThreads, "dist::DevicePlan"); }

}  // namespace

DevicePlan::DevicePlan(const Placement& placement, int rank, std::span<const int32_t> resident, int64_t s, int k,
                       int64_t cap, int64_t recv_cap, Device dev) {
  const char* fn = "dist::DevicePlan";
  const cuda::DeviceGuard guard(dev.index);
  dims_.n = placement.ranks;
  dims_.e = placement.experts;
  dims_.k = k;
  dims_.me = rank;
  dims_.r = int32_t(resident.size());
  dims_.cap = cap;
  dims_.recv_cap = recv_cap;
  std::vector<int32_t> hold_start{0}, hold, hold_expert, local_of(size_t(dims_.e), -1);
  for (int32_t e = 0; e < dims_.e; ++e) {
    for (const int32_t r : placement.holders[size_t(e)]) {
      hold.push_back(r);
      hold_expert.push_back(e);
    }
    hold_start.push_back(int32_t(hold.size()));
  }
  for (size_t x = 0; x < resident.size(); ++x) {
    if (resident[x] < 0 || resident[x] >= dims_.e)
      throw Error(std::string(fn) + ": argument 'resident[" + std::to_string(x) + "]': expected an expert in [0, " +
                  std::to_string(dims_.e) + "), got " + std::to_string(resident[x]));
    local_of[size_t(resident[x])] = int32_t(x);
  }
  dims_.h = int64_t(hold.size());
  if (int64_t(dims_.n) * cap > int64_t(INT32_MAX) || recv_cap > int64_t(INT32_MAX))
    throw Error(std::string(fn) + ": arguments 'max_tokens', 'top_k': N * S * K = " +
                std::to_string(int64_t(dims_.n) * cap) + " rows do not fit the i32 row tables (expected < 2^31)");
  const int64_t n = dims_.n, e = dims_.e, h = dims_.h, sk = s * k, r = dims_.r;
  const int64_t shares = max_shares(dims_), segs = max_segments(dims_);
  // i32 arrays, in carve order: placement (3), order, share_first/count, sh_rank, seg_start, seg_rank, seg_moved |
  // local_of, resident, send_count, number, send_row, recv_count, off, grouped_from, comb_slot, seen.
  const int64_t n32 = (e + 1) + 2 * h + h + 2 * h + shares + (e + 1) + 2 * segs + e + r + n + 2 * sk + n + (r + 1) +
                      recv_cap + sk + e;
  // i64 arrays: c, so, home_load, target, load, give, sh_begin/end, seg_begin/end, stats | first, rs, gbase, erows,
  // recv_first.
  const int64_t n64 = e + n * e + 3 * n + h + 2 * shares + 2 * segs + kStats + e * n + 2 * n * e + e + n * e;
  buf32_ = Tensor::uninitialized(DType::i32, {n32}, dev);
  buf64_ = Tensor::uninitialized(DType::i64, {n64}, dev);
  int32_t* p32 = buf32_.data_as<int32_t>();
  int64_t* p64 = buf64_.data_as<int64_t>();
  const auto take32 = [&](int64_t count) { int32_t* p = p32; p32 += count; return p; };
  const auto take64 = [&](int64_t count) { int64_t* p = p64; p64 += count; return p; };
  int32_t* d_hold_start = take32(e + 1);
  int32_t* d_hold = take32(h);
  int32_t* d_hold_expert = take32(h);
  global_.hold_start = d_hold_start;
  global_.hold = d_hold;
  global_.hold_expert = d_hold_expert;
  global_.order = take32(h);
  global_.share_first = take32(h);
  global_.share_count = take32(h);
  global_.sh_rank = take32(shares);
  global_.seg_start = take32(e + 1);
  global_.seg_rank = take32(segs);
  global_.seg_moved = take32(segs);
  int32_t* d_local_of = take32(e);
  int32_t* d_resident = take32(r);
  local_.local_of = d_local_of;
  local_.resident = d_resident;
  local_.send_count = take32(n);
  local_.number = take32(sk);
  local_.send_row = take32(sk);
  local_.recv_count = take32(n);
  local_.off = take32(r + 1);
  local_.grouped_from = take32(recv_cap);
  local_.comb_slot = take32(sk);
  seen_ = take32(e);
  global_.c = take64(e);
  global_.so = take64(n * e);
  global_.home_load = take64(n);
  global_.target = take64(n);
  global_.load = take64(n);
  global_.give = take64(h);
  global_.sh_begin = take64(shares);
  global_.sh_end = take64(shares);
  global_.seg_begin = take64(segs);
  global_.seg_end = take64(segs);
  global_.stats = take64(kStats);
  local_.first = take64(e * n);
  local_.rs = take64(n * e);
  local_.gbase = take64(n * e);
  local_.erows = take64(e);
  local_.recv_first = take64(n * e);
  if (p32 != buf32_.data_as<int32_t>() + n32 || p64 != buf64_.data_as<int64_t>() + n64)
    throw Error(std::string(fn) + ": internal: the table sizes do not add up");
  const auto up = [](int32_t* dst, const std::vector<int32_t>& v) {
    if (!v.empty()) KIMI_CUDA_CHECK(cudaMemcpy(dst, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  };
  up(d_hold_start, hold_start);
  up(d_hold, hold);
  up(d_hold_expert, hold_expert);
  up(d_local_of, local_of);
  up(d_resident, std::vector<int32_t>(resident.begin(), resident.end()));
  // grouped_from past the load is never read by the step; zeroed once so that no table entry is ever undefined.
  KIMI_CUDA_CHECK(cudaMemset(local_.grouped_from, 0, size_t(recv_cap) * 4));
  // NOTE: a pageable upload may still be in flight when cudaMemcpy returns, and the legacy stream does not order
  // the caller's non-blocking streams: wait here, once, before any step reads the tables.
  KIMI_CUDA_CHECK(cudaDeviceSynchronize());
}

void DevicePlan::enqueue(const int32_t* counts, const int32_t* ids, int64_t t, void* stream) {
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  Dims d = dims_;
  d.t = t;
  Global g = global_;
  g.counts = counts;
  Local l = local_;
  l.ids = ids;
  const int64_t slots = t * d.k;
  plan_expert_kernel<<<blocks(d.e), kThreads, 0, st>>>(d, g);
  plan_serial_kernel<<<1, 1, 0, st>>>(d, g);
  send_block_kernel<<<blocks(d.n), kThreads, 0, st>>>(d, g, l);
  KIMI_CUDA_CHECK(cudaMemsetAsync(seen_, 0, size_t(d.e) * 4, st));
  if (slots > 0) {
    slot_number_kernel<<<1, 32, 0, st>>>(ids, slots, seen_, l.number);
    send_row_kernel<<<blocks(slots), kThreads, 0, st>>>(d, g, l);
  }
  expert_rows_kernel<<<blocks(d.e), kThreads, 0, st>>>(d, g, l);
  source_rows_kernel<<<blocks(d.n), kThreads, 0, st>>>(d, l);
  expert_offsets_kernel<<<1, 1, 0, st>>>(d, g, l);
  grouped_rows_kernel<<<blocks(int64_t(d.n) * d.e), kThreads, 0, st>>>(d, l);
  if (t > 0) combine_order_kernel<<<blocks(t), kThreads, 0, st>>>(d, l);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kimi::dist
