// text/unicode_table.h: the character classes of the Kimi pre-tokenizer pattern, per Unicode scalar value.
//
// Each scalar value has a byte of class bits. The bits are the classes that appear in tokenization_kimi.py's
// pat_str, measured on tiktoken's own regex engine by scripts/text/gen_unicode_table.py (unicode_table.cpp is its
// output), so that the splitter sees exactly the Unicode tables tiktoken's wheel was compiled with:
//   kHan    [\p{Han}]                                     (Script=Han, not script extensions)
//   kUpper  [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
//   kLower  [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
//   kLetter \p{L}
//   kNumber \p{N}
//   kSpace  \s                                            (Unicode White_Space)
//   kPySpace Python's str.isspace() (the 25,000-character run splitter of tokenization_kimi.py; not a regex class)
// The pattern's negated classes follow from these (checked by the generator):
//   [^\r\n\p{L}\p{N}] = not CR/LF, not kLetter, not kNumber;   [^\s\p{L}\p{N}] = none of kSpace, kLetter, kNumber.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace kimi::text {

enum CharClass : uint8_t {
  kHan = 1,
  kUpper = 2,
  kLower = 4,
  kLetter = 8,
  kNumber = 16,
  kSpace = 32,
  kPySpace = 64,
};

// Scalar values first..last (inclusive) have the class bits `flags`; values in no range have none.
struct CharRange {
  uint32_t first;
  uint32_t last;
  uint8_t flags;
};

// The scalar values that (?i:x) matches for one ASCII letter x of the contraction group (?i:'s|'t|...): its two
// cases and any further simple case fold (U+017F LONG S for 's'); shorter sets repeat their last value.
struct FoldSet {
  char letter;
  std::array<uint32_t, 3> cps;
};

extern const CharRange kCharRanges[];  // sorted, disjoint
extern const size_t kCharRangeCount;
extern const std::array<FoldSet, 8> kContractionFolds;

// The class bits of scalar value cp.
uint8_t char_flags(uint32_t cp);

// Whether cp matches (?i:letter) for a lowercase ASCII letter of the contraction group.
bool folds_to(uint32_t cp, char letter);

}  // namespace kimi::text
