// text/pretokenize.h: the Kimi pre-tokenizer, tokenization_kimi.py's pat_str as tiktoken applies it.
//
// The pattern, eight alternatives tried in order at each position (leftmost-first, backtracking, as tiktoken's
// fancy-regex does), each match ending where the next search starts:
//   1  [\p{Han}]+                                  a run of Han (Script=Han)
//   2  P? U* L+ C?                                 letters ending in lower case
//   3  P? U+ L* C?                                 letters starting in upper case
//   4  \p{N}{1,3}                                  one to three numbers
//   5  ' '? [^\s\p{L}\p{N}]+ [\r\n]*               punctuation, with one leading space and trailing newlines
//   6  \s* [\r\n]+                                 whitespace up to its last newline
//   7  \s+ (?!\S)                                  whitespace but the last one before a non-space
//   8  \s+                                         whitespace
// with P = [^\r\n\p{L}\p{N}], U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]], L = [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
// and C = (?i:'s|'t|'re|'ve|'m|'ll|'d). Backtracking reduces to: in 2, U* gives back characters until one of L
// follows (U and L share Lm, Lo and M); in 6, \s* gives back to the run's last CR or LF; in 7, the run gives back
// its last character unless it reaches the end of the text. Every scalar value matches some alternative, so no
// text is dropped (tiktoken drops what matches nothing; the splitter would skip such a character the same way).
// Character classes: unicode_table.h (measured on tiktoken's regex engine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kimi::text {

// A piece of text: scalar values [begin, end).
struct Piece {
  size_t begin, end;
};

// Splits scalar values cps[begin, end) (flags[i] = char_flags(cps[i])) into the pattern's matches; the range's end is
// the end of the text for the pattern (the lookahead of 7). Appends the pieces in order to out.
void pretokenize(const uint32_t* cps, const uint8_t* flags, size_t begin, size_t end, std::vector<Piece>& out);

}  // namespace kimi::text
