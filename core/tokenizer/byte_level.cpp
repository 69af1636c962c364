#include "core/tokenizer/byte_level.h"

namespace reftrain {

namespace {

bool stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

}  // namespace

const std::array<char32_t, 256>& byte_to_unicode() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = stands_for_itself(b) ? char32_t(b) : next++;
    return t;
  }();
  return table;
}

const std::array<uint8_t, 256>& gpt2_byte_order() {
  static const std::array<uint8_t, 256> order = [] {
    std::array<uint8_t, 256> o{};
    int i = 0;
    for (int b = 0; b < 256; ++b) {
      if (stands_for_itself(b)) o[i++] = uint8_t(b);
    }
    for (int b = 0; b < 256; ++b) {
      if (!stands_for_itself(b)) o[i++] = uint8_t(b);
    }
    return o;
  }();
  return order;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) append_utf8(out, byte_to_unicode()[static_cast<unsigned char>(c)]);
  return out;
}

// The alphabet's characters are U+0021..U+0143: one or two bytes of UTF-8 each.
std::optional<std::string> from_byte_level(std::string_view text) {
  static const std::array<int, 0x144> byte_of = [] {
    std::array<int, 0x144> t{};
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_to_unicode()[b]] = b;
    return t;
  }();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned b0 = static_cast<unsigned char>(text[i]);
    char32_t cp;
    if (b0 < 0x80) {
      cp = b0, i += 1;
    } else if (b0 >= 0xC2 && b0 <= 0xDF && i + 1 < text.size() &&
               (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
      cp = ((b0 & 0x1F) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F), i += 2;
    } else {
      return std::nullopt;
    }
    if (cp >= byte_of.size() || byte_of[cp] < 0) return std::nullopt;
    out += char(byte_of[cp]);
  }
  return out;
}

}  // namespace reftrain
