// text/unicode_lookup.cpp: lookups into the generated class table (unicode_table.h).
#include <algorithm>

#include "text/unicode_table.h"

namespace kimi::text {

namespace {

// Classes of U+0000..U+00FF, read from the ranges once: most text is ASCII and skips the binary search.
const std::array<uint8_t, 256>& latin1_flags() {
  static const std::array<uint8_t, 256> table = [] {
    std::array<uint8_t, 256> t{};
    for (size_t i = 0; i < kCharRangeCount; ++i) {
      const CharRange& r = kCharRanges[i];
      if (r.first > 0xFF) break;
      for (uint32_t c = r.first; c <= r.last && c <= 0xFF; ++c) t[c] = r.flags;
    }
    return t;
  }();
  return table;
}

}  // namespace

uint8_t char_flags(uint32_t cp) {
  if (cp <= 0xFF) return latin1_flags()[cp];
  // The first range whose last value is >= cp; cp is in it when its first value is <= cp.
  const CharRange* end = kCharRanges + kCharRangeCount;
  const CharRange* it =
      std::lower_bound(kCharRanges, end, cp, [](const CharRange& r, uint32_t v) { return r.last < v; });
  return it != end && it->first <= cp ? it->flags : 0;
}

bool folds_to(uint32_t cp, char letter) {
  for (const FoldSet& f : kContractionFolds)
    if (f.letter == letter) return cp == f.cps[0] || cp == f.cps[1] || cp == f.cps[2];
  return false;
}

}  // namespace kimi::text
