// `reftrain golden run` and `reftrain golden kernels`: the golden artifacts a GPU backend checks
// itself against (docs/golden-format.md). A run directory replays a whole training run; the
// kernel fixtures check one kernel at a time.
#include <cstdio>
#include <deque>
#include <memory>
#include <string>

#include "apps/cli_util.h"
#include "apps/commands.h"
#include "core/base/error.h"
#include "core/base/memory.h"
#include "core/golden/golden_kernels.h"
#include "core/golden/golden_run.h"
#include "core/train/config.h"
#include "core/train/data.h"
#include "core/train/trainer.h"

namespace reftrain {

namespace {

struct GoldenRunArgs {
  std::string preset, out, data;
  int steps = 50, dump_step = 0;
  TrainConfig numbers;             // what the training flags below write (none is a number)
  std::deque<FieldOption> fields;  // --precision, --optimizer, --seed
  CLI::Option* data_opt = nullptr;
};

int run_golden_run(const GoldenRunArgs& a) {
  const Preset& preset = find_preset(a.preset);
  TrainConfig train = preset.train;
  train.steps = a.steps;
  for (const FieldOption& o : a.fields) apply_field_option(o, a.numbers, train);
  settle_bf16_attention(train, false);
  validate(preset.model, train);
  if (a.data_opt->count() > 0 && a.data.empty()) throw usage_error("--data needs a file name");
  if (a.out.empty()) throw usage_error("--out needs a directory name");
  // A golden run has the preset's batch: the advice is another preset, not --batch.
  check_memory(estimate_memory(preset.model, train), available_memory(),
               "golden run keeps the preset's --batch and --seq: use a smaller preset");
  Dataset data = a.data.empty() ? load_fortunes() : load_text_file(a.data);
  if (a.dump_step > a.steps) throw usage_error("--dump-step is past --steps");
  write_golden_run(preset, train, std::move(data), a.out, a.dump_step);
  std::printf("golden run: %s, %d steps, %s, %s -> %s\n", preset.name.c_str(), train.steps,
              enum_name(train.precision), enum_name(train.optimizer), a.out.c_str());
  return 0;
}

struct GoldenKernelsArgs {
  std::string arch = "all", scale = "small", out;
  std::string seed = std::to_string(kGoldenKernelSeed);
};

int run_golden_kernels(const GoldenKernelsArgs& a) {
  const uint64_t seed = parse_seed(a.seed);
  if (a.out.empty()) throw usage_error("--out needs a directory name");
  write_golden_kernels(a.out, a.arch, seed, fixture_scale(a.scale));
  int n = 0;
  for (const KernelSpec& k : golden_kernels()) n += in_family(k, a.arch);
  std::printf("golden kernels: %d %sfixtures and manifest.json -> %s\n", n,
              a.scale == "large" ? "large " : "", a.out.c_str());
  return 0;
}

CommandRunner add_golden_run(CLI::App& app) {
  auto a = std::make_shared<GoldenRunArgs>();
  app.add_option("--preset", a->preset, "model and recipe (see `reftrain presets`)")->required();
  app.add_option("--steps", a->steps, "optimizer steps (the schedule spans them)")
      ->transform(decimal_int(1, 1000000))
      ->capture_default_str();
  for (const char* key : {"precision", "optimizer", "seed"}) {
    add_field_option(app, train_field(key), a->numbers, a->fields.emplace_back());
  }
  app.add_option("--dump-step", a->dump_step,
                 "also write step-K.safetensors: every kernel call of step K, inputs and outputs")
      ->transform(decimal_int(1, 1000000));
  a->data_opt = app.add_option("--data", a->data, "UTF-8 text file (default: the fortunes corpus)");
  app.add_option("--out", a->out, "the directory to write (created if missing)")->required();
  return [a] { return run_golden_run(*a); };
}

CommandRunner add_golden_kernels(CLI::App& app) {
  auto a = std::make_shared<GoldenKernelsArgs>();
  app.add_option("--arch", a->arch, "the kernels of one family, or all")
      ->check(one_of({"all", "gpt2", "llama"}))
      ->capture_default_str();
  app.add_option("--scale", a->scale,
                 "small: the cases small and awkward (the pinned fixtures); large: one case at "
                 "C 768, T 1024 (B 1, V 4049) for timing GPU kernels, ~520 MB with --arch all")
      ->check(one_of({"small", "large"}))
      ->capture_default_str();
  app.add_option("--seed", a->seed, "seed of the fixtures' inputs")->capture_default_str();
  app.add_option("--out", a->out, "the directory to write (created if missing)")->required();
  return [a] { return run_golden_kernels(*a); };
}

}  // namespace

CommandRunner add_golden_command(CLI::App& app) {
  app.require_subcommand(1);
  CLI::App* run = app.add_subcommand("run", "train a few steps and write a replayable golden run");
  CLI::App* kernels =
      app.add_subcommand("kernels", "write per-kernel golden tensors and manifest.json");
  const CommandRunner run_cmd = add_golden_run(*run), kernels_cmd = add_golden_kernels(*kernels);
  return [run, run_cmd, kernels_cmd] { return run->parsed() ? run_cmd() : kernels_cmd(); };
}

}  // namespace reftrain
