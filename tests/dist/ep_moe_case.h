// tests/dist/ep_moe_case.h: one EP MoE step against the single-process latent_moe on a named tiny config's MoE
// shapes (model::named_config: k3-tiny is latent + norm + SiTU, kimi-linear-tiny is plain + SiLU + scaling 2.446).
// Every rank builds the same seeded f32 weights and the same global batch; rank r runs dist::EpMoe on its slice
// (T_r = 3 + 5r tokens, S = the largest); the reference is latent_moe over the whole batch in one process.
// skew: router bias +8 on experts 3 and 11 (every token picks both: half of all pairs on two experts, both homed on
// the same rank under round-robin over 2 or 4 ranks). profile: a load-time placement in which both are replicated.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dist/moe.h"
#include "dist/plan_check.h"
#include "kimi/model/config.h"
#include "kimi/ops/moe.h"
#include "kimi/ops/random.h"
#include "kimi/tensor.h"

namespace kimi::testutil {

struct EpMoeModel {
  int64_t d = 0, dl = 0, e = 0, k = 0, inter = 0;
  bool latent = false;
  RouterParams router;
  GluParams act;
  std::vector<Tensor> store;
  std::vector<MlpWeights> experts;
  MlpWeights shared;
  LatentMoeWeights w;

  Weight dense(int64_t out, int64_t in, uint64_t seed) {
    store.emplace_back(DType::f32, std::initializer_list<int64_t>{out, in});
    const double a = 1.0 / std::sqrt(double(in));
    fill_random(store.back(), seed, -a, a);
    return Weight{store.back(), {}};
  }
};

inline EpMoeModel make_ep_moe_model(const std::string& name, bool skew) {
  const model::Config c = model::named_config(name);
  EpMoeModel m;
  m.store.reserve(256);  // views into store stay valid
  m.d = c.hidden_size;
  m.e = c.num_experts;
  m.k = c.num_experts_per_token;
  m.inter = c.moe_intermediate_size;
  m.latent = c.routed_expert_hidden_size.has_value();
  m.dl = m.latent ? *c.routed_expert_hidden_size : m.d;
  m.router = RouterParams{int(m.k), c.moe_renormalize, c.routed_scaling_factor};
  m.act.act = c.hidden_act == model::Activation::situ ? GluAct::situ : GluAct::silu;
  m.act.situ_beta = c.situ_beta;
  m.act.situ_linear_beta = c.situ_linear_beta;
  uint64_t seed = 100;
  m.w.router = m.dense(m.e, m.d, seed++);
  m.store.emplace_back(DType::f32, std::initializer_list<int64_t>{m.e});
  fill_random(m.store.back(), seed++, -0.05, 0.05);
  if (skew) {
    m.store.back().data_as<float>()[3] += 8.f;
    m.store.back().data_as<float>()[11] += 8.f;
  }
  m.w.router_bias = m.store.back();
  if (m.latent) {
    m.w.latent_down = m.dense(m.dl, m.d, seed++);
    m.w.latent_up = m.dense(m.d, m.dl, seed++);
    if (c.latent_moe_use_norm) {
      m.store.emplace_back(DType::f32, std::initializer_list<int64_t>{m.dl});
      fill_random(m.store.back(), seed++, 0.5, 1.5);
      m.w.latent_norm = m.store.back();
    }
  }
  for (int64_t i = 0; i < m.e; ++i)
    m.experts.push_back(
        {m.dense(m.inter, m.dl, seed++), m.dense(m.inter, m.dl, seed++), m.dense(m.dl, m.inter, seed++)});
  m.w.experts = m.experts;
  const int64_t si = c.num_shared_experts * m.inter;
  if (si > 0) {
    m.shared = {m.dense(si, m.d, seed++), m.dense(si, m.d, seed++), m.dense(m.d, si, seed++)};
    m.w.shared = &m.shared;
  }
  return m;
}

inline int64_t ep_tokens_of(int rank) { return 3 + 5 * int64_t(rank); }

// Runs the step on `comm`, checks the output against latent_moe and the balance; returns the stats.
// profile: a placement from a routing profile with experts 3 and 11 hot, each replicated (with >= 2 ranks).
// holders_only: each rank is given only its held experts' weights (the others absent); the loads must be the
// independent holders-only plan's, whose max is Hall's bound.
inline dist::EpStepStats run_ep_moe_case(dist::Comm& comm, const std::string& name, bool skew, bool profile = false,
                                         dist::PlanPolicy policy = dist::PlanPolicy::any_rank) {
  EpMoeModel m = make_ep_moe_model(name, skew);
  const int n = comm.size(), me = comm.rank();
  int64_t total = 0, first = 0;
  for (int r = 0; r < n; ++r) {
    if (r == me) first = total;
    total += ep_tokens_of(r);
  }
  const int64_t t = ep_tokens_of(me), s_max = ep_tokens_of(n - 1);
  Tensor x(DType::f32, {total, m.d}), ref(DType::f32, {total, m.d}), out(DType::f32, {t, m.d});
  Tensor ids(DType::i32, {t, m.k}), ref_ids(DType::i32, {total, m.k});
  fill_random(x, 7, -1.0, 1.0);
  latent_moe(x, m.w, m.router, m.act, 1e-5f, ref, ref_ids);
  std::vector<double> prof(size_t(m.e), 1.0);
  prof[3] = prof[11] = 8.0;
  const dist::Placement pl = profile && n > 1 ? dist::Placement::from_profile(n, prof, 2)
                                              : dist::Placement::round_robin(n, int(m.e));
  std::vector<MlpWeights> held(size_t(m.e));  // holders_only: absent unless this rank holds it
  LatentMoeWeights w = m.w;
  if (policy == dist::PlanPolicy::holders_only) {
    for (int32_t e : pl.held_by(me)) held[size_t(e)] = m.experts[size_t(e)];
    w.experts = held;
  }
  dist::EpMoe ep(comm, pl, w, m.router, m.act, 1e-5f, s_max, policy);
  EXPECT_EQ(ep.resident_experts().size(), policy == dist::PlanPolicy::holders_only ? pl.held_by(me).size()
                                                                                    : size_t(m.e));
  const TensorView xs(x.data_as<float>() + first * m.d, DType::f32, {t, m.d});
  dist::EpStepStats stats;
  ep.forward(xs, out, ids, {}, &stats);

  double err = 0, norm = 0, max_abs = 0;
  for (int64_t i = 0; i < t * m.d; ++i) {
    const double a = out.data_as<float>()[i], b = ref.data_as<float>()[first * m.d + i];
    err += (a - b) * (a - b);
    norm += b * b;
    max_abs = std::max(max_abs, std::abs(a - b));
    if (!std::isfinite(a)) ADD_FAILURE() << "non-finite output at " << i;
  }
  EXPECT_LE(std::sqrt(err / norm), 1e-6) << name << " rank " << me << " max |diff| " << max_abs;
  for (int64_t i = 0; i < t * m.k; ++i)
    EXPECT_EQ(ids.data_as<int32_t>()[i], ref_ids.data_as<int32_t>()[first * m.k + i]) << "slot " << i;
  // Nothing dropped; loads floor/ceil (any_rank) or the restricted optimum (holders_only).
  EXPECT_EQ(stats.total_pairs, total * m.k);
  if (policy == dist::PlanPolicy::holders_only) {
    std::vector<int64_t> counts(size_t(n * m.e), 0), c(size_t(m.e), 0);
    int64_t at = 0;
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < ep_tokens_of(r) * m.k; ++i, ++at) {
        const int32_t e = ref_ids.data_as<int32_t>()[at];
        ++counts[size_t(r * m.e + e)];
        ++c[size_t(e)];
      }
    const dist::StepPlan plan = dist::plan_step(pl, counts, dist::PlanPolicy::holders_only);
    EXPECT_EQ(stats.load, plan.load);
    EXPECT_EQ(*std::max_element(stats.load.begin(), stats.load.end()), hall_bound(pl, c));
  } else {
    for (int r = 0; r < n; ++r) {
      EXPECT_GE(stats.load[size_t(r)], stats.total_pairs / n) << "rank " << r;
      EXPECT_LE(stats.load[size_t(r)], (stats.total_pairs + n - 1) / n) << "rank " << r;
    }
  }
  if (skew) {  // the two hot experts carry every token
    int64_t hot = 0;
    for (int64_t i = 0; i < total * m.k; ++i) {
      const int32_t e = ref_ids.data_as<int32_t>()[i];
      hot += e == 3 || e == 11;
    }
    EXPECT_EQ(hot, 2 * total);
  }
  return stats;
}

}  // namespace kimi::testutil
