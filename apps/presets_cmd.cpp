// `reftrain presets`: the presets with their shape, parameter count and memory.
#include <cstdio>

#include "apps/commands.h"
#include "core/config.h"
#include "core/trainer.h"

namespace reftrain {

CommandRunner add_presets_command(CLI::App&) {
  return [] {
    std::printf("%-10s %-5s %3s %3s %5s %5s %5s %3s %5s %10s %10s  %s\n", "preset", "arch", "L",
                "NH", "C", "maxT", "V", "B", "T", "params", "memory", "");
    for (const Preset& p : presets()) {
      const ModelConfig& m = p.model;
      const MemoryEstimate mem = estimate_memory(m, p.train.batch, p.train.seq);
      std::printf("%-10s %-5s %3d %3d %5d %5d %5d %3d %5d %9.2fM %8.1f MiB  %s\n", p.name.c_str(),
                  arch_name(m.arch), m.layers, m.heads, m.channels, m.max_seq, m.vocab,
                  p.train.batch, p.train.seq, double(mem.params) / 1e6,
                  double(mem.total()) / (1 << 20), p.summary.c_str());
    }
    std::printf(
        "\nmemory = fp32 weights, grads, AdamW m and v (16 bytes per parameter) + the "
        "activation arena at the preset's B and T.\n");
    return 0;
  };
}

}  // namespace reftrain
