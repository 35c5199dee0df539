// text/train_bpe.h: a small byte-level BPE vocabulary trained on text, for checkpoints made without one
// (`kimi random-model`; docs/text/tokenizer.md "Tokenizers of random models").
//
// train_byte_bpe(corpus, n) returns by_rank[0..n-1], the bytes of each rank, for tiktoken.model:
//   1. ranks 0..255: the single bytes 0x00..0xFF, in byte order (every byte-level BPE vocabulary holds them);
//   2. merges: the corpus is split by the Kimi pre-tokenizer (pretokenize.h; merges never cross a piece), each
//      distinct piece weighted by how often it occurs, each piece a sequence of tokens (its bytes at first). Each
//      step takes the adjacent pair with the largest weighted count, ties broken by the smaller (left bytes,
//      right bytes), and replaces every occurrence (left to right, no overlaps) by the concatenation; a
//      concatenation that is not yet a token becomes the next rank. Steps stop at n ranks or when every piece is
//      one token;
//   3. filler, only when the corpus runs out of merges before n ranks: byte strings not yet tokens, shortest first
//      and in byte order ("\x00\x00", "\x00\x01", ...). They are valid tiktoken ranks that ordinary text rarely
//      reaches; a real tokenizer is trained on far more text.
// Deterministic: the same corpus and n give the same ranks on every machine. Cost: O(merges x corpus pieces),
// fine for the few-KB corpus (kBpeCorpus) and vocabularies up to a few hundred thousand.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kimi::text {

// The text the random-model tokenizer is trained on: a few KB of English prose, C++ / Python code, JSON and
// Chinese / Japanese text (bpe_corpus.cpp).
extern const std::string_view kBpeCorpus;

// Ranks 0..num_ranks-1 as above; num_ranks must be >= 256 (else a kimi::Error). corpus must be valid UTF-8.
std::vector<std::string> train_byte_bpe(std::string_view corpus, size_t num_ranks);

}  // namespace kimi::text
