// Implementation of serve/scheduler.h.
#include "serve/scheduler.h"

#include <algorithm>

namespace kimi::serve {

StepPacking pack_step(std::span<const SeqProgress> seqs, int64_t budget, int64_t align, int64_t grid) {
  StepPacking p;
  std::vector<Piece> partial;
  int64_t left = budget;
  for (int64_t i = 0; i < int64_t(seqs.size()); ++i) {
    const SeqProgress& s = seqs[size_t(i)];
    if (s.prefilled < s.prompt_len || left < 1) continue;
    p.pieces.push_back({i, s.prompt_len, 1, true, true});
    --left;
  }
  for (int64_t i = 0; i < int64_t(seqs.size()) && left > 0; ++i) {
    const SeqProgress& s = seqs[size_t(i)];
    const int64_t rest = s.prompt_len - s.prefilled;
    if (rest <= 0) continue;
    int64_t n = std::min(rest, left);
    if (n < rest && align > 1) {
      const int64_t end = (s.prefilled + n) / align * align;  // back to the chunk grid
      if (end > s.prefilled) n = end - s.prefilled;
    }
    if (grid > 0) n = std::min(n, (s.prefilled / grid + 1) * grid - s.prefilled);  // up to the next multiple of G
    const Piece piece{i, s.prefilled, n, false, n == rest};
    (piece.sample ? p.pieces : partial).push_back(piece);
    left -= n;
  }
  for (const Piece& q : p.pieces) p.tokens += q.count;
  p.sampled = int64_t(p.pieces.size());
  for (const Piece& q : partial) p.pieces.push_back(q), p.tokens += q.count;
  return p;
}

}  // namespace kimi::serve
