// tests/dist/test_mpi_model.cpp (under mpirun): a whole CPU model with its MoE layers under expert parallelism
// (dist::EpModel through ForwardOptions::moe) equals the single-process run. Every rank builds the same random
// k3-tiny / kimi-linear-tiny model; rank r owns 1 + (r % 2) sequences of different lengths (varlen prefill), then
// 3 greedy decode steps. Reference: one process running every rank's sequences as one batch without the hook.
// Checked per step: my sequences' logits within 1e-6 (relative L2 per row) and identical greedy tokens; also with
// each rank keeping only its held experts (PlanPolicy::holders_only).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "dist/model.h"
#include "dist/mpi_world.h"
#include "expect_error.h"
#include "kimi/model/cache.h"
#include "kimi/model/model.h"
#include "model/weights.h"
#include "model_testutil.h"

namespace kimi::dist {
namespace {

struct Seqs {
  std::vector<std::vector<int32_t>> prompts;  // every rank's sequences, rank-major
  std::vector<int> owner;                     // the rank of each
};

// Sequences of ranks 0 .. owners-1.
Seqs make_seqs(int owners, int64_t vocab) {
  Seqs s;
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(vocab - 1));
  for (int r = 0; r < owners; ++r)
    for (int j = 0; j < 1 + r % 2; ++j) {
      std::vector<int32_t> p(size_t(3 + 2 * r + 4 * j));
      for (auto& t : p) t = tok(rng);
      s.prompts.push_back(p);
      s.owner.push_back(r);
    }
  return s;
}

// Runs prefill + `decode` greedy steps over the given sequences; returns each step's logits [N, vocab] (host).
std::vector<Tensor> run(const model::Model& m, const std::vector<std::vector<int32_t>>& prompts, int decode,
                        const model::ForwardOptions& opt) {
  const auto n = int64_t(prompts.size());
  model::Cache cache(m, n, 64);
  std::vector<int32_t> tokens;
  std::vector<int64_t> cu{0}, slots;
  for (int64_t i = 0; i < n; ++i) {
    tokens.insert(tokens.end(), prompts[size_t(i)].begin(), prompts[size_t(i)].end());
    cu.push_back(int64_t(tokens.size()));
    slots.push_back(i);
  }
  std::vector<Tensor> out;
  out.push_back(model::forward(m, cache, {tokens, cu, slots}, opt));
  const int64_t vocab = m.config().vocab_size;
  for (int step = 0; step < decode; ++step) {
    std::vector<int32_t> next(static_cast<size_t>(n));
    std::vector<int64_t> cu1(size_t(n) + 1);
    for (int64_t i = 0; i < n; ++i) {
      const float* row = out.back().data_as<float>() + i * vocab;
      next[size_t(i)] = int32_t(std::max_element(row, row + vocab) - row);
      cu1[size_t(i) + 1] = i + 1;
    }
    out.push_back(model::forward(m, cache, {next, cu1, slots}, opt));
  }
  return out;
}

// idle_last: the last rank owns no sequence and runs EpModel::idle_step for each of the others' steps.
// holders_only: a profile placement (experts 0 and 1 hot, replicated) and each rank keeping only its held experts.
// from_checkpoint: the models are loaded from a random checkpoint (model_testutil.h), and with holders_only the EP
// ranks' model binds only its held experts (Model's keep_experts filter); the reference loads every expert.
void check_model(const char* name, bool idle_last = false, PlanPolicy policy = PlanPolicy::any_rank,
                 bool from_checkpoint = false) {
  Comm& comm = testutil::world();
  const int n = comm.size(), me = comm.rank();
  const model::Config& named = model::named_config(name);
  std::vector<double> prof(size_t(named.num_experts), 1.0);
  prof[0] = prof[1] = 4.0;
  const Placement pl = policy == PlanPolicy::holders_only && n > 1 ? Placement::from_profile(n, prof, 2)
                                                                   : Placement::round_robin(n, int(named.num_experts));
  std::unique_ptr<model::Model> full, held;
  if (from_checkpoint) {
    const std::string dir = model::testutil::tiny_dir(name);
    full = std::make_unique<model::Model>(dir);
    std::vector<char> mine(size_t(named.num_experts), policy == PlanPolicy::any_rank);
    for (int32_t e : pl.held_by(me)) mine[size_t(e)] = 1;
    held = std::make_unique<model::Model>(dir, Device::cpu(), model::OpSupported{},
                                          [mine](int64_t, int64_t e) { return mine[size_t(e)] != 0; });
    EXPECT_EQ(held->has_every_expert(), policy == PlanPolicy::any_rank || n == 1);
  } else {
    full.reset(new model::Model(model::Model::random(named, Device::cpu(), 5)));
  }
  const model::Model& m = *full;
  const model::Model& ep_model = held ? *held : m;
  const Seqs all = make_seqs(idle_last ? n - 1 : n, m.config().vocab_size);
  std::vector<std::vector<int32_t>> mine;
  std::vector<size_t> mine_at;  // their rows in the single-process batch
  for (size_t i = 0; i < all.prompts.size(); ++i)
    if (all.owner[i] == me) {
      mine.push_back(all.prompts[i]);
      mine_at.push_back(i);
    }
  const int decode = 3;
  const std::vector<Tensor> ref = run(m, all.prompts, decode, {});
  int64_t s_max = 0;
  for (int r = 0; r < n; ++r) {
    int64_t t = 0;
    for (size_t i = 0; i < all.prompts.size(); ++i) t += all.owner[i] == r ? int64_t(all.prompts[i].size()) : 0;
    s_max = std::max(s_max, t);
  }
  const model::Config& c = m.config();
  EpModel ep(comm, ep_model, s_max, &pl, {}, policy);
  EXPECT_EQ(ep.resident_experts_per_layer(),
            policy == PlanPolicy::holders_only ? int64_t(pl.held_by(me).size()) : c.num_experts);
  model::ForwardOptions opt;
  opt.moe = ep.hook();
  if (idle_last && me == n - 1) {
    for (int step = 0; step <= decode; ++step) ep.idle_step();
    return;
  }
  const std::vector<Tensor> got = run(ep_model, mine, decode, opt);
  const int64_t vocab = m.config().vocab_size;
  for (int step = 0; step <= decode; ++step)
    for (size_t j = 0; j < mine.size(); ++j) {
      const float* a = got[size_t(step)].data_as<float>() + int64_t(j) * vocab;
      const float* b = ref[size_t(step)].data_as<float>() + int64_t(mine_at[j]) * vocab;
      double err = 0, norm = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        err += (double(a[v]) - b[v]) * (double(a[v]) - b[v]);
        norm += double(b[v]) * b[v];
      }
      EXPECT_LE(std::sqrt(err / norm), 1e-6) << name << " rank " << me << " step " << step << " seq " << j;
      EXPECT_EQ(std::max_element(a, a + vocab) - a, std::max_element(b, b + vocab) - b)
          << name << " greedy token, rank " << me << " step " << step << " seq " << j;
    }
  // Every MoE layer ran as an EP step (the last one: one token per sequence of every rank) and was balanced
  // (holders-only: no rank above the largest home load, the loads exactly cover the pairs).
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    if (c.is_moe_layer(i)) {
      EXPECT_EQ(ep.last_stats()[size_t(i)].total_pairs, int64_t(all.prompts.size()) * c.num_experts_per_token);
    }
  for (const EpStepStats& s : ep.last_stats()) {
    if (policy == PlanPolicy::holders_only) {
      if (s.load.empty()) continue;
      EXPECT_LE(*std::max_element(s.load.begin(), s.load.end()),
                *std::max_element(s.home_load.begin(), s.home_load.end()));
      int64_t sum = 0;
      for (int64_t l : s.load) sum += l;
      EXPECT_EQ(sum, s.total_pairs);
      continue;
    }
    for (int64_t l : s.load) {
      EXPECT_GE(l, s.total_pairs / n);
      EXPECT_LE(l, (s.total_pairs + n - 1) / n);
    }
  }
}

