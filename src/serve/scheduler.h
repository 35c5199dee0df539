// serve/scheduler.h: what one engine step runs: the packing of continuous batching (no model, no threads).
//
// Each running sequence sits in its own cache slot and is either prefilling (prompt tokens not yet in the slot) or
// decoding (its whole prompt is in; its next input is the token sampled last). pack_step fills one step under a
// token budget (--max-batch-tokens):
//   1. every decoding sequence gets its one token (decode first: it is what users wait on, token by token);
//   2. the rest of the budget goes to prefilling sequences in admission order (chunked prefill): each takes
//      min(its remaining prompt, the budget left); a piece that does not finish its prompt is cut back to end on a
//      multiple of `align` prompt tokens (the KDA chunk, 64: pieces then start on the chunk grid the kernels use,
//      where a prefix snapshot can later be taken), unless that would leave it empty;
//   3. with a snapshot grid G > 0 (prefix caching, serve/prefix_cache.h), no prefill piece crosses a multiple of G:
//      one that would is cut there. Every multiple of G inside a prompt is then a piece end, and the pieces after
//      it depend only on the prompt and the budget, not on where the prefill started: a prefill resumed from a
//      snapshot at a multiple of G runs the same pieces as the uncached prefill did from there on.
// Pieces that end their sequence's input (decodes, and prefill pieces that finish the prompt) are listed first, so
// that their logits are rows [0, sampled) of the step's LogitsFor::last output; partial prefill pieces follow.
// Requires budget >= the number of decoding sequences (the engine keeps budget >= slots).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kimi::serve {

struct SeqProgress {
  int64_t prompt_len = 0;  // tokens of the prompt (>= 1)
  int64_t prefilled = 0;   // prompt tokens already in the slot; == prompt_len: decoding
};

struct Piece {
  int64_t seq = 0;     // index into pack_step's input
  int64_t begin = 0;   // prompt position of the piece's first token (decode pieces: prompt_len)
  int64_t count = 0;   // tokens (decode: 1)
  bool decode = false;
  bool sample = false; // the piece ends the sequence's input: a token is sampled from its last logits
};

struct StepPacking {
  std::vector<Piece> pieces;  // sampled pieces first
  int64_t tokens = 0;         // sum of counts (<= budget)
  int64_t sampled = 0;        // pieces with sample set (the first `sampled` pieces)
};

StepPacking pack_step(std::span<const SeqProgress> seqs, int64_t budget, int64_t align, int64_t grid = 0);

}  // namespace kimi::serve
