// `reftrain presets`: the presets with their shape, parameter count and memory.
#include <cstdio>

#include "apps/commands.h"
#include "core/config.h"
#include "core/trainer.h"

namespace reftrain {

CommandRunner add_presets_command(CLI::App&) {
  return [] {
    std::printf("%-12s %-5s %3s %3s %4s %5s %5s %5s %3s %4s %9s %11s %11s  %s\n", "preset", "arch",
                "L", "NH", "C", "F", "maxT", "V", "B", "T", "params", "mem fp32", "mem mixed", "");
    for (const Preset& p : presets()) {
      const ModelConfig& m = p.model;
      const int F = m.arch == Arch::kLlama ? m.ffn : 4 * m.channels;
      const MemoryEstimate fp32 = estimate_memory(m, p.train.batch, p.train.seq, Precision::kFp32);
      const MemoryEstimate mixed =
          estimate_memory(m, p.train.batch, p.train.seq, Precision::kMixed);
      std::printf("%-12s %-5s %3d %3d %4d %5d %5d %5d %3d %4d %8.2fM %7.1f MiB %7.1f MiB  %s\n",
                  p.name.c_str(), arch_name(m.arch), m.layers, m.heads, m.channels, F, m.max_seq,
                  m.vocab, p.train.batch, p.train.seq, double(fp32.params) / 1e6,
                  double(fp32.total()) / (1 << 20), double(mixed.total()) / (1 << 20),
                  p.summary.c_str());
    }
    std::printf(
        "\nmemory = fp32 weights, grads, AdamW m and v (16 bytes per parameter; mixed adds the "
        "2-byte fp16 mirror) + the activation arena at the preset's B and T.\n");
    return 0;
  };
}

}  // namespace reftrain
