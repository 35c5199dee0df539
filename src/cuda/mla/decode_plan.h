// src/cuda/mla/decode_plan.h: the launch shapes of the CUDA mla_decode (mla.cu), host code built in every build
// (decode_plan.cpp) so that its choices are tested without a GPU.
//
// Tensor-core attend (decode_tc.cuh): one CTA per SM (~190-232 KB of shared memory). A CTA costs, in units of one
// cache tile (kTcTJ = 32 rows of RP elements of esz bytes): its tiles, plus a fixed part c0 = 1 (start, pipeline
// fill) + 0.5 HG KP 2 / tile (its HG heads' bf16 queries, KP = RP rounded up to 16, read from L2) + 2 HG R 4 / tile (their f32 partials, written and
// read back by the merge). tc_decode_splits: S minimizes waves(S) * (ceil(tiles / S) + c0), waves = ceil(N S / sms),
// tiles = ceil(max_len / 32); the smallest such S on ties. N counts CTAs per split (sequences x head groups), H the
// heads of one CTA. tc_decode_plan also picks the head group: the default (all heads, in groups of <= 64) or, where
// the model says a CTA's fixed part outweighs the extra CTAs (few sequences, short caches: the grid is far from a
// wave), 48, 32 or 16 heads per CTA (the mma's 16-row blocks); the larger group on ties (each group reads the
// tiles again, from L2).
//
// Absorb / merge / project (decode_proj.cuh): tokens per CTA and the rows / split groups per CTA, so that the grid
// holds >= kProjWaves CTAs per SM where the shape allows.
#pragma once

#include <cstdint>

namespace kimi::cuda::mla {

inline constexpr int64_t kTcPlanTileRows = 32;  // decode_tc.cuh kTcTJ
inline constexpr int64_t kTcPlanMaxHeads = 64;  // decode_tc.cuh kTcMaxHG
inline constexpr int64_t kProjWaves = 4;

int64_t tc_decode_splits(int64_t N, int64_t max_len, int64_t H, int64_t R, int64_t RP, int64_t esz, int64_t sms);

struct TcDecodePlan {
  int64_t head_group = 1;  // heads per CTA (the last group may hold fewer)
  int64_t splits = 1;      // S
};
// N sequences, H heads.
TcDecodePlan tc_decode_plan(int64_t N, int64_t H, int64_t max_len, int64_t R, int64_t RP, int64_t esz, int64_t sms);

// Absorb: tokens per CTA, up to 8, with its q rows (nt Dn f32) within 48 KB of shared memory.
int64_t decode_absorb_tokens(int64_t Dn);
// Project: output rows of W_kvb_v[h] per CTA (a multiple of 16), from Dv, H and the token blocks: the fewest rows
// (16) at N = 1, more as the token blocks alone fill kProjWaves waves (each CTA reads its tokens' ol once).
int64_t decode_project_rows(int64_t Dv, int64_t H, int64_t token_blocks, int64_t sms);
// Merge: the split groups SG per CTA (a CTA covers 256 / SG units of columns of one (sequence, head)): min(S, 8)
// rounded down to a power of two, halved while the CTA does not yet cover the row's `units` and the grid
// (N H ceil(units / (256 / SG)) CTAs) would still hold more than kProjWaves CTAs per SM: fewer, longer CTAs where the
// splits are few and the batch large.
int decode_merge_groups(int64_t S, int64_t units, int64_t H, int64_t N, int64_t sms);

}  // namespace kimi::cuda::mla
