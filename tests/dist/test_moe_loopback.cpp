// tests/dist/test_moe_loopback.cpp: dist::EpMoe on the loopback transport (world size 1) equals latent_moe; bad
// arguments are clear errors. The multi-rank cases run under mpirun (test_mpi_moe.cpp).
#include <gtest/gtest.h>

#include "dist/ep_moe_case.h"
#include "dist/model.h"
#include "dist/qb_case.h"
#include "expect_error.h"
#include "kimi/model/generate.h"

namespace kimi::dist {
namespace {

TEST(EpMoeLoopback, K3TinyEqualsLatentMoe) {
  auto comm = make_loopback_comm();
  testutil::run_ep_moe_case(*comm, "k3-tiny", false);
}
TEST(EpMoeLoopback, KimiLinearTinySkewed) {
  auto comm = make_loopback_comm();
  testutil::run_ep_moe_case(*comm, "kimi-linear-tiny", true);
}

TEST(EpMoeLoopback, BadArgumentsAreClearErrors) {
  auto comm = make_loopback_comm();
  testutil::EpMoeModel m = testutil::make_ep_moe_model("k3-tiny", false);
  EXPECT_KIMI_ERROR(EpMoe(*comm, Placement::round_robin(2, 16), m.w, m.router, m.act, 1e-5f, 4), "dist::EpMoe",
                    "'placement'", "expected 1 ranks", "got 2");
  EXPECT_KIMI_ERROR(EpMoe(*comm, Placement::round_robin(1, 8), m.w, m.router, m.act, 1e-5f, 4), "'placement'",
                    "16 experts", "got 8");
  EpMoe ep(*comm, Placement::round_robin(1, 16), m.w, m.router, m.act, 1e-5f, 4);
  Tensor x(DType::f32, {5, m.d}), out(DType::f32, {5, m.d});
  EXPECT_KIMI_ERROR(ep.forward(x, out), "dist::EpMoe::forward", "'x'", "T <= max_tokens (4)", "[5, 256]");
}

TEST(QuantileBalanceLoopback, MatchesTheExactUpdate) {
  auto comm = make_loopback_comm();
  testutil::run_qb_case(*comm, 16, 4, 4096);
  testutil::run_qb_case(*comm, 896, 16, 4096);
}

TEST(QuantileBalanceLoopback, BadArgumentsAreClearErrors) {
  auto comm = make_loopback_comm();
  std::vector<float> s(32), b(8), b7(7);
  const TensorView sv(s.data(), DType::f32, {4, 8});
  EXPECT_KIMI_ERROR(quantile_balance(*comm, sv, TensorView(b7.data(), DType::f32, {7}), 2), "dist::quantile_balance",
                    "'bias'", "[8]", "[7]");
  EXPECT_KIMI_ERROR(quantile_balance(*comm, sv, TensorView(b.data(), DType::f32, {8}), 8), "'top_k'", "< 8", "got 8");
  EXPECT_KIMI_ERROR(quantile_balance(*comm, sv, TensorView(b.data(), DType::f32, {8}), 2, 0), "'bins'", "got 0");
}

// generate() at world size 1 through EpModel equals plain generate(); a partial EP binding is refused.
TEST(EpModelLoopback, GenerateEqualsPlainAndPartialBindingIsAnError) {
  auto comm = make_loopback_comm();
  const model::Model m = model::Model::random(model::named_config("kimi-linear-tiny"), Device::cpu(), 3);
  const std::vector<std::vector<int32_t>> prompts{{1, 2, 3, 4}, {9, 8}};
  model::GenerateOptions opt;
  opt.max_new_tokens = 4;
  const model::GenerateResult ref = model::generate(m, prompts, opt);
  EpModel ep(*comm, m, 6);
  model::GenerateLockstep lockstep = ep.lockstep();
  EXPECT_EQ(model::generate(m, prompts, opt, {}, &lockstep).tokens, ref.tokens);
  lockstep.idle = nullptr;
  EXPECT_KIMI_ERROR(model::generate(m, prompts, opt, {}, &lockstep), "generate: ep:",
                    "expected moe, any_active and idle all set", "idle unset");
}

}  // namespace
}  // namespace kimi::dist
