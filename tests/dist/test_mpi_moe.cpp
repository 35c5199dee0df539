// tests/dist/test_mpi_moe.cpp (under mpirun): dist::EpMoe over MPI equals latent_moe over the whole batch on
// k3-tiny and kimi-linear-tiny shapes, with plain and skewed routing (ep_moe_case.h); mismatched configurations
// between ranks are an error on every rank; holders-only steps with each rank given only its held experts.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "dist/ep_moe_case.h"
#include "dist/qb_case.h"
#include "dist/mpi_world.h"
#include "expect_error.h"

namespace kimi::dist {
namespace {

TEST(MpiEpMoe, K3Tiny) { testutil::run_ep_moe_case(testutil::world(), "k3-tiny", false); }
TEST(MpiEpMoe, K3TinySkewed) {
  const EpStepStats s = testutil::run_ep_moe_case(testutil::world(), "k3-tiny", true);
  EXPECT_GT(s.moved_pairs, 0);  // the hot experts' rank had to give pairs away
}
TEST(MpiEpMoe, K3TinySkewedProfilePlacement) {
  const EpStepStats s = testutil::run_ep_moe_case(testutil::world(), "k3-tiny", true, true);
  const EpStepStats rr = testutil::run_ep_moe_case(testutil::world(), "k3-tiny", true, false);
  EXPECT_LT(s.moved_pairs, rr.moved_pairs);  // replicas of the hot experts: fewer pairs move
}
// Holders-only: each rank is given only its held experts; equal output, loads at the restricted optimum.
TEST(MpiEpMoe, K3TinyHeldExpertsOnly) {
  testutil::run_ep_moe_case(testutil::world(), "k3-tiny", false, false, PlanPolicy::holders_only);
  testutil::run_ep_moe_case(testutil::world(), "k3-tiny", false, true, PlanPolicy::holders_only);
}
TEST(MpiEpMoe, K3TinySkewedHeldExpertsOnly) {
  // Round-robin: no replicas, the hot experts' home computes all their pairs (nothing moves).
  const EpStepStats rr = testutil::run_ep_moe_case(testutil::world(), "k3-tiny", true, false, PlanPolicy::holders_only);
  EXPECT_EQ(rr.moved_pairs, 0);
  EXPECT_EQ(rr.load, rr.home_load);
  // Profile placement with both hot experts replicated: the slowest rank does less than without replicas.
  const EpStepStats pr = testutil::run_ep_moe_case(testutil::world(), "k3-tiny", true, true, PlanPolicy::holders_only);
  EXPECT_LT(*std::max_element(pr.load.begin(), pr.load.end()), *std::max_element(rr.load.begin(), rr.load.end()));
}
TEST(MpiEpMoe, KimiLinearTinySkewedHeldExpertsOnly) {
  testutil::run_ep_moe_case(testutil::world(), "kimi-linear-tiny", true, true, PlanPolicy::holders_only);
}
TEST(MpiEpMoe, HeldExpertMissingIsAnError) {
  Comm& comm = testutil::world();
  testutil::EpMoeModel m = testutil::make_ep_moe_model("k3-tiny", false);
  const Placement pl = Placement::round_robin(comm.size(), 16);
  std::vector<MlpWeights> experts(m.experts.begin(), m.experts.end());
  experts[size_t(comm.rank())] = {};  // rank r homes expert r
  LatentMoeWeights w = m.w;
  w.experts = experts;
  const std::string what = "'w.experts[" + std::to_string(comm.rank()) + "]'";
  EXPECT_KIMI_ERROR(EpMoe(comm, pl, w, m.router, m.act, 1e-5f, 8, PlanPolicy::holders_only), what.c_str(),
                    "holds it", "absent");
}

TEST(MpiEpMoe, KimiLinearTiny) { testutil::run_ep_moe_case(testutil::world(), "kimi-linear-tiny", false); }
TEST(MpiEpMoe, KimiLinearTinySkewed) { testutil::run_ep_moe_case(testutil::world(), "kimi-linear-tiny", true); }

TEST(MpiQuantileBalance, HistogramsMergedAcrossRanksMatchTheExactUpdate) {
  testutil::run_qb_case(testutil::world(), 16, 4, 4096);
  testutil::run_qb_case(testutil::world(), 64, 8, 4096);
  testutil::run_qb_case(testutil::world(), 64, 8, 64);  // coarse bins: the bound still holds
}

TEST(MpiEpMoe, MismatchedConfigsAreErrorsOnEveryRank) {
  Comm& comm = testutil::world();
  testutil::EpMoeModel m = testutil::make_ep_moe_model("k3-tiny", false);
  RouterParams router = m.router;
  if (comm.rank() == comm.size() - 1) router.top_k = 2;  // the last rank loaded another top_k
  const std::string last = "rank " + std::to_string(comm.size() - 1) + " has 2";
  EXPECT_KIMI_ERROR(EpMoe(comm, Placement::round_robin(comm.size(), 16), m.w, router, m.act, 1e-5f, 8),
                    "dist::EpMoe: the configuration differs between ranks", "field 'top_k'", "rank 0 has 4",
                    last.c_str());
  // A different max_tokens on rank 0 only.
  EXPECT_KIMI_ERROR(EpMoe(comm, Placement::round_robin(comm.size(), 16), m.w, m.router, m.act, 1e-5f,
                          comm.rank() == 0 ? 9 : 8),
                    "field 'max_tokens'", "rank 0 has 9", "has 8");
}

}  // namespace
}  // namespace kimi::dist