TEST(MpiEpModel, K3TinyEqualsSingleProcess) { check_model("k3-tiny"); }
TEST(MpiEpModel, KimiLinearTinyEqualsSingleProcess) { check_model("kimi-linear-tiny"); }

TEST(MpiEpModel, RankWithoutSequencesIdles) { check_model("k3-tiny", true); }
TEST(MpiEpModel, K3TinyHeldExpertsOnlyEqualsSingleProcess) {
  check_model("k3-tiny", false, PlanPolicy::holders_only);
}
TEST(MpiEpModel, KimiLinearTinyHeldExpertsOnlyEqualsSingleProcess) {
  check_model("kimi-linear-tiny", true, PlanPolicy::holders_only);
}
// Each rank's Model binds only its held experts from the checkpoint (MXFP4 experts in k3-tiny's).
TEST(MpiEpModel, K3TinyCheckpointWithHeldExpertsOnly) {
  check_model("k3-tiny", false, PlanPolicy::holders_only, true);
}
TEST(MpiEpModel, KimiLinearTinyCheckpointWithHeldExpertsOnly) {
  check_model("kimi-linear-tiny", false, PlanPolicy::holders_only, true);
}
// A model missing experts runs only through the EP hook.
TEST(MpiEpModel, ModelMissingExpertsNeedsTheHook) {
  const model::Model m(model::testutil::tiny_dir("kimi-linear-tiny"), Device::cpu(), model::OpSupported{},
                       [](int64_t, int64_t e) { return e % 2 == 0; });
  const model::Model all(model::testutil::tiny_dir("kimi-linear-tiny"));
  EXPECT_FALSE(m.has_every_expert());
  EXPECT_EQ(2 * m.routed_expert_bytes(), all.routed_expert_bytes());
  for (const auto& layer : m.weights().layers)
    for (size_t e = 0; e < layer.ffn.experts.size(); ++e)
      EXPECT_EQ(layer.ffn.experts[e].gate.w.present(), e % 2 == 0);
  model::Cache cache(m, 1, 16);
  const std::vector<int32_t> tokens{1, 2, 3};
  const std::vector<int64_t> cu{0, 3}, slots{0};
  EXPECT_KIMI_ERROR(model::forward(m, cache, {tokens, cu, slots}), "forward: the model keeps only some routed experts",
                    "ForwardOptions::moe");
}

