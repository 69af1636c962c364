// libFuzzer target: a reftrain checkpoint, read as `train --resume` and `sample --ckpt` read it:
// read_checkpoint parses the safetensors file, then its metadata (the config JSON, data source,
// step counters) and checks every tensor the config implies. An accepted checkpoint holds every
// weight of its config's layout, at its shape, as finite fp32 numbers.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/base/error.h"
#include "core/train/checkpoint.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reftrain;
  static fuzz::ScratchFile file("checkpoint");
  const std::string& path = file.write(data, size);
  try {
    const Checkpoint c = read_checkpoint(path);
    FUZZ_CHECK(c.meta.step >= 0 && c.meta.updates >= 0 && c.meta.updates <= c.meta.step);
    FUZZ_CHECK(c.meta.train.seq <= c.meta.model.max_seq);
    const ParamLayout layout = param_layout(c.meta.model);
    for (const ParamTensor& p : layout.tensors()) {
      const SafeTensor& t =
          c.file.get(p.name, std::vector<int64_t>(p.shape.begin(), p.shape.end()));
      FUZZ_CHECK(t.dtype == DType::kF32 && t.bytes.size() == p.numel * sizeof(float));
      for (size_t i = 0; i < p.numel; ++i) {
        float w;
        std::memcpy(&w, t.bytes.data() + i * sizeof(float), sizeof w);
        FUZZ_CHECK(std::isfinite(w));
      }
    }
  } catch (const UserError&) {
  }
  return 0;
}
