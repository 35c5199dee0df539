// src/cuda/moe/router_rank.cuh: the sigmoid top-k router (router.cuh's math and order) by ranks, for one block of
// kRankThreads threads routing every token of a launch (the touched path's grouping launch, group.cuh, at decode):
//   s_e = sigmoid(logit_e), key_e = pack(s_e + bias_e, e) (router_row.cuh: unique u64 keys, larger = earlier)
//   rank_e = #{e' : key_e' > key_e};  pick j of the token = the expert of rank j < k;  w_j = s_{pick j}
//   renormalize: w_j / (sum_j w_j + 1e-20) in fp64, the sum over j ascending (the CPU's order); then * scaling.
// The keys are unique, so the ranks are a permutation and pick j is the j-th pick of the CPU's sequential top-k:
// ids and weights are bit-equal to router_reg_row's and the CPU's.
// A pass routes 32 / G tokens (G = ceil(E / 32) warps per token; warp (token, g) holds experts 32 g .. 32 g + 31):
//   1. each lane computes its key and counts the keys of its warp above it (shared memory, broadcast reads);
//      rank-in-warp < k makes it a candidate, compacted by ballot into the token's slots [g k, g k + k);
//   2. each candidate counts the token's candidates above it (G k slots, empty slots 0 < every key): that is its
//      rank whenever the rank is < k. (Every key of rank < k is a candidate, having fewer than k keys above it in
//      its warp; a key of rank >= k has the k top keys, all candidates, above it.) Rank j < k: pick j;
//   3. warp w sums token w's pick scores in pick order (fp64) and writes the weights.
// Limits: E <= kRankMaxExperts, k <= kRankMaxK (so G k <= 32 k <= kRankThreads candidate slots per pass).
#pragma once

#include <cstdint>

#include "cuda/moe/router_row.cuh"

namespace kimi::cuda {

constexpr int kRankThreads = 1024;
constexpr int kRankMaxExperts = 256;  // G <= 8: 4 or more tokens per pass
constexpr int kRankMaxK = 32;

// The passes' shared memory (reused by each pass; indices below for the pass's token slot tl).
struct RankSmem {
  uint64_t key[kRankThreads];   // [tl][32 G]: packed keys, 0 for e >= E
  uint64_t cand[kRankThreads];  // [tl][G k]: candidate keys, 0 = empty slot
  float score[kRankThreads];    // [tl][32 G]: s_e
  float pick[kRankThreads];     // [tl][k]: pick j's score
};

// Routes every token of `a` (a.t <= any, a.e <= kRankMaxExperts, a.k <= kRankMaxK) into a.ids / a.w; every thread
// of the block calls it. on_pick(t, j, e) runs once per pick (phase 2), on_weight(t, j, w) once per weight (phase 3).
template <class OnPick, class OnWeight>
__device__ __forceinline__ void route_rank(const RouterArgs& a, RankSmem& s, OnPick on_pick, OnWeight on_weight) {
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int k = a.k, groups = (int(a.e) + 31) / 32, tpp = 32 / groups, ncand = groups * k;
  const int tl = warp / groups, e = (warp - tl * groups) * 32 + lane;  // phase 1: this lane's (token slot, expert)
  for (int64_t t0 = 0; t0 < a.t; t0 += tpp) {
    if (tl < tpp) {  // warp-uniform
      const int64_t t = t0 + tl;
      const bool valid = t < a.t && e < a.e;
      uint64_t key = 0;
      float score = 0.f;
      if (valid) {
        score = router_sigmoid(load_f32(a.logits, t * a.ldl + e, a.tl));
        key = router_pack(router_key(a.bias ? score + a.bias[e * a.bias_stride] : score), e);
      }
      s.key[tid] = key;
      s.score[tid] = score;
      __syncwarp();
      const ulonglong2* kw = reinterpret_cast<const ulonglong2*>(s.key + warp * 32);
      int above = 0;
#pragma unroll 8
      for (int i = 0; i < 16; ++i) {
        const ulonglong2 p = kw[i];
        above += int(p.x > key) + int(p.y > key);
      }
      const bool cand = valid && above < k;
      const uint32_t mask = __ballot_sync(0xffffffffu, cand);
      uint64_t* slots = s.cand + tl * ncand + (warp - tl * groups) * k;
      if (cand) slots[__popc(mask & ((1u << lane) - 1))] = key;
      else if (lane >= __popc(mask) && lane < k) slots[lane] = 0;
    }
    __syncthreads();
    if (tid < tpp * ncand) {  // phase 2: candidate slot tid of token slot tid / ncand
      const int tc = tid / ncand;
      const uint64_t mine = s.cand[tid];
      const uint64_t* c = s.cand + tc * ncand;
      int rank = 0;
      if (mine != 0) {
#pragma unroll 8
        for (int i = 0; i < ncand; ++i) rank += int(c[i] > mine);
      }
      if (mine != 0 && rank < k) {
        const int64_t t = t0 + tc;
        const int32_t ex = int32_t(router_unpack_index(mine));
        a.ids[t * a.ldi + rank] = ex;
        s.pick[tc * k + rank] = s.score[tc * groups * 32 + ex];
        on_pick(t, rank, ex);
      }
    }
    __syncthreads();
    if (warp < tpp && t0 + warp < a.t) {  // phase 3: token slot `warp`
      const float* pw = s.pick + warp * k;
      double sum = 0;  // the CPU's order: picks 0 .. k-1
#pragma unroll 4
      for (int j = 0; j < k; ++j) sum += double(pw[j]);
      if (lane < k) {
        const int64_t t = t0 + warp;
        const float my_w = pw[lane];
        const float w = (a.renorm ? float(double(my_w) / (sum + 1e-20)) : my_w) * a.scaling;
        a.w[t * a.ldw + lane] = w;
        on_weight(t, lane, w);
      }
    }
    __syncthreads();  // the next pass reuses s
  }
}

}  // namespace kimi::cuda
