// libFuzzer target: an llm.c token file, loaded as `reftrain train --data-tokens` does:
// load_llmc_tokens, then the vocabulary check against GPT-2's 50257 ids. An accepted file
// gives every token it holds, split 90/10.
#include <cstddef>
#include <cstdint>

#include "core/base/error.h"
#include "core/train/data.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reftrain;
  static fuzz::ScratchFile file("llmc-tokens");
  const std::string& path = file.write(data, size);
  try {
    const Dataset d = load_llmc_tokens(path);
    const size_t n = d.train.size() + d.val.size();
    FUZZ_CHECK(n > 0 && 1024 + 2 * n == size);
    FUZZ_CHECK(d.train.size() == n * 9 / 10);
    check_vocab(d, 50257);
  } catch (const UserError&) {
  }
  return 0;
}
