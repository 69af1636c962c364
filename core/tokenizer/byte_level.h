// GPT-2's byte-level alphabet. Its vocabulary files store each token as text: every byte is
// written as one printable Unicode character, so that a token never holds a space, a control
// character or a broken UTF-8 sequence. The 188 printable bytes of Latin-1 ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves; the other 68 (controls, space, DEL, NBSP, soft hyphen) take
// U+0100 onwards in byte order, so the space is 'Ġ' (U+0120) and '\n' is 'Ċ' (U+010A).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace reftrain {

// The character standing for each byte.
const std::array<char32_t, 256>& byte_to_unicode();

// GPT-2's ids of the byte tokens: id i (0..255) is byte kGpt2ByteOrder[i], the bytes in the
// order bytes_to_unicode lists them (the printable ones first). GPT-2's encoder.json and
// tokenizers trained by reftrain number their byte tokens this way.
const std::array<uint8_t, 256>& gpt2_byte_order();

// A token's bytes written in the byte-level alphabet (UTF-8), and back. from_byte_level gives
// nothing when `text` is not valid UTF-8 or holds a character outside the alphabet.
std::string to_byte_level(std::string_view bytes);
std::optional<std::string> from_byte_level(std::string_view text);

// UTF-8 of one code point (cp <= U+10FFFF).
void append_utf8(std::string& out, char32_t cp);

}  // namespace reftrain
