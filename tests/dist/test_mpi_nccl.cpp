// tests/dist/test_mpi_nccl.cpp (under mpirun, CUDA builds with NCCL): the NCCL transport bootstrapped through the
// MPI comm, each rank on device rank mod the visible count, against the MPI comm's results on the same data
// (tests/dist/nccl_case.h); a rank that skips a collective makes the other's wait end in a timeout error, not a hang;
// a setup error on one rank is an error on every rank.
// N ranks need N GPUs (NCCL refuses two ranks on one device): with fewer the tests skip and say so.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "dist/mpi_world.h"
#include "dist/nccl_case.h"
#include "expect_error.h"
#include "kimi/device.h"

namespace kimi::dist {
namespace {

// Every rank reaches the same verdict (the device count is the node's), so no rank is left in a collective.
#define KIMI_NEEDS_ONE_GPU_PER_RANK(comm)                                                                       \
  if (cuda_device_count() < (comm).size())                                                                      \
  GTEST_SKIP() << "not run: " << (comm).size() << " ranks need " << (comm).size() << " CUDA devices, "          \
               << cuda_device_count() << " visible (runs in a session with >= " << (comm).size() << " GPUs)"

TEST(MpiNccl, CollectivesEqualMpi) {
  Comm& mpi = testutil::world();
  KIMI_NEEDS_ONE_GPU_PER_RANK(mpi);
  // The test's buffers on the device the comm picks (rank mod count).
  ASSERT_EQ(cudaSetDevice(mpi.rank() % cuda_device_count()), cudaSuccess);
  auto nccl = make_nccl_comm(mpi, {.timeout_s = 120.0});
  EXPECT_EQ(nccl->rank(), mpi.rank());
  EXPECT_EQ(nccl->size(), mpi.size());
  testutil::nccl_round_trips(*nccl, mpi);
  // Twice over the same comm: no state leaks from one round to the next.
  testutil::nccl_round_trips(*nccl, mpi);
}

TEST(MpiNccl, MissingPeerIsATimeoutError) {
  Comm& mpi = testutil::world();
  if (mpi.size() < 2) GTEST_SKIP() << "not run: needs >= 2 ranks (a peer that does not call)";
  KIMI_NEEDS_ONE_GPU_PER_RANK(mpi);
  ASSERT_EQ(cudaSetDevice(mpi.rank() % cuda_device_count()), cudaSuccess);
  {
    auto nccl = make_nccl_comm(mpi, {.timeout_s = 5.0});
    nccl->barrier();  // connected and healthy
    if (mpi.rank() == 0) {
      // Rank 0 all-reduces alone: the enqueue or the wait must end in an error naming the cause, within the bound.
      testutil::DeviceBytes buf(8 * sizeof(double));
      const auto start = std::chrono::steady_clock::now();
      auto alone = [&] {
        nccl->all_reduce_sum(std::span<double>(static_cast<double*>(buf.p), 8));
        nccl->synchronize();
      };
      EXPECT_KIMI_ERROR(alone(), "dist::nccl", "rank 0 of", "timed out", "communicator was aborted");
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_LT(waited, 30.0) << "the 5 s bound took " << waited << " s";
      EXPECT_KIMI_ERROR(nccl->barrier(), "dist::nccl::barrier", "was aborted");
    }
  }  // the other ranks destroy their comms (a bounded wait too)
  mpi.barrier();
}

TEST(MpiNccl, SetupErrorOnOneRankIsAnErrorOnEvery) {
  Comm& mpi = testutil::world();
  if (mpi.size() < 2) GTEST_SKIP() << "not run: needs >= 2 ranks";
  KIMI_NEEDS_ONE_GPU_PER_RANK(mpi);
  // The last rank asks for a device that does not exist; no rank may be left waiting.
  const bool bad = mpi.rank() == mpi.size() - 1;
  NcclOptions opt{.device = bad ? cuda_device_count() : -1, .timeout_s = 30.0};
  const std::string culprit = "rank " + std::to_string(mpi.size() - 1) + " of";
  if (bad) {
    EXPECT_KIMI_ERROR(make_nccl_comm(mpi, opt), "dist::make_nccl_comm", "'device'");
  } else {
    EXPECT_KIMI_ERROR(make_nccl_comm(mpi, opt), "dist::make_nccl_comm", "could not set up its NCCL transport",
                      culprit.c_str());
  }
  mpi.barrier();
}

}  // namespace
}  // namespace kimi::dist
