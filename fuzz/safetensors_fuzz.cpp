// libFuzzer target: read_safetensors, the reader of checkpoints and fixtures. A file it accepts
// must hold exactly the bytes its shapes and dtypes say, and no more bytes than the file has.
// A kernel fixture's "tolerances" metadata (JSON, read by `reftrain compare`) is parsed too.
#include <cstddef>
#include <cstdint>

#include "core/base/error.h"
#include "core/formats/safetensors.h"
#include "core/golden/compare.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reftrain;
  static fuzz::ScratchFile file("safetensors");
  const std::string& path = file.write(data, size);
  try {
    const SafetensorsFile f = read_safetensors(path);
    size_t total = 0;
    for (const auto& [name, t] : f.tensors) {
      size_t numel = 1;
      for (int64_t d : t.shape) {
        FUZZ_CHECK(d >= 0);
        numel *= size_t(d);
      }
      FUZZ_CHECK(t.bytes.size() == numel * dtype_size(t.dtype));
      FUZZ_CHECK(t.numel() == numel);
      FUZZ_CHECK(&f.get(name, t.shape) == &t);
      total += t.bytes.size();
    }
    FUZZ_CHECK(total <= size);
    const auto tolerances = f.metadata.find("tolerances");
    if (tolerances == f.metadata.end()) return 0;
    const Json all = Json::parse(tolerances->second, nullptr, false);
    if (!all.is_object()) return 0;
    for (const auto& [name, tol] : all.items()) Tolerance::from_json(tol, name);
  } catch (const UserError&) {
  }
  return 0;
}
