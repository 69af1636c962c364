// libFuzzer target: a JSONL trace, parsed line by line with nlohmann::json as reftrain's
// readers parse JSON (traces, the safetensors header, checkpoint metadata). parse may throw only
// what nlohmann documents for it: parse_error (malformed text, bad UTF-8 or surrogates) and
// out_of_range 406 (a number too large for a double). A line it accepts must survive
// dump -> parse unchanged, since reftrain writes traces with dump and reads them back.
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
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error&) {
      continue;
    } catch (const json::out_of_range& e) {
      FUZZ_CHECK(e.id == 406);
      continue;
    }
    const std::string again = j.dump();
    FUZZ_CHECK(json::parse(again) == j);
    FUZZ_CHECK(json::parse(again).dump() == again);
  }
  return 0;
}
