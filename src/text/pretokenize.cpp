// text/pretokenize.cpp: the pattern's alternatives as scans over class bits (pretokenize.h).
#include "text/pretokenize.h"

#include "text/unicode_table.h"

namespace kimi::text {

namespace {

constexpr uint32_t kCR = '\r', kLF = '\n';

class Splitter {
 public:
  Splitter(const uint32_t* cps, const uint8_t* flags, size_t end) : c_(cps), f_(flags), n_(end) {}

  // The end of the pattern's match at i, or i when no alternative matches there.
  size_t match(size_t i) const {
    if (f_[i] & kHan) return run(i, kHan);
    if (size_t e = letters_lower_end(i); e > i) return e;
    if (size_t e = letters_upper_start(i); e > i) return e;
    if (f_[i] & kNumber) {
      size_t e = i + 1;
      while (e < n_ && e < i + 3 && (f_[e] & kNumber)) ++e;
      return e;
    }
    if (size_t e = punctuation(i); e > i) return e;
    if (f_[i] & kSpace) return whitespace(i);
    return i;
  }

 private:
  bool is_prefix(size_t k) const { return c_[k] != kCR && c_[k] != kLF && !(f_[k] & (kLetter | kNumber)); }
  bool is_punct(size_t k) const { return !(f_[k] & (kSpace | kLetter | kNumber)); }
  bool is_newline(size_t k) const { return c_[k] == kCR || c_[k] == kLF; }

  // The end of the run of characters with any of `bits` starting at i (i when c[i] has none).
  size_t run(size_t i, uint8_t bits) const {
    while (i < n_ && (f_[i] & bits)) ++i;
    return i;
  }

  // C? after a letter run ending at e.
  size_t contraction(size_t e) const {
    if (e + 1 >= n_ || c_[e] != '\'') return e;
    uint32_t a = c_[e + 1];
    if (folds_to(a, 's') || folds_to(a, 't') || folds_to(a, 'm') || folds_to(a, 'd')) return e + 2;
    if (e + 2 < n_) {
      uint32_t b = c_[e + 2];
      if ((folds_to(a, 'r') || folds_to(a, 'v')) && folds_to(b, 'e')) return e + 3;
      if (folds_to(a, 'l') && folds_to(b, 'l')) return e + 3;
    }
    return e;
  }

  // Alternative 2: P? U* L+ C?. With the prefix first, then without; U* from its longest run down to empty until
  // an L follows.
  size_t letters_lower_end(size_t i) const {
    for (size_t p = (is_prefix(i) ? 1 : 0);; --p) {
      size_t j = i + p;
      size_t u = run(j, kUpper);
      for (size_t k = u + 1; k-- > j;) {
        if (k < n_ && (f_[k] & kLower)) return contraction(run(k, kLower));
      }
      if (p == 0) return i;
    }
  }

  // Alternative 3: P? U+ L* C?.
  size_t letters_upper_start(size_t i) const {
    for (size_t p = (is_prefix(i) ? 1 : 0);; --p) {
      size_t j = i + p;
      size_t u = run(j, kUpper);
      if (u > j) return contraction(run(u, kLower));
      if (p == 0) return i;
    }
  }

  // Alternative 5: ' '? [^\s\p{L}\p{N}]+ [\r\n]*.
  size_t punctuation(size_t i) const {
    size_t j = i;
    if (c_[i] == ' ' && i + 1 < n_ && is_punct(i + 1)) {
      j = i + 1;
    } else if (!is_punct(i)) {
      return i;
    }
    while (j < n_ && is_punct(j)) ++j;
    while (j < n_ && is_newline(j)) ++j;
    return j;
  }

  // Alternatives 6, 7 and 8 at a whitespace character i.
  size_t whitespace(size_t i) const {
    size_t w = run(i, kSpace);
    for (size_t k = w; k-- > i;)
      if (is_newline(k)) return k + 1;  // 6: \s* gives back to the last newline, [\r\n]+ takes it
    if (w == n_ || w - i == 1) return w;  // 7 at the end of the text, else 8 for a single character
    return w - 1;                         // 7: (?!\S) holds before the run's last character
  }

  const uint32_t* c_;
  const uint8_t* f_;
  size_t n_;
};

}  // namespace

void pretokenize(const uint32_t* cps, const uint8_t* flags, size_t begin, size_t end, std::vector<Piece>& out) {
  Splitter s(cps, flags, end);
  size_t i = begin;
  while (i < end) {
    size_t e = s.match(i);
    if (e == i) {  // no alternative matches: tiktoken's find_iter moves on without a piece
      ++i;
      continue;
    }
    out.push_back({i, e});
    i = e;
  }
}

}  // namespace kimi::text
