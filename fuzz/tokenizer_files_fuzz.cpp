// libFuzzer target: a directory of GPT-2-style tokenizer files (vocab.json + merges.txt, what
// Hugging Face's GPT2Tokenizer reads and `export` writes), read by load_tokenizer(DIR). The input
// is both files: vocab.json up to the first NUL byte, merges.txt after it. An accepted tokenizer
// decodes what it encodes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/base/error.h"
#include "core/tokenizer/tokenizer.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reftrain;
  static fuzz::ScratchDir dir("tokenizer-files");
  const std::string input(data, data + size);
  const size_t nul = input.find('\0');
  dir.write("vocab.json", input.substr(0, nul));
  dir.write("merges.txt", nul == std::string::npos ? std::string() : input.substr(nul + 1));
  try {
    const Tokenizer t = load_tokenizer(dir.path());
    const std::string text = "the cat sat, on 12 mats!\n\xc3\xa9";
    FUZZ_CHECK(t.decode(t.encode(text)) == text);
  } catch (const UserError&) {
  }
  return 0;
}
