// GPT-2's pre-tokenization: the text split into chunks by the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matched by hand, with the character classes of JavaScript's /u regular expressions
// (unicode_classes.h). BPE merges never cross a chunk boundary. Every code point is in exactly
// one class (letter, number, space or other), so the chunks tile the text with no gap.
//
// Invalid UTF-8: each byte that does not begin a valid sequence (stray continuation bytes,
// overlong forms, surrogates, values above U+10FFFF, a sequence cut short) is one character of
// class "other", one byte long. A decoder that replaces invalid sequences with U+FFFD (itself
// "other") therefore gets the same chunk boundaries, and every byte stays in some chunk, so
// decode(encode(x)) == x for any bytes.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/tokenizer/unicode_classes.h"

namespace reftrain {

// The character at `pos` (pos < text.size()): its class and its length in bytes (1 for an
// invalid byte).
struct Utf8Char {
  unicode::CharClass cls;
  size_t len;
};
Utf8Char utf8_char_at(std::string_view text, size_t pos);

// The class of a code point (binary search in unicode_classes.h's runs; a table for ASCII).
unicode::CharClass char_class(char32_t cp);

// The end of the chunk that starts at `pos` (pos < text.size()); the next chunk starts there.
size_t pretoken_end(std::string_view text, size_t pos);

// Calls f(chunk) for the chunks of `text` in order.
template <typename F>
void for_each_pretoken(std::string_view text, F&& f) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = pretoken_end(text, pos);
    f(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace reftrain
