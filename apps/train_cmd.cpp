// `reftrain train`: trains a preset, prints a live progress line, validation loss every N
// steps and a sample at the end, and optionally writes a JSONL trace.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "apps/cli_util.h"
#include "apps/commands.h"
#include "core/config.h"
#include "core/data.h"
#include "core/error.h"
#include "core/llmc.h"
#include "core/memory.h"
#include "core/trace.h"
#include "core/trainer.h"

namespace reftrain {

namespace {

struct TrainArgs {
  std::string preset = kDefaultPreset;
  std::string data, data_tokens, init_from, trace;
  std::string schedule, seed, precision, optimizer, attention, matmul;
  TrainConfig over;  // values given on the command line; see `given`
  int threads = 0;
  std::map<std::string, CLI::Option*> given;
};

// Applies every option the user gave over the preset's values.
TrainConfig merged_config(const TrainArgs& a, TrainConfig t) {
  auto set = [&a](const char* name, auto& dst, auto src) {
    if (a.given.at(name)->count() > 0) dst = src;
  };
  set("--steps", t.steps, a.over.steps), set("--batch", t.batch, a.over.batch);
  set("--seq", t.seq, a.over.seq), set("--lr", t.lr, a.over.lr);
  set("--min-lr", t.min_lr, a.over.min_lr), set("--wd", t.wd, a.over.wd);
  set("--beta1", t.beta1, a.over.beta1), set("--beta2", t.beta2, a.over.beta2);
  set("--eps", t.eps, a.over.eps), set("--clip", t.clip, a.over.clip);
  set("--warmup", t.warmup, a.over.warmup);
  set("--val-every", t.val_every, a.over.val_every);
  set("--z-loss", t.z_loss, a.over.z_loss);
  if (a.given.at("--lr")->count() > 0 && a.given.at("--min-lr")->count() == 0) {
    t.min_lr = std::min(t.min_lr, t.lr);  // keep min_lr ≤ lr when only --lr is given
  }
  if (a.given.at("--seed")->count() > 0) t.seed = parse_seed(a.seed);
  if (!a.precision.empty()) {
    t.precision = a.precision == "mixed" ? Precision::kMixed : Precision::kFp32;
  }
  if (!a.optimizer.empty()) {
    t.optimizer = a.optimizer == "adamw8bit" ? Optimizer::kAdamW8bit : Optimizer::kAdamW;
  }
  if (!a.attention.empty()) {
    t.attention =
        a.attention == "materialised" ? AttentionKind::kMaterialised : AttentionKind::kFused;
  }
  if (!a.schedule.empty())
    t.schedule = a.schedule == "cosine" ? Schedule::kCosine : Schedule::kConstant;
  if (!a.matmul.empty()) matmul_from_name(a.matmul, &t.matmul);
  return t;
}

std::string duration(double seconds) {
  char buf[32];
  const long s = std::lround(seconds);
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

// The live progress line: rewritten in place on a terminal, one line every few steps otherwise.
class Progress {
 public:
  Progress(int steps, int tokens_per_step)
      : steps_(steps),
        tokens_(tokens_per_step),
        tty_(isatty(fileno(stdout))),
        every_(std::max(1, steps / 20)) {}
  void step(const StepResult& r) {
    total_ms_ += r.ms;
    const double avg_ms = total_ms_ / r.step;
    if (tty_ || r.step == 1 || r.step % every_ == 0 || r.step == steps_) {
      std::printf(
          "%sstep %*d/%d | loss %.4f | lr %.2e | norm %6.3f | %7.0f tok/s | %7.1f ms/step "
          "| ETA %s%s",
          tty_ ? "\r\033[K" : "", width(), r.step, steps_, r.loss, r.lr, r.grad_norm,
          tokens_ / (avg_ms / 1000.0), avg_ms,
          duration((steps_ - r.step) * avg_ms / 1000.0).c_str(), tty_ ? "" : "\n");
      std::fflush(stdout);
    }
  }
  void line(const std::string& text) {
    std::printf("%s%s\n", tty_ ? "\r\033[K" : "", text.c_str());
    std::fflush(stdout);
  }
  void finish() {
    if (tty_) std::printf("\n");
  }
  double total_seconds() const { return total_ms_ / 1000.0; }

 private:
  int width() const { return int(std::to_string(steps_).size()); }
  int steps_, tokens_;
  bool tty_;
  int every_;
  double total_ms_ = 0.0;
};

Dataset load_data(const TrainArgs& a) {
  for (const char* name : {"--data", "--data-tokens", "--init-from"}) {
    const CLI::Option* o = a.given.at(name);
    if (o->count() > 0 && o->as<std::string>().empty()) {
      throw usage_error(std::string(name) + " needs a file name");
    }
  }
  if (!a.data_tokens.empty()) return load_llmc_tokens(a.data_tokens);
  if (!a.data.empty()) return load_text_file(a.data);
  return load_fortunes();
}

std::string show_sample(const Dataset& data, const std::vector<int32_t>& tokens) {
  if (data.kind == "text") return decode_bytes(tokens);
  std::string s = "(token ids; reftrain has no GPT-2 tokenizer)";
  for (int32_t t : tokens) s += " " + std::to_string(t);
  return s;
}

// The run's peak resident memory next to what estimate_memory() predicted for it.
void report_memory(TraceWriter& trace, size_t baseline, const MemoryEstimate& est) {
  const double mib = 1 << 20;
  const size_t peak = peak_resident_bytes();
  const size_t expected = baseline + est.total();
  std::printf(
      "\nmemory: peak resident %.1f MiB; expected %.1f MiB = %.1f before the model + "
      "%.1f estimated (%.1f parameters and optimizer state, %.1f activations); %+.1f%%\n",
      peak / mib, expected / mib, baseline / mib, est.total() / mib, est.param_bytes / mib,
      est.arena_bytes / mib, 100.0 * (double(peak) - double(expected)) / double(expected));
  trace.write({{"type", "memory"},
               {"peak_bytes", peak},
               {"baseline_bytes", baseline},
               {"estimate_bytes", est.total()}});
}

void print_banner(const Preset& preset, const ModelConfig& model, const TrainConfig& train,
                  Trainer& trainer, const std::string& init) {
  const Dataset& d = trainer.data();
  std::printf(
      "reftrain %s | preset %s | %s L%d NH%d C%d | %.2fM params | %s | B%d T%d | %d steps | "
      "%d threads | matmul %s\n",
      REFTRAIN_VERSION, preset.name.c_str(), arch_name(model.arch), model.layers, model.heads,
      model.channels, trainer.model().layout().num_params() / 1e6, precision_name(train.precision),
      train.batch, train.seq, train.steps, omp_get_max_threads(), matmul_name(train.matmul));
  std::printf("data: %s %s | %zu train + %zu val tokens | init: %s\n", d.kind.c_str(),
              d.source.c_str(), d.train.size(), d.val.size(), init.c_str());
}

// The steps, with validation at step 0, every val_every steps and at the end, each traced.
void train_loop(Trainer& trainer, TraceWriter& trace, const TrainConfig& train) {
  Progress progress(train.steps, train.batch * train.seq);
  auto validate_at = [&](int step) {
    const float val = trainer.validate();
    char buf[96];
    std::snprintf(buf, sizeof buf, "val  step %d | val loss %.4f", step, val);
    progress.line(buf);
    trace.write({{"type", "val"}, {"step", step}, {"val_loss", json_float(val)}});
  };
  validate_at(0);
  for (int k = 0; k < train.steps; ++k) {
    const StepResult r = trainer.step(k);
    progress.step(r);
    trace.write({{"type", "step"},
                 {"step", r.step},
                 {"loss", json_float(r.loss)},
                 {"lr", json_float(r.lr)},
                 {"grad_norm", json_float(r.grad_norm)},
                 {"clip", json_float(r.clip)},
                 {"ms", std::round(r.ms * 1000.0) / 1000.0}});
    if (!std::isfinite(r.loss)) {
      throw input_error("loss is not finite at step " + std::to_string(r.step) +
                        "; lower --lr or check the data");
    }
    const bool last = r.step == train.steps;
    if (last || (train.val_every > 0 && r.step % train.val_every == 0)) validate_at(r.step);
  }
  progress.finish();
  std::printf("done: %d steps in %s\n", train.steps, duration(progress.total_seconds()).c_str());
}

int run_train(const TrainArgs& a) {
  const Preset& preset = find_preset(a.preset);
  ModelConfig model = preset.model;
  TrainConfig train = merged_config(a, preset.train);
  if (!a.init_from.empty()) model = read_llmc_config(a.init_from);
  validate(model, train);
  if (a.threads > 0) omp_set_num_threads(a.threads);

  Dataset data = load_data(a);
  // Memory from here on is the model's: reset the peak so loading's transients do not count.
  reset_peak_resident();
  const size_t baseline = resident_bytes();
  Trainer trainer(model, train, std::move(data));
  std::string init = "normal(0.02) from seed " + std::to_string(train.seed);
  if (!a.init_from.empty()) {
    load_llmc_weights(a.init_from, model, trainer.model().layout(), trainer.model().weights());
    trainer.model().refresh_mirror();
    init = "llm.c checkpoint " + a.init_from;
  }
  TraceWriter trace(a.trace);
  trace.write(trainer.describe(preset.name, init));
  print_banner(preset, model, train, trainer, init);

  train_loop(trainer, trace, train);
  const Dataset& d = trainer.data();
  const std::vector<int32_t> prompt = {d.kind == "text" ? int32_t('\n') : int32_t(model.vocab - 1)};
  std::printf("\nsample:\n%s\n",
              show_sample(d, trainer.sample(prompt, 256, 1.0f, train.seed)).c_str());
  report_memory(trace, baseline,
                estimate_memory(model, train.batch, train.seq, train.precision, train.optimizer,
                                train.attention, train.matmul));
  return 0;
}

}  // namespace

CommandRunner add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  app.add_option("--preset", a->preset, "model and recipe (see `reftrain presets`)")
      ->capture_default_str();
  a->given["--data"] =
      app.add_option("--data", a->data, "UTF-8 text file (default: the fortunes corpus)");
  a->given["--data-tokens"] =
      app.add_option("--data-tokens", a->data_tokens, "llm.c token file (uint16, magic 20240520)")
          ->excludes(a->given["--data"]);
  a->given["--init-from"] =
      app.add_option("--init-from", a->init_from, "llm.c GPT-2 checkpoint (fp32, magic 20240326)");
  app.add_option("--trace", a->trace, "write a JSONL trace of the run to this file");
  auto opt = [&](const char* name, auto& dst, const char* help) {
    a->given[name] = app.add_option(name, dst, help);
  };
  TrainConfig& o = a->over;
  opt("--steps", o.steps, "optimizer steps");
  opt("--batch", o.batch, "sequences per batch (B)");
  opt("--seq", o.seq, "tokens per sequence (T), at most the model's maximum");
  opt("--lr", o.lr, "peak learning rate");
  opt("--min-lr", o.min_lr, "learning rate at the end of the cosine decay");
  opt("--wd", o.wd, "AdamW weight decay (matrices and embeddings only)");
  opt("--beta1", o.beta1, "AdamW beta1");
  opt("--beta2", o.beta2, "AdamW beta2");
  opt("--eps", o.eps, "AdamW epsilon");
  opt("--clip", o.clip, "max global gradient norm (0 = off)");
  opt("--warmup", o.warmup, "linear warmup steps");
  a->given["--seed"] =
      app.add_option("--seed", a->seed, "seed for init, batches and sampling (0 .. 2^64-1)");
  opt("--val-every", o.val_every, "validation loss every N steps (0 = only at the end)");
  opt("--z-loss", o.z_loss, "z in loss = CE + z·mean(logsumexp²) (preset: 0 gpt2, 1e-4 llama)");
  app.add_option("--precision", a->precision,
                 "fp32, or mixed: matmuls read the fp16 weight mirror (default fp32)")
      ->check(CLI::IsMember({"fp32", "mixed"}));
  app.add_option("--optimizer", a->optimizer,
                 "adamw (fp32 state) or adamw8bit (8-bit m and v, one scale per 256 elements)")
      ->check(CLI::IsMember({"adamw", "adamw8bit"}));
  app.add_option("--attention", a->attention,
                 "fused (online softmax, keeps the row logsumexp) or materialised (the reference, "
                 "keeps the T×T probabilities) (default fused)")
      ->check(CLI::IsMember({"fused", "materialised"}));
  app.add_option("--matmul", a->matmul,
                 "linear-layer GEMM: naive, tiled, blocked or eigen (default blocked)")
      ->check(CLI::IsMember({"naive", "tiled", "blocked", "eigen"}));
  app.add_option("--schedule", a->schedule, "learning-rate schedule after warmup")
      ->check(CLI::IsMember({"cosine", "constant"}));
  app.add_option("--threads", a->threads, "OpenMP threads (default: all cores)")
      ->check(CLI::Range(1, 4096));
  return [a] { return run_train(*a); };
}

}  // namespace reftrain
