// tests/dist/nccl_case.h: the NCCL transport against a host transport on the same data. Every rank builds its inputs
// from (rank, case) alone; each collective runs on the host comm over host vectors (loopback or MPI: the reference)
// and on the NCCL comm over device copies (enqueued on its stream, then copied back after synchronize()), and the
// results must be equal bit for bit (the f64 sums too: at most 2 ranks here, and a + b == b + a).
//   all_gather      37 bytes per rank (odd), and 0 bytes
//   all_to_all_v    rows of 12 bytes; rank s sends block_rows(s, d, round) rows to rank d, zeros included; blocks sit
//                   at scattered displacements (a gap row between blocks, receive blocks in reverse peer order) and
//                   the rows no block covers must keep their sentinel bytes
//   all_reduce_sum  f64 and i64, 1000 values and 1
// Needs a CUDA device for the NCCL comm's rank (the callers skip without one).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "dist/comm.h"

namespace kimi::testutil {

#define KIMI_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// A device copy of host bytes (freed on scope exit).
struct DeviceBytes {
  void* p = nullptr;
  size_t n = 0;
  explicit DeviceBytes(size_t bytes) : n(bytes) {
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) p = nullptr;
  }
  ~DeviceBytes() { cudaFree(p); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
};

// Host -> device on `s`, the collective, device -> host on `s`, then the comm's synchronize: the copies and the
// collective are ordered by the stream alone.
inline void upload(cudaStream_t s, DeviceBytes& d, const void* h, size_t bytes) {
  ASSERT_NE(d.p, nullptr);
  if (bytes) {
    KIMI_CUDA_OK(cudaMemcpyAsync(d.p, h, bytes, cudaMemcpyHostToDevice, s));
  }
}
inline void download(cudaStream_t s, void* h, const DeviceBytes& d, size_t bytes) {
  if (bytes) {
    KIMI_CUDA_OK(cudaMemcpyAsync(h, d.p, bytes, cudaMemcpyDeviceToHost, s));
  }
}

inline std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

// Rows rank s sends to rank d in a round: 0..5, zero for some (s, d) pairs in every round.
inline int64_t block_rows(int s, int d, int round) { return (s * 7 + d * 3 + round * 5) % 6; }

inline void nccl_all_gather_case(dist::Comm& nccl, dist::Comm& ref, size_t bytes) {
  const int n = ref.size(), me = ref.rank();
  ASSERT_EQ(nccl.size(), n);
  ASSERT_EQ(nccl.rank(), me);
  auto s = static_cast<cudaStream_t>(nccl.cuda_stream());
  const std::vector<uint8_t> send = random_bytes(bytes, 100 + uint64_t(me) * 7 + bytes);
  std::vector<uint8_t> want(bytes * size_t(n), 0xAB), got(bytes * size_t(n), 0xCD);
  ref.all_gather(send.data(), bytes, want.data());
  DeviceBytes dsend(bytes), drecv(bytes * size_t(n));
  upload(s, dsend, send.data(), bytes);
  nccl.all_gather(dsend.p, bytes, drecv.p);
  download(s, got.data(), drecv, got.size());
  nccl.synchronize();
  EXPECT_EQ(got, want) << "all_gather of " << bytes << " bytes on rank " << me;
}

inline void nccl_all_to_all_case(dist::Comm& nccl, dist::Comm& ref, int round) {
  const int n = ref.size(), me = ref.rank();
  constexpr size_t kRow = 12;
  auto s = static_cast<cudaStream_t>(nccl.cuda_stream());
  const auto un = size_t(n);
  std::vector<int64_t> sc(un), sd(un), rc(un), rd(un);
  int64_t at = 1;  // a gap row before every send block
  for (int d = 0; d < n; ++d) {
    sc[size_t(d)] = block_rows(me, d, round);
    sd[size_t(d)] = at;
    at += sc[size_t(d)] + 1;
  }
  const int64_t send_rows = at;
  at = 0;  // receive blocks in reverse peer order, a gap row after each
  for (int p = n - 1; p >= 0; --p) {
    rc[size_t(p)] = block_rows(p, me, round);
    rd[size_t(p)] = at;
    at += rc[size_t(p)] + 1;
  }
  const int64_t recv_rows = at;
  const std::vector<uint8_t> send = random_bytes(size_t(send_rows) * kRow, 500 + uint64_t(me) * 13 + uint64_t(round));
  std::vector<uint8_t> want(size_t(recv_rows) * kRow, 0xEE), got(want.size(), 0x11);
  ref.all_to_all_v(send.data(), sc, sd, want.data(), rc, rd, kRow);
  // The device receive buffer starts as the reference's sentinel, so untouched rows must compare equal.
  const std::vector<uint8_t> sentinel(want.size(), 0xEE);
  DeviceBytes dsend(send.size()), drecv(want.size());
  upload(s, dsend, send.data(), send.size());
  upload(s, drecv, sentinel.data(), sentinel.size());
  nccl.all_to_all_v(dsend.p, sc, sd, drecv.p, rc, rd, kRow);
  download(s, got.data(), drecv, got.size());
  nccl.synchronize();
  EXPECT_EQ(got, want) << "all_to_all_v round " << round << " on rank " << me;
  // The reference really moved rows: every received block holds the sender's bytes (checked on the diagonal).
  const auto self = size_t(me);
  if (sc[self] > 0) {
    EXPECT_EQ(0, std::memcmp(&want[size_t(rd[self]) * kRow], &send[size_t(sd[self]) * kRow], size_t(sc[self]) * kRow));
  }
}

inline void nccl_all_reduce_case(dist::Comm& nccl, dist::Comm& ref, size_t count) {
  const int me = ref.rank();
  auto s = static_cast<cudaStream_t>(nccl.cuda_stream());
  std::mt19937_64 rng(900 + uint64_t(me) * 31 + count);
  std::uniform_real_distribution<double> u(-1e3, 1e3);
  std::vector<double> f(count);
  std::vector<int64_t> i(count);
  for (size_t k = 0; k < count; ++k) {
    f[k] = u(rng);
    i[k] = int64_t(rng() >> 4) - (int64_t(1) << 58);  // large values, both signs
  }
  std::vector<double> fwant = f, fgot(count, 0.0);
  std::vector<int64_t> iwant = i, igot(count, 0);
  ref.all_reduce_sum(std::span<double>(fwant));
  ref.all_reduce_sum(std::span<int64_t>(iwant));
  DeviceBytes df(count * sizeof(double)), di(count * sizeof(int64_t));
  upload(s, df, f.data(), df.n);
  upload(s, di, i.data(), di.n);
  nccl.all_reduce_sum(std::span<double>(static_cast<double*>(df.p), count));
  nccl.all_reduce_sum(std::span<int64_t>(static_cast<int64_t*>(di.p), count));
  download(s, fgot.data(), df, df.n);
  download(s, igot.data(), di, di.n);
  nccl.synchronize();
  for (size_t k = 0; k < count; ++k) {
    ASSERT_EQ(std::memcmp(&fgot[k], &fwant[k], sizeof(double)), 0)
        << "f64 sum [" << k << "]: " << fgot[k] << " vs " << fwant[k] << " on rank " << me;
    ASSERT_EQ(igot[k], iwant[k]) << "i64 sum [" << k << "] on rank " << me;
  }
}

// Every collective of comm.h, then a barrier.
inline void nccl_round_trips(dist::Comm& nccl, dist::Comm& ref) {
  ASSERT_EQ(nccl.memory(), dist::CommMemory::device);
  ASSERT_NE(nccl.cuda_stream(), nullptr);
  nccl_all_gather_case(nccl, ref, 37);
  nccl_all_gather_case(nccl, ref, 0);
  for (int round = 0; round < 6; ++round) nccl_all_to_all_case(nccl, ref, round);
  nccl_all_reduce_case(nccl, ref, 1000);
  nccl_all_reduce_case(nccl, ref, 1);
  nccl.barrier();
}

}  // namespace kimi::testutil