// generate() under EP: ranks finish at different steps (rank r: 2 + 3r new tokens) and the last rank has no
// prompt; every rank's tokens equal a single-process generate() of its prompts.
TEST(MpiEpModel, GenerateInLockstepEqualsSingleProcess) {
  Comm& comm = testutil::world();
  const int n = comm.size(), me = comm.rank();
  const model::Model m = model::Model::random(model::named_config("k3-tiny"), Device::cpu(), 6);
  const Seqs all = make_seqs(n - 1, m.config().vocab_size);
  std::vector<std::vector<int32_t>> mine;
  int64_t s_max = 0;
  for (int r = 0; r < n; ++r) {
    int64_t t = 0;
    for (size_t i = 0; i < all.prompts.size(); ++i)
      if (all.owner[i] == r) {
        t += int64_t(all.prompts[i].size());
        if (r == me) mine.push_back(all.prompts[i]);
      }
    s_max = std::max(s_max, t);
  }
  EpModel ep(comm, m, s_max);
  if (mine.empty()) {
    ep.generate_idle();
    return;
  }
  model::GenerateOptions opt;
  opt.max_new_tokens = 2 + 3 * me;
  const model::GenerateResult ref = model::generate(m, mine, opt);
  const model::GenerateLockstep lockstep = ep.lockstep();
  const model::GenerateResult got = model::generate(m, mine, opt, {}, &lockstep);
  EXPECT_EQ(got.tokens, ref.tokens) << "rank " << me;
  for (const auto& t : got.tokens) EXPECT_EQ(int64_t(t.size()), opt.max_new_tokens);
}

TEST(MpiEpModel, MismatchedModelConfigsAreErrorsOnEveryRank) {
  Comm& comm = testutil::world();
  model::Config c = model::named_config("kimi-linear-tiny");
  if (comm.rank() == comm.size() - 1) c.vocab_size = 384;  // the last rank loaded another checkpoint
  const model::Model m = model::Model::random(c, Device::cpu(), 5);
  const std::string last = "on rank " + std::to_string(comm.size() - 1);
  EXPECT_KIMI_ERROR(EpModel(comm, m, 8), "dist::EpModel: the model configuration differs between ranks",
                    "on rank 0", last.c_str());
}

}  // namespace
}  // namespace kimi::dist
