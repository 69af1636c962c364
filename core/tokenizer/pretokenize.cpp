#include "core/tokenizer/pretokenize.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace reftrain {

namespace {

using unicode::CharClass;

// ASCII's classes, looked up directly (most text is mostly ASCII).
const std::array<CharClass, 128> kAsciiClass = [] {
  std::array<CharClass, 128> t{};
  for (char32_t c = 0; c < 128; ++c) {
    const auto* run =
        std::upper_bound(std::begin(unicode::kClassRuns), std::end(unicode::kClassRuns), c,
                         [](char32_t cp, const unicode::ClassRun& r) { return cp < r.first; });
    t[c] = std::prev(run)->cls;
  }
  return t;
}();

unsigned byte_at(std::string_view text, size_t i) {
  return static_cast<unsigned char>(text[i]);
}

bool is_continuation(std::string_view text, size_t i, unsigned lo = 0x80, unsigned hi = 0xBF) {
  return i < text.size() && byte_at(text, i) >= lo && byte_at(text, i) <= hi;
}

}  // namespace

CharClass char_class(char32_t cp) {
  if (cp < 128) return kAsciiClass[cp];
  const auto* run =
      std::upper_bound(std::begin(unicode::kClassRuns), std::end(unicode::kClassRuns), cp,
                       [](char32_t c, const unicode::ClassRun& r) { return c < r.first; });
  return std::prev(run)->cls;
}

// Well-formed UTF-8 as Unicode's Table 3-7 (and the WHATWG decoder node uses) defines it: the
// second byte's range depends on the first (no overlong forms, no surrogates, nothing above
// U+10FFFF).
Utf8Char utf8_char_at(std::string_view text, size_t pos) {
  const unsigned b0 = byte_at(text, pos);
  if (b0 < 0x80) return {kAsciiClass[b0], 1};
  const Utf8Char invalid{unicode::kOther, 1};
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (!is_continuation(text, pos + 1)) return invalid;
    return {char_class(((b0 & 0x1F) << 6) | (byte_at(text, pos + 1) & 0x3F)), 2};
  }
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    const unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    if (!is_continuation(text, pos + 1, lo, hi) || !is_continuation(text, pos + 2)) return invalid;
    return {char_class(((b0 & 0x0F) << 12) | ((byte_at(text, pos + 1) & 0x3F) << 6) |
                       (byte_at(text, pos + 2) & 0x3F)),
            3};
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    const unsigned lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    if (!is_continuation(text, pos + 1, lo, hi) || !is_continuation(text, pos + 2) ||
        !is_continuation(text, pos + 3)) {
      return invalid;
    }
    return {char_class(((b0 & 0x07) << 18) | ((byte_at(text, pos + 1) & 0x3F) << 12) |
                       ((byte_at(text, pos + 2) & 0x3F) << 6) | (byte_at(text, pos + 3) & 0x3F)),
            4};
  }
  return invalid;
}

namespace {

// The end of the run of characters of class `cls` starting at `pos` (pos itself if none).
size_t run_end(std::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    const Utf8Char c = utf8_char_at(text, pos);
    if (c.cls != cls) break;
    pos += c.len;
  }
  return pos;
}

// 's|'t|'re|'ve|'m|'ll|'d at `pos`: the match's length, or 0.
size_t contraction_length(std::string_view text, size_t pos) {
  if (text[pos] != '\'' || pos + 1 >= text.size()) return 0;
  const char a = text[pos + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= text.size()) return 0;
  const char b = text[pos + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

// The alternatives in the pattern's order; the first that matches at `pos` wins, as in a
// backtracking regex engine.
size_t pretoken_end(std::string_view text, size_t pos) {
  if (const size_t n = contraction_length(text, pos)) return pos + n;
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020, then a run of one class.
  // Without the space the run would start with the space itself, which is in none of the
  // three classes, so only one reading needs checking.
  const size_t start = text[pos] == ' ' && pos + 1 < text.size() ? pos + 1 : pos;
  const Utf8Char first = utf8_char_at(text, start);
  if (first.cls != unicode::kSpace) return run_end(text, start + first.len, first.cls);
  // `\s+(?!\S)`: the longest whitespace run, minus its last character when a non-space
  // follows (the lookahead backtracks one character); when that leaves nothing, `\s+` takes
  // the one character.
  size_t end = pos, last = pos;
  while (end < text.size()) {
    const Utf8Char c = utf8_char_at(text, end);
    if (c.cls != unicode::kSpace) break;
    last = end;
    end += c.len;
  }
  if (end == text.size() || last == pos) return end;
  return last;
}

}  // namespace reftrain
