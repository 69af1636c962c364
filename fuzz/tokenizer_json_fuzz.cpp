// libFuzzer target: a tokenizer.json, read by load_tokenizer as `train --tokenizer FILE`,
// `tokenizer encode|decode` and `--init-from DIR` (its tokenizer.json) read it. An accepted
// tokenizer decodes what it encodes (byte-level BPE is lossless) and its serialisation reads back
// as the same tokenizer (the same hash).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/base/error.h"
#include "core/tokenizer/tokenizer.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reftrain;
  static fuzz::ScratchDir dir("tokenizer-json");
  const std::string path = dir.write("tokenizer.json", std::string(data, data + size));
  try {
    const Tokenizer t = load_tokenizer(path);
    const std::string text = "the cat sat, on 12 mats!\n\xc3\xa9";
    FUZZ_CHECK(t.decode(t.encode(text)) == text);
    const std::string again = dir.write("again.json", to_tokenizer_json(t));
    FUZZ_CHECK(load_tokenizer(again).hash() == t.hash());
  } catch (const UserError&) {
  }
  return 0;
}
