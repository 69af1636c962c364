// `reftrain presets`: the presets with their shape, parameter count and memory.
#include <cstdio>
#include <memory>
#include <string>

#include "apps/cli_util.h"
#include "apps/commands.h"
#include "core/model/model.h"
#include "core/train/config.h"
#include "core/train/data_parallel.h"
#include "core/train/trainer.h"

namespace reftrain {

namespace {
// ZeRO-1: the optimizer state each of n ranks keeps, beside one process's.
void print_state_per_rank(int n) {
  std::printf("\noptimizer state MiB per rank of %d (one process): adamw | adamw8bit\n", n);
  for (const Preset& p : presets()) {
    std::printf("%-12s", p.name.c_str());
    for (Optimizer o : {Optimizer::kAdamW, Optimizer::kAdamW8bit}) {
      TrainConfig t = p.train;
      t.optimizer = o;
      std::printf(" %9.1f (%.1f)", estimate_memory(p.model, t, n).state_bytes / double(1 << 20),
                  estimate_memory(p.model, t, 1).state_bytes / double(1 << 20));
    }
    std::printf("\n");
  }
}
}  // namespace

CommandRunner add_presets_command(CLI::App& app) {
  auto ranks = std::make_shared<int>(1);
  app.add_option("--ranks", *ranks,
                 "memory per rank of `mpirun -np N reftrain train` (each rank keeps 1/N of the "
                 "optimizer state)")
      ->transform(decimal_int(1, kMaxRanks));
  return [ranks] {
    const int n = *ranks;
    std::printf("%-12s %-5s %3s %3s %4s %5s %5s %5s %3s %4s %10s %8s  %s%s\n", "preset", "arch",
                "L", "NH", "C", "F", "maxT", "V", "B", "T", "tok/step", "params",
                "memory MiB: adamw fp32 | mixed | bf16 | adamw8bit fp32 | mixed | bf16",
                n > 1 ? (" (per rank of " + std::to_string(n) + ")").c_str() : "");
    const Precision precisions[] = {Precision::kFp32, Precision::kMixed, Precision::kBf16};
    for (const Preset& p : presets()) {
      const ModelConfig& m = p.model;
      TrainConfig step = p.train;  // --grad-accum K per rank: N·K micro-batches a step
      step.grad_accum = MicroBatches::of_ranks(step.grad_accum, n).total;
      const int F = mlp_width(m);
      std::printf("%-12s %-5s %3d %3d %4d %5d %5d %5d %3d %4d %10lld %7.2fM ", p.name.c_str(),
                  enum_name(m.arch), m.layers, m.heads, m.channels, F, m.max_seq, m.vocab,
                  p.train.batch, p.train.seq, tokens_per_step(step),
                  double(param_layout(m).num_params()) / 1e6);
      for (Optimizer o : {Optimizer::kAdamW, Optimizer::kAdamW8bit}) {
        for (Precision prec : precisions) {
          TrainConfig t = step;
          t.precision = prec, t.optimizer = o;
          settle_bf16_attention(t, false);
          const MemoryEstimate e = estimate_memory(m, t, n);
          std::printf(" %9.1f", double(e.total()) / (1 << 20));
        }
      }
      std::printf("  %s\n", p.summary.c_str());
    }
    if (n > 1) print_state_per_rank(n);
    std::printf(
        "\nbytes per parameter: fp32 weights 4 + grads 4 + optimizer state (adamw: m 4 + v 4; "
        "adamw8bit: m 1 + v 1 + 8/256 for the block scales) + fp16 mirror 2 in mixed precision, "
        "bf16 mirror 2 in bf16:\n"
        "  adamw fp32 16, mixed and bf16 18; adamw8bit fp32 10.03, mixed and bf16 12.03 "
        "(bf16-pure: bf16's, its bf16 weights held widened in f32 too; bf16-kahan: bf16-pure's "
        "+ 2 for the compensation). Memory "
        "adds the activation arena at the preset's B and T (in bf16: the materialised "
        "attention's T×T probabilities, the bf16 copies of every product's operands and their "
        "packed panels, widened to f32 where the CPU has no bf16 instructions; and, "
        "from the sample that ends a run, about 2 bytes per weight and per cached key and value "
        "for what decoding keeps packed).\n"
        "tok/step: tokens per optimizer step, K·B·T; --grad-accum K runs K micro-batches of B×T "
        "per step (4 more bytes per parameter, the gradient sum, when K > 1).\n"
        "--ranks N: the same for each rank of `mpirun -np N`: tok/step N·K·B·T, the optimizer "
        "state 1/N per rank, and (N+1)/N·4 bytes per parameter for the gradient exchange "
        "(docs/distributed.md).\n");
    return 0;
  };
}

}  // namespace reftrain
