// A bound on JSON nesting, checked on the text before it is parsed: parsing builds a container
// per level, ~40 bytes of memory per byte of "[[[[", so a 20 MB file of brackets would cost
// ~1.6 GB before any check of its contents could run. Every JSON reader calls this first, with
// the depth its format needs.
#pragma once

#include <string_view>

namespace reftrain {

// True when `text` nests [ and { deeper than `limit` (strings skipped, escapes honoured).
inline bool json_nested_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace reftrain
