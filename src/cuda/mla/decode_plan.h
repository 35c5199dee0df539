// src/cuda/mla/decode_plan.h: the split count of the tensor-core mla_decode (decode_tc.cuh), host code built in every
// build (decode_plan.cpp) so that its choices are tested without a GPU.
//
// One CTA per SM (decode_tc.cuh holds ~190-227 KB of shared memory). A CTA costs, in units of one cache tile
// (kTcTJ = 32 rows of RP elements of esz bytes): its tiles, plus a fixed part c0 = 1 (start, pipeline fill)
// + 0.5 H RP 4 / tile (its queries, read from L2) + 2 H R 4 / tile (its f32 partials, written and read back by the
// combine). S minimizes waves(S) * (ceil(tiles / S) + c0), waves = ceil(N S / sms), tiles = ceil(max_len / 32);
// the smallest such S on ties. N counts CTAs per split (sequences x head groups), H the heads of one CTA.
#pragma once

#include <cstdint>

namespace kimi::cuda::mla {

inline constexpr int64_t kTcPlanTileRows = 32;  // decode_tc.cuh kTcTJ

int64_t tc_decode_splits(int64_t N, int64_t max_len, int64_t H, int64_t R, int64_t RP, int64_t esz, int64_t sms);

}  // namespace kimi::cuda::mla
