// tests/dist/mpi_main.cpp: gtest main for the tests that run under mpirun: one MPI transport for the process
// (tests reach it through testutil::world()); only rank 0 prints the gtest progress, every rank prints its
// failures, and the exit code is nonzero on any rank's failure (mpirun then returns nonzero).
#include <gtest/gtest.h>

#include "dist/mpi_world.h"

namespace kimi::testutil {
namespace {
dist::Comm* g_world = nullptr;
}
dist::Comm& world() { return *g_world; }
}  // namespace kimi::testutil

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = kimi::dist::make_mpi_comm();
  kimi::testutil::g_world = comm.get();
  if (comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  // Every rank's verdict: nonzero when any rank failed.
  int64_t failed = rc != 0 ? 1 : 0;
  comm->all_reduce_sum(std::span<int64_t>(&failed, 1));
  if (comm->rank() == 0) std::printf("[ranks] %d ranks, %lld failed\n", comm->size(), static_cast<long long>(failed));
  return failed ? 1 : 0;
}
