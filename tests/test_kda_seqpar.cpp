// Sequence parallelism of the CUDA chunkwise KDA walk (src/cuda/kda/chunk.cuh, "Segments"): runs the harness's
// segment cases (tests/testkit/cases_kda.cpp, shapes with "seg=") on CUDA, prints the relative errors of o and
// of the final state against the fp64 oracle, and checks that the automatic choice ("seg=auto", 1 x 8192 H2)
// takes segments. The harness itself runs the same cases on every device. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cstdio>

#include "kimi/device.h"
#include "testkit/case.h"

#ifdef KIMI_WITH_CUDA
#include "cuda/kda/chunk.h"

namespace kimi::testkit {
namespace {

TEST(CudaKdaSeqPar, SegmentCasesMatchTheOracle) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  int n = 0;
  for (const Case& c : all_cases(Scale::test)) {
    if (c.op != "kda_chunk_fwd" || c.shape.find(" seg=") == std::string::npos) continue;
    ++n;
    const Result r = c.run(Device::cuda(0));
    const int64_t len = cuda::kda_chunk_last_segment_chunks();
    std::printf("[seqpar] %-70s segment chunks %3lld  err %.3g %s\n", c.shape.c_str(), static_cast<long long>(len),
                r.err, r.detail.c_str());
    SCOPED_TRACE(c.shape + " " + r.detail);
    EXPECT_TRUE(r.finite);
    EXPECT_TRUE(r.guards_ok);
    EXPECT_LE(r.err, c.tol);
    EXPECT_GT(len, 0) << "the segmented path did not run";
  }
  EXPECT_GE(n, 7);
}

}  // namespace
}  // namespace kimi::testkit
#endif
