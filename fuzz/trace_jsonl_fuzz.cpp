// libFuzzer target: a JSONL trace, read by read_trace as `reftrain plot` and `reftrain compare`
// read it (nlohmann's non-throwing parse per line, then the trace's own checks). A trace it
// accepts starts with its run line, its step and val lines have strictly increasing integer
// steps, and every line survives dump -> parse unchanged, since reftrain writes JSON with dump
// and reads it back. (The exception-throwing parse is not used: building each parse_error's
// message made the target about three times slower.)
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/formats/trace.h"
#include "fuzz/fuzz_input.h"

namespace {

void check_round_trip(const reftrain::Json& j) {
  const std::string again = reftrain::json_text(j);
  const reftrain::Json back = reftrain::Json::parse(again, nullptr, false);
  FUZZ_CHECK(back == j);
  FUZZ_CHECK(reftrain::json_text(back) == again);
}

void check_increasing(const std::vector<reftrain::Json>& lines) {
  long long last = -1;
  for (const reftrain::Json& j : lines) {
    const long long step = j.at("step").get<long long>();
    FUZZ_CHECK(step > last);
    last = step;
    check_round_trip(j);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reftrain;
  static fuzz::ScratchFile file("trace");
  const std::string& path = file.write(data, size);
  try {
    const Trace t = read_trace(path);
    FUZZ_CHECK(t.run.at("type") == "run");
    check_round_trip(t.run);
    check_increasing(t.steps);
    check_increasing(t.vals);
    for (const Json& j : t.other) check_round_trip(j);
  } catch (const UserError&) {
  }
  return 0;
}
