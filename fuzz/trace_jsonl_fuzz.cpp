// libFuzzer target: a JSONL trace, parsed line by line with nlohmann::json as reftrain's
// readers parse JSON (the safetensors header: parse without exceptions, then check the result).
// Nothing may escape parse; a line it accepts must survive dump -> parse unchanged, since
// reftrain writes JSON with dump and reads it back. (The exception-throwing parse is not used:
// building each parse_error's message made this target about three times slower.)
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (size_t begin = 0; begin <= text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const json j = json::parse(text.begin() + begin, text.begin() + end, nullptr, false);
    begin = end + 1;
    if (j.is_discarded()) continue;
    const std::string again = j.dump();
    const json back = json::parse(again, nullptr, false);
    FUZZ_CHECK(back == j);
    FUZZ_CHECK(back.dump() == again);
  }
  return 0;
}
