// The golden runs tests/golden/golden_bytes.sha256 pins (with the kernel fixtures of both
// families): tiny and llama-tiny × fp32/mixed/bf16 × adamw/adamw8bit, and × bf16-pure and
// bf16-kahan with adamw (the only optimizer they run). GoldenBytes writes them on this build,
// Aarch64 on the cross-built one.
#pragma once

#include <string>
#include <vector>

namespace reftrain::testing {

struct PinnedRun {
  std::string preset, precision, optimizer;
  std::string name() const { return preset + "-" + precision + "-" + optimizer; }
  std::string args() const {
    return "golden run --preset " + preset + " --precision " + precision + " --optimizer " +
           optimizer;
  }
};

inline std::vector<PinnedRun> pinned_golden_runs() {
  std::vector<PinnedRun> runs;
  for (const char* preset : {"tiny", "llama-tiny"}) {
    for (const char* precision : {"fp32", "mixed", "bf16"}) {
      for (const char* optimizer : {"adamw", "adamw8bit"})
        runs.push_back({preset, precision, optimizer});
    }
    runs.push_back({preset, "bf16-pure", "adamw"});
    runs.push_back({preset, "bf16-kahan", "adamw"});
  }
  return runs;
}

}  // namespace reftrain::testing
