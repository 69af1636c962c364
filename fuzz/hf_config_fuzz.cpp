// libFuzzer target: a Hugging Face config.json, read by read_hf_config as `train --init-from
// DIR/model.safetensors` reads it (the weights are not read: the config alone sets the shape).
// An accepted config describes a model reftrain can lay out: positive dimensions, the width
// divisible by the heads, and a padded vocabulary that is the vocabulary rounded up to 64.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/base/error.h"
#include "core/formats/hf.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reftrain;
  static fuzz::ScratchDir dir("hf-config");
  dir.write(kHfConfigFile, std::string(data, data + size));
  try {
    const ModelConfig m = read_hf_config(dir.path() + "/" + kHfWeightsFile);
    FUZZ_CHECK(m.layers > 0 && m.heads > 0 && m.channels > 0 && m.vocab > 0 && m.max_seq > 0);
    FUZZ_CHECK(m.channels % m.heads == 0);
    FUZZ_CHECK(m.padded_vocab >= m.vocab && m.padded_vocab % 64 == 0 &&
               m.padded_vocab - m.vocab < 64);
  } catch (const UserError&) {
  }
  return 0;
}
