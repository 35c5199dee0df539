// dist/device_layout.cpp: the CUDA EP step's packed layout tables (the tables: device_layout.h).
#include "dist/device_layout.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "kimi/error.h"

namespace kimi::dist {

DeviceLayoutOffsets pack_device_layout(const DispatchLayout& dl, const ReceiveLayout& rl,
                                       std::span<const int32_t> ids, int top_k, std::span<const int32_t> local_of,
                                       int64_t resident, int rank, std::span<int32_t> out) {
  const char* fn = "dist::pack_device_layout";
  const auto slots = int64_t(ids.size()), load = int64_t(rl.grouped_from.size());
  const int64_t k = top_k, t = slots / k;
  DeviceLayoutOffsets o;
  o.send_tok = 0;
  o.grouped_from = slots;
  o.ungroup = o.grouped_from + load;
  o.off = o.ungroup + load;
  o.comb_row = o.off + resident + 1;
  o.comb_slot = o.comb_row + slots;
  o.size = o.comb_slot + slots;
  if (int64_t(out.size()) < o.size)
    throw Error(std::string(fn) + ": argument 'out': expected at least " + std::to_string(o.size) +
                " entries (3*T*K + 2*load + R + 1), got " + std::to_string(out.size()));
  int32_t* p = out.data();
  for (int64_t i = 0; i < slots; ++i) p[o.send_tok + i] = int32_t(dl.send_slot[size_t(i)] / k);
  for (int64_t j = 0; j < load; ++j) {
    p[o.grouped_from + j] = int32_t(rl.grouped_from[size_t(j)]);
    p[o.ungroup + rl.grouped_from[size_t(j)]] = int32_t(j);
  }
  int32_t* off = p + o.off;
  std::fill(off, off + resident + 1, 0);
  for (size_t i = 0; i < rl.experts.size(); ++i) {
    const int32_t l = local_of[size_t(rl.experts[i])];
    if (l < 0)
      throw Error(std::string(fn) + ": internal: the plan gave rank " + std::to_string(rank) + " expert " +
                  std::to_string(rl.experts[i]) + ", which it does not keep");
    off[l + 1] = int32_t(rl.expert_rows[i + 1] - rl.expert_rows[i]);
  }
  for (int64_t l = 0; l < resident; ++l) off[l + 1] += off[l];
  std::vector<int32_t> row_of(static_cast<size_t>(slots), 0);  // slot -> the send (= back) row it left from
  for (int64_t i = 0; i < slots; ++i) row_of[size_t(dl.send_slot[size_t(i)])] = int32_t(i);
  for (int64_t tok = 0; tok < t; ++tok) {  // the token's slots by ascending expert (distinct per token)
    int32_t* cs = p + o.comb_slot + tok * k;
    std::iota(cs, cs + k, int32_t(tok * k));
    std::stable_sort(cs, cs + k, [&](int32_t a, int32_t b) { return ids[size_t(a)] < ids[size_t(b)]; });
    for (int64_t r = 0; r < k; ++r) p[o.comb_row + tok * k + r] = row_of[size_t(cs[r])];
  }
  return o;
}

}  // namespace kimi::dist
