// libFuzzer target: an llm.c GPT-2 checkpoint, loaded as `reftrain train --init-from` does:
// read_llmc_config, the gpt2 layout for that shape, then load_llmc_weights. An accepted file
// has a shape the model can be built for and leaves only finite weights.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/base/error.h"
#include "core/formats/llmc.h"
#include "core/model/gpt2.h"
#include "fuzz/fuzz_input.h"
#include "simd/aligned_buffer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reftrain;
  static fuzz::ScratchFile file("llmc-checkpoint");
  const std::string& path = file.write(data, size);
  try {
    const ModelConfig cfg = read_llmc_config(path);
    const ParamLayout layout = gpt2_param_layout(cfg);
    FUZZ_CHECK(1024 + layout.num_params() * sizeof(float) == size);
    AlignedBuffer<float> w(layout.total());
    load_llmc_weights(path, cfg, layout, w.data());
    for (const ParamTensor& t : layout.tensors()) {
      for (size_t i = 0; i < t.numel; ++i) FUZZ_CHECK(std::isfinite(w[t.offset + i]));
    }
  } catch (const UserError&) {
  }
  return 0;
}
