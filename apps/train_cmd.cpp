// `reftrain train`: trains a preset, prints a live progress line, validation loss every N
// steps and a sample at the end, and optionally writes a JSONL trace, checkpoints (--out) and a
// loss plot. `--resume` continues a run from its checkpoint, bit-exactly (docs/checkpoints.md).
// This file parses the flags and prints; the run itself (plan, resume, steps, checkpoints, the
// stop on a signal) is core/train/run_plan.h and core/train/run.h.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "apps/cli_util.h"
#include "apps/commands.h"
#include "apps/plot.h"
#include "core/base/error.h"
#include "core/base/memory.h"
#include "core/dist/comm.h"
#include "core/formats/atomic_file.h"
#include "core/formats/trace.h"
#include "core/model/kernel_profile.h"
#include "core/train/checkpoint.h"
#include "core/train/config.h"
#include "core/train/data.h"
#include "core/train/run.h"
#include "core/train/trainer.h"
#include "optim/kernel_table.h"

namespace reftrain {

namespace {

struct TrainArgs {
  std::string preset = kDefaultPreset;
  std::string data, data_tokens, init_from, trace, tokenizer;
  std::string out, resume, plot, eval_data;
  int save_every = 0, keep = 0, stop_after = 0;
  int layers = 0, heads = 0, channels = 0, max_seq = 0;  // the model's shape over the preset's
  bool skip_nonfinite = false;
  bool profile = false;
  TrainConfig over;                // numbers given on the command line; see `given`
  std::deque<FieldOption> fields;  // one per training value a flag sets
  int threads = 0;
  int ranks = 1;  // Comm::world().size(): `mpirun -np N` starts N
  std::map<std::string, CLI::Option*> given;
  bool has(const char* flag) const { return given.at(flag)->count() > 0; }
};

// --kernels reference runs the reference table, variants included (optim/kernel_table.h): a
// flag asking for another variant is a usage error naming the flag, and the preset's or the
// checkpoint's variants give way to the table's.
void require_reference_kernels(const TrainArgs& a, TrainConfig& t) {
  const KernelTable ref = reference_kernels();
  const auto conflict = [&a](const char* flag, const std::string& value, const char* needs) {
    if (a.has(flag) && value != needs) {
      throw usage_error(std::string(flag) + " " + value + " conflicts with --kernels reference, " +
                        "which runs " + flag + " " + needs + "; leave " + flag + " out");
    }
  };
  conflict("--matmul", enum_name(t.matmul), enum_name(ref.matmul));
  conflict("--attention", enum_name(t.attention), enum_name(ref.attention));
  t.matmul = ref.matmul, t.attention = ref.attention;
}

// Applies every option the user gave over the preset's values or the checkpoint's (grad_accum
// per rank: plan_run turns it into the step's micro-batches).
TrainConfig configured(const TrainArgs& a, TrainConfig t) {
  for (const FieldOption& o : a.fields) apply_field_option(o, a.over, t);
  if (a.has("--lr") && !a.has("--min-lr")) {
    t.min_lr = std::min(t.min_lr, t.lr);  // keep min_lr ≤ lr when only --lr is given
  }
  if (t.kernels == Kernels::kReference) require_reference_kernels(a, t);
  settle_bf16_attention(t, a.has("--attention"));
  return t;
}

// The flags as plan_run reads them.
RunRequest run_request(const TrainArgs& a) {
  RunRequest r;
  r.preset = a.preset, r.preset_given = a.has("--preset");
  const auto text = [&a](const char* flag, const std::string& value) {
    return a.has(flag) ? std::optional<std::string>(value) : std::nullopt;
  };
  r.data = text("--data", a.data), r.data_tokens = text("--data-tokens", a.data_tokens);
  r.init_from = text("--init-from", a.init_from);
  // auto is the default, not a file: it stays unnamed so a resumed run reloads its own.
  const bool auto_given = a.has("--tokenizer") && a.tokenizer == "auto";
  if (!auto_given) r.tokenizer = text("--tokenizer", a.tokenizer);
  r.auto_tokenizer = a.resume.empty() && (auto_given || !a.has("--tokenizer"));
  if (auto_given && (a.has("--data-tokens") || a.has("--init-from"))) {
    throw usage_error(std::string("--tokenizer auto trains a tokenizer on text, which ") +
                      (a.has("--data-tokens") ? "--data-tokens" : "--init-from") +
                      " rules out; name the tokenizer (gpt2, a tokenizer.json) or leave it out");
  }
  r.resume = a.resume, r.out = a.out;
  const auto optional = [&a](const char* flag, int value) {
    return a.has(flag) ? std::optional<int>(value) : std::nullopt;
  };
  r.steps = optional("--steps", a.over.steps);
  r.save_every = optional("--save-every", a.save_every);
  r.keep = optional("--keep", a.keep);
  r.stop_after = optional("--stop-after", a.stop_after);
  r.layers = optional("--layers", a.layers), r.heads = optional("--heads", a.heads);
  r.channels = optional("--channels", a.channels), r.max_seq = optional("--max-seq", a.max_seq);
  r.grad_accum_given = a.has("--grad-accum");
  r.ranks = a.ranks;
  r.configure = [&a](const TrainConfig& base) { return configured(a, base); };
  return r;
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

// The live progress line: rewritten in place on a terminal, one line every few steps otherwise;
// validations, checkpoints and skipped steps on lines of their own.
class Progress : public RunObserver {
 public:
  // Steps start+1 .. stop of a `steps`-step run.
  Progress(int start, int stop, int steps, long long tokens_per_step)
      : start_(start),
        stop_(stop),
        steps_(steps),
        tokens_(tokens_per_step),
        tty_(isatty(fileno(stdout))),
        every_(std::max(1, steps / 20)) {}
  void stepped(Trainer&, const StepResult& r, StepRecord&) override {
    total_ms_ += r.ms;
    const double avg_ms = total_ms_ / (r.step - start_);
    if (tty_ || r.step == start_ + 1 || r.step % every_ == 0 || r.step == stop_) {
      std::printf(
          "%sstep %*d/%d | loss %.4f | lr %.2e | norm %6.3f | %7.0f tok/s | %7.1f ms/step "
          "| ETA %s%s",
          tty_ ? "\r\033[K" : "", width(), r.step, steps_, r.loss, r.lr, r.grad_norm,
          tokens_ / (avg_ms / 1000.0), avg_ms, duration((stop_ - r.step) * avg_ms / 1000.0).c_str(),
          tty_ ? "" : "\n");
      std::fflush(stdout);
    }
  }
  void validated(const Validation& v) override {
    char buf[96];
    std::snprintf(buf, sizeof buf, "val  step %d | val loss %.4f", v.step, v.loss);
    std::string line = buf;
    if (std::isfinite(v.bits_per_byte)) {
      std::snprintf(buf, sizeof buf, " | %.3f bits/byte", v.bits_per_byte);
      line += buf;
    }
    note(line + (v.best.empty() ? "" : " | best: " + v.best));
  }
  void saved(const std::string& path) override { note("checkpoint " + path); }
  void note(const std::string& text) override {
    std::printf("%s%s\n", tty_ ? "\r\033[K" : "", text.c_str());
    std::fflush(stdout);
  }
  void finish() {
    if (tty_) std::printf("\n");
  }

 private:
  int width() const { return int(std::to_string(steps_).size()); }
  int start_, stop_, steps_;
  long long tokens_;
  bool tty_;
  int every_;
  double total_ms_ = 0.0;
};

// The run's peak resident memory next to what estimate_memory() predicted for it.
void report_memory(RunLog& log, size_t baseline, const MemoryEstimate& est) {
  const double mib = 1 << 20;
  const size_t peak = peak_resident_bytes();
  const size_t expected = baseline + est.total();
  std::printf(
      "\nmemory: peak resident %.1f MiB; expected %.1f MiB = %.1f before the model + "
      "%.1f estimated (%.1f parameters and optimizer state, %.1f activations); %+.1f%%\n",
      peak / mib, expected / mib, baseline / mib, est.total() / mib, est.param_bytes / mib,
      est.arena_bytes / mib, 100.0 * (double(peak) - double(expected)) / double(expected));
  log.write({{"type", "memory"},
             {"peak_bytes", peak},
             {"baseline_bytes", baseline},
             {"estimate_bytes", est.total()}});
}

// "K4" (micro-batches per step), or "K4 = 2 ranks × 2" on several ranks.
std::string accumulation_text(const TrainConfig& train, int ranks) {
  if (ranks == 1) return train.grad_accum > 1 ? " K" + std::to_string(train.grad_accum) : "";
  const MicroBatches m = MicroBatches::split(train.grad_accum, ranks);
  return " K" + std::to_string(m.total) + " = " + std::to_string(ranks) + " ranks × " +
         std::to_string(m.per_rank());
}

void print_banner(const std::string& preset, const ModelConfig& model, const TrainConfig& train,
                  Trainer& trainer, const std::string& init) {
  const Dataset& d = trainer.data();
  const int ranks = trainer.comm().size();
  std::printf(
      "reftrain %s | preset %s | %s L%d NH%d C%d | %.2fM params | %s | B%d T%d%s | %lld tokens "
      "per step | %d steps | %d threads%s | matmul %s\n",
      REFTRAIN_VERSION, preset.c_str(), enum_name(model.arch), model.layers, model.heads,
      model.channels, trainer.model().layout().num_params() / 1e6, enum_name(train.precision),
      train.batch, train.seq, accumulation_text(train, ranks).c_str(), tokens_per_step(train),
      train.steps, omp_get_max_threads(),
      ranks > 1 ? (" per rank | " + std::to_string(ranks) + " ranks").c_str() : "",
      enum_name(train.matmul));
  std::printf("data: %s %s | %zu train + %zu val tokens | init: %s\n", d.kind.c_str(),
              d.source.c_str(), d.train.size(), d.val.size(), init.c_str());
  const TokenizerRecord t = tokenizer_record(d.tokenizer.get());
  if (t.kind != "bytes" && t.kind != "none") {
    std::printf("tokenizer: %s, %d tokens, %.2f bytes per token | %s\n", t.kind.c_str(), t.vocab,
                d.train.empty() ? 0.0 : double(d.train_bytes) / double(d.train.size()),
                t.source.c_str());
  }
  if (ranks > 1) {
    const double mib = 1 << 20;
    std::printf("optimizer state: %.1f MiB per rank (ZeRO-1: 1/%d of %.1f MiB)\n",
                estimate_memory(model, train, ranks).state_bytes / mib, ranks,
                estimate_memory(model, train, 1).state_bytes / mib);
  }
}

// Several ranks: rank 0's traffic and the time it spent exchanging, per step.
void report_exchange(Trainer& trainer, int steps, double seconds) {
  const DataParallel* dp = trainer.data_parallel();
  if (!dp || steps <= 0) return;
  std::printf("exchange: rank 0 sent %.2f MiB per step and spent %.1f ms per step (%.0f%%) in it\n",
              double(trainer.comm().bytes_sent()) / (1 << 20) / steps,
              1000.0 * dp->exchange_seconds() / steps, 100.0 * dp->exchange_seconds() / seconds);
}

// The sample that ends a run: 256 tokens after <|endoftext|> (or a newline: default_prompt),
// at sample's default temperature, from the nucleus of 0.9 (the first text a user reads: the tail
// of unlikely tokens is what reads as gibberish; bench/RESULTS.md, "Issue 31", counts its words).
void print_sample(Trainer& trainer) {
  const std::shared_ptr<const Tokenizer>& tokenizer = trainer.data().tokenizer;
  const int32_t prompt = default_prompt(tokenizer.get(), trainer.model().config().vocab);
  std::printf("\nsample:\n%s", tokenizer ? "" : "(token ids; pass --tokenizer to read them)");
  SampleOptions options;
  options.tokens = 256, options.seed = trainer.train_config().seed, options.top_p = 0.9f;
  try {
    trainer.sample({prompt}, options, token_printer(tokenizer, false));
  } catch (const UserError& e) {
    std::printf("(none: %s)", e.what());
  }
  std::printf("\n");
}

// --eval-data: the held-out text under the run's tokenizer, evaluated by the trained model (in
// its own trace line, "eval").
void report_eval(const std::string& path, const std::vector<int32_t>& ids, Trainer& trainer,
                 RunLog& log, int step) {
  const TrainConfig& t = trainer.train_config();
  const EvalResult e =
      evaluate_with_progress(trainer.model(), t.batch, t.seq, ids, *trainer.data().tokenizer);
  std::printf("eval %s: %s\n", path.c_str(), eval_summary(e).c_str());
  log.write({{"type", "eval"},
             {"step", step},
             {"file", path},
             {"loss", e.loss()},
             {"perplexity", e.perplexity()},
             {"bpb", e.bits_per_byte()},
             {"tokens", e.tokens},
             {"bytes", e.bytes}});
}

void write_plot(const TrainArgs& a, const RunPlan& p, const Trace& lines) {
  if (a.plot.empty()) return;
  const std::string label = a.trace.empty() ? "run" : trace_label(a.trace);
  write_text_file(a.plot, loss_plot_svg({{label, &lines}}, "loss of " + p.preset + " (" +
                                                               enum_name(p.train.precision) + ", " +
                                                               enum_name(p.train.optimizer) + ")"));
  std::printf("plot: %s\n", a.plot.c_str());
}

// No output may be an input or the other output, and none may sit in --out under a
// checkpoint's name, where a save would replace it.
void refuse_clobbering_run_outputs(const TrainArgs& a, const RunPlan& p) {
  std::vector<NamedPath> inputs = {{"--data", a.data},
                                   {"--eval-data", a.eval_data},
                                   {"--data-tokens", a.data_tokens},
                                   {"--init-from", a.init_from},
                                   {"--tokenizer", a.tokenizer}};
  if (p.ckpt) {
    inputs.push_back({"the checkpoint resumed,", p.ckpt->path});
    inputs.push_back({"the checkpoint's data", p.data_path});
  }
  const std::vector<NamedPath> outputs = {{"--trace", a.trace}, {"--plot", a.plot}};
  refuse_clobbering(outputs, inputs);
  for (const NamedPath& o : outputs) {
    const std::filesystem::path path(o.path);
    const std::string dir = path.parent_path().empty() ? "." : path.parent_path().string();
    if (p.out.empty() || path.filename().string().rfind("ckpt-", 0) != 0 ||
        !same_file(dir, p.out)) {
      continue;
    }
    throw usage_error(o.flag + " " + o.path + " is in --out " + p.out +
                      " under a checkpoint's name, which a save would replace; choose another " +
                      o.flag);
  }
}

// The end of the steps: how many, how long, the profile and the exchange.
void report_steps(const LoopEnd& end, const RunPlan& p, KernelProfile* profile, Trainer& trainer) {
  std::printf("done: steps %d..%d in %s%s\n", p.start + 1, end.done, duration(end.seconds).c_str(),
              end.skipped
                  ? (", " + std::to_string(end.skipped) + " skipped (loss not finite)").c_str()
                  : "");
  if (profile) profile->print(stdout, end.profiled_steps, end.profiled_ms);
  report_exchange(trainer, end.done - p.start, end.seconds);
}

// After a stop signal: the checkpoint the run saved, or what was lost.
int report_stop(const LoopEnd& end, const RunPlan& p) {
  const std::string what = std::string(end.signal == SIGINT ? "SIGINT" : "SIGTERM") +
                           ": stopped after step " + std::to_string(end.done) + " of " +
                           std::to_string(p.train.steps);
  if (!p.out.empty() && end.done == p.start) {
    std::printf("%s; no step taken since the start, nothing new to save\n", what.c_str());
  } else if (!p.out.empty()) {
    std::printf("%s; checkpoint %s; continue with: reftrain train --resume %s\n", what.c_str(),
                end.checkpoint.c_str(), p.out.c_str());
  } else {
    std::printf(
        "%s; its %d steps are lost (no --out); pass --out DIR to save a checkpoint when "
        "stopped (and --save-every N to save while running)\n",
        what.c_str(), end.done - p.start);
  }
  return 128 + end.signal;
}

void require_names(const TrainArgs& a) {
  for (const char* name : {"--out", "--resume", "--plot"}) {
    if (a.has(name) && a.given.at(name)->as<std::string>().empty()) {
      throw usage_error(std::string(name) + " needs a " +
                        (std::string(name) == "--plot" ? "file name" : "path"));
    }
  }
}

int run_train(TrainArgs& a) {
  Comm& comm = Comm::world();
  a.ranks = comm.size();
  if (a.ranks > kMaxRanks) {
    throw usage_error("mpirun -np " + std::to_string(a.ranks) + ": at most " +
                      std::to_string(kMaxRanks) + " ranks (one gradient-norm chunk each)");
  }
  // Only rank 0 prints, writes the trace, the plot and the checkpoints; errors go to stderr.
  if (!comm.root()) {
    if (!std::freopen("/dev/null", "w", stdout)) throw input_error("cannot silence rank output");
    a.trace.clear(), a.plot.clear();
  }
  require_names(a);
  RunPlan plan = plan_run(run_request(a), comm);
  refuse_clobbering_run_outputs(a, plan);
  // Before step 1, not after the whole run (--out is checked by prepare_checkpoint_dir).
  if (!a.trace.empty()) check_writable("--trace", a.trace);
  if (!a.plot.empty()) check_writable("--plot", a.plot);
  if (a.threads > 0) omp_set_num_threads(a.threads);

  // The held-out text is read and encoded before step 1, so a bad file costs no training.
  if (a.has("--eval-data") && !plan.data.tokenizer) {
    throw usage_error(
        "--eval-data needs the tokenizer of the ids: pass --tokenizer with --data-tokens");
  }
  const std::vector<int32_t> eval = a.has("--eval-data")
                                        ? eval_ids("--eval-data", a.eval_data, *plan.data.tokenizer)
                                        : std::vector<int32_t>{};
  TrainRun run(std::move(plan), comm, a.trace);
  const RunPlan& p = run.plan();
  Trainer& trainer = run.trainer();
  if (run.dropped_trace_line() > 0) {
    std::printf("trace %s: dropped its incomplete last line %zu (written when the run stopped)\n",
                a.trace.c_str(), run.dropped_trace_line());
  }
  print_banner(p.preset, p.model, p.train, trainer, p.init);
  if (p.ckpt) std::printf("resumed from %s at step %d\n", p.ckpt->path.c_str(), p.start);
  Progress progress(p.start, p.stop, p.train.steps, tokens_per_step(p.train));
  KernelProfile profile;
  const LoopEnd end = run.run(progress, a.skip_nonfinite, a.profile ? &profile : nullptr);
  progress.finish();
  report_steps(end, p, a.profile ? &profile : nullptr, trainer);
  if (end.signal != 0) {
    const int code = report_stop(end, p);
    write_plot(a, p, run.log().lines());
    return code;
  }
  if (!eval.empty() && comm.root()) report_eval(a.eval_data, eval, trainer, run.log(), end.done);
  if (p.stop == p.train.steps) {
    if (comm.root()) print_sample(trainer);
  } else {
    std::printf("stopped after step %d of %d; continue with: reftrain train --resume %s\n", p.stop,
                p.train.steps, p.out.c_str());
  }
  write_plot(a, p, run.log().lines());
  report_memory(run.log(), run.baseline_bytes(), estimate_memory(p.model, p.train, a.ranks));
  return 0;
}

void add_checkpoint_options(CLI::App& app, TrainArgs& a) {
  a.given["--out"] =
      app.add_option("--out", a.out,
                     "checkpoint directory: DIR/ckpt-<step>.safetensors (see docs/checkpoints.md)");
  a.given["--save-every"] =
      app.add_option("--save-every", a.save_every,
                     "save a checkpoint every N steps (0: only at the end; needs --out)")
          ->transform(decimal_int(0, 1 << 30));
  a.given["--keep"] =
      app.add_option("--keep", a.keep, "keep only the newest K checkpoints (0: all)")
          ->transform(decimal_int(0, 1 << 30));
  a.given["--resume"] = app.add_option(
      "--resume", a.resume,
      "continue a run from its checkpoint (a file, or a directory: its newest); the config comes "
      "from the checkpoint, --steps may extend it");
  a.given["--stop-after"] =
      app.add_option("--stop-after", a.stop_after,
                     "stop after this step, with a checkpoint to --resume from (the schedule "
                     "still plans for --steps)")
          ->transform(decimal_int(1, 1 << 30));
  app.add_flag("--skip-nonfinite", a.skip_nonfinite,
               "skip the update of a step whose loss is NaN or Inf instead of stopping");
  a.given["--plot"] =
      app.add_option("--plot", a.plot, "write an SVG plot of the loss at the end of the run");
}

}  // namespace

CommandRunner add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  a->given["--preset"] =
      app.add_option("--preset", a->preset, "model and recipe (see `reftrain presets`)")
          ->capture_default_str();
  a->given["--data"] =
      app.add_option("--data", a->data, "UTF-8 text file (default: the fortunes corpus)");
  a->given["--data-tokens"] =
      app.add_option("--data-tokens", a->data_tokens, "llm.c token file (uint16, magic 20240520)")
          ->excludes(a->given["--data"]);
  a->given["--init-from"] =
      app.add_option("--init-from", a->init_from,
                     "start from these weights: a Hugging Face GPT-2 or Llama model (a directory "
                     "with config.json and model.safetensors, or the .safetensors file), or an "
                     "llm.c GPT-2 checkpoint (fp32, magic 20240326); they set the model's shape");
  a->given["--tokenizer"] = app.add_option(
      "--tokenizer", a->tokenizer,
      "auto (default: a BPE trained on the training split, its size from the text's, cached "
      "beside the data; bytes for a small text), bytes, gpt2, a tokenizer.json from `reftrain "
      "tokenizer train`, or a directory with encoder.json + vocab.bpe or vocab.json + "
      "merges.txt; a BPE tokenizer sets the model's vocab");
  a->given["--eval-data"] = app.add_option(
      "--eval-data", a->eval_data,
      "a held-out text file: after the last step, its loss, perplexity and bits per byte under "
      "the run's tokenizer (as `reftrain eval` gives them)");
  app.add_option("--trace", a->trace,
                 "write a JSONL trace of the run to this file (with --resume: continue it)");
  for (const TrainField& f : train_fields()) {
    if (!f.help) continue;
    FieldOption& o = a->fields.emplace_back();
    add_field_option(app, f, a->over, o);
    a->given[field_flag(f)] = o.option;
  }
  const std::tuple<const char*, int*, int, const char*> shape[] = {
      {"--layers", &a->layers, 1024, "transformer blocks (L)"},
      {"--heads", &a->heads, 1024, "attention heads (NH; must divide --channels)"},
      {"--channels", &a->channels, 1 << 14, "width of the residual stream (C)"},
      {"--max-seq", &a->max_seq, 1 << 16, "the longest context the model takes (maxT ≥ --seq)"}};
  for (const auto& [flag, value, hi, help] : shape) {
    a->given[flag] =
        app.add_option(flag, *value,
                       std::string(help) + ", over the preset's (a model from scratch)")
            ->transform(decimal_int(1, hi));
  }
  app.add_option("--threads", a->threads, "OpenMP threads (default: all cores)")
      ->transform(decimal_int(1, 4096));
  app.add_flag("--profile", a->profile,
               "print each kernel's wall time per step at the end (steps 2.., validation "
               "excluded; see docs/performance.md)");
  add_checkpoint_options(app, *a);
  return [a] { return run_train(*a); };
}

}  // namespace reftrain
