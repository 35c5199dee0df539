// dist/device_layout.h: one rank's dispatch and receive layouts (layout.h) packed into the i32 tables the CUDA EP
// step uploads in one copy (moe_cuda.h), all indices into that rank's static buffers:
//   send_tok     [T*K]   send row i carries token send_slot[i] / K              (gather z -> send)
//   grouped_from [load]  grouped row j is received row grouped_from[j]           (gather recv -> grouped operand)
//   ungroup      [load]  received row i is grouped row ungroup[i]                (the inverse: outputs back in place)
//   off          [R + 1] local expert l (resident[l]) owns grouped rows [off[l], off[l+1]); experts not computed
//                        this step own none
//   comb_row     [T*K]   token t's r-th slot in ascending expert order returned in back row comb_row[t*K + r]
//   comb_slot    [T*K]   ... and is slot comb_slot[t*K + r] (its routing weight's index)
// Packed in that order; `size` entries in all: 3*T*K + 2*load + R + 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dist/layout.h"

namespace kimi::dist {

struct DeviceLayoutOffsets {
  int64_t send_tok = 0, grouped_from = 0, ungroup = 0, off = 0, comb_row = 0, comb_slot = 0, size = 0;
};

// ids [T*K] (this rank's routing, slot order), local_of [E] (expert -> index into the resident experts, or -1);
// out: at least 3*T*K + 2*load + R + 1 entries (else kimi::Error naming 'out'). A grouped expert that is not
// resident is an internal error naming the rank and the expert.
DeviceLayoutOffsets pack_device_layout(const DispatchLayout& dl, const ReceiveLayout& rl,
                                       std::span<const int32_t> ids, int top_k, std::span<const int32_t> local_of,
                                       int64_t resident, int rank, std::span<int32_t> out);

}  // namespace kimi::dist
