// `reftrain train`: trains a preset, prints a live progress line, validation loss every N
// steps and a sample at the end, and optionally writes a JSONL trace, checkpoints (--out) and a
// loss plot. `--resume` continues a run from its checkpoint, bit-exactly (docs/checkpoints.md).
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
#include <string>

#include "apps/cli_util.h"
#include "apps/commands.h"
#include "apps/plot.h"
#include "core/base/error.h"
#include "core/base/memory.h"
#include "core/dist/comm.h"
#include "core/formats/atomic_file.h"
#include "core/formats/hf.h"
#include "core/formats/llmc.h"
#include "core/formats/trace.h"
#include "core/model/kernel_profile.h"
#include "core/train/checkpoint.h"
#include "core/train/config.h"
#include "core/train/data.h"
#include "core/train/trainer.h"

namespace reftrain {

namespace {

struct TrainArgs {
  std::string preset = kDefaultPreset;
  std::string data, data_tokens, init_from, trace, tokenizer;
  std::string out, resume, plot;
  int save_every = 0, keep = 0, stop_after = 0;
  bool skip_nonfinite = false;
  bool profile = false;
  TrainConfig over;                // numbers given on the command line; see `given`
  std::deque<FieldOption> fields;  // one per training value a flag sets
  int threads = 0;
  int ranks = 1;  // Comm::world().size(): `mpirun -np N` starts N
  std::map<std::string, CLI::Option*> given;
  bool has(const char* flag) const { return given.at(flag)->count() > 0; }
};

// --kernels reference runs the naive matmul and the materialised attention (the references of
// the two families with run-time variants); a flag asking for another is a usage error.
void require_reference_kernels(const TrainArgs& a, TrainConfig& t) {
  const auto conflict = [&a](const char* flag, const std::string& value, const char* needs) {
    if (a.has(flag) && value != needs) {
      throw usage_error(std::string(flag) + " " + value + " conflicts with --kernels reference, " +
                        "which runs " + flag + " " + needs + "; leave " + flag + " out");
    }
  };
  conflict("--matmul", enum_name(t.matmul), "naive");
  conflict("--attention", enum_name(t.attention), "materialised");
  t.matmul = MatmulKind::kNaive, t.attention = AttentionKind::kMaterialised;
}

// Applies every option the user gave over the preset's values (`fresh`) or the checkpoint's.
// --grad-accum K is per rank: a step of N ranks has N·K micro-batches, the preset's K as well.
TrainConfig merged_config(const TrainArgs& a, TrainConfig t, bool fresh) {
  for (const FieldOption& o : a.fields) apply_field_option(o, a.over, t);
  if (fresh || a.has("--grad-accum")) t.grad_accum *= a.ranks;
  if (a.has("--lr") && !a.has("--min-lr")) {
    t.min_lr = std::min(t.min_lr, t.lr);  // keep min_lr ≤ lr when only --lr is given
  }
  if (t.kernels == Kernels::kReference) require_reference_kernels(a, t);
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
  // Steps start+1 .. stop of a `steps`-step run.
  Progress(int start, int stop, int steps, long long tokens_per_step)
      : start_(start),
        stop_(stop),
        steps_(steps),
        tokens_(tokens_per_step),
        tty_(isatty(fileno(stdout))),
        every_(std::max(1, steps / 20)) {}
  void step(const StepResult& r) {
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
  int start_, stop_, steps_;
  long long tokens_;
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
  if (a.has("--tokenizer") && a.tokenizer.empty()) {
    throw usage_error("--tokenizer needs bytes, gpt2, a tokenizer.json or a directory");
  }
  std::shared_ptr<const Tokenizer> tokenizer = tokenizer_from_spec(a.tokenizer);
  if (!a.data_tokens.empty()) {
    Dataset d = load_llmc_tokens(a.data_tokens);
    if (a.has("--tokenizer")) d.tokenizer = std::move(tokenizer);  // what the ids mean
    return d;
  }
  if (!a.data.empty()) return load_text_file(a.data, std::move(tokenizer));
  return load_fortunes(kFortunesDir, std::move(tokenizer));
}

// A BPE tokenizer sets the vocabulary of a model that starts from scratch (V, padded to a
// multiple of 64 as llm.c pads GPT-2's 50257 to 50304); weights from a file keep theirs, which
// the tokenizer must fit, as must llm.c ids' model.
void fit_vocab(ModelConfig& model, const Dataset& d, bool model_from_file) {
  const TokenizerRecord t = tokenizer_record(d.tokenizer.get());
  if (t.kind == "none" || t.kind == "bytes") return;
  if (!model_from_file && d.kind == "text") {
    model.vocab = t.vocab, model.padded_vocab = padded_vocab_of(t.vocab);
    return;
  }
  if (t.vocab > model.vocab) {
    throw usage_error("--tokenizer " + t.source + " has " + std::to_string(t.vocab) +
                      " tokens, more than the model's vocab " + std::to_string(model.vocab));
  }
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

// "K4" (micro-batches per step), or "K4 = 2 ranks × 2" on several ranks.
std::string accumulation_text(const TrainConfig& train, int ranks) {
  if (ranks == 1) return train.grad_accum > 1 ? " K" + std::to_string(train.grad_accum) : "";
  return " K" + std::to_string(train.grad_accum) + " = " + std::to_string(ranks) + " ranks × " +
         std::to_string(train.grad_accum / ranks);
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
  if (ranks > 1) {
    const double mib = 1 << 20;
    std::printf("optimizer state: %.1f MiB per rank (ZeRO-1: 1/%d of %.1f MiB)\n",
                estimate_memory(model, train, ranks).state_bytes / mib, ranks,
                estimate_memory(model, train, 1).state_bytes / mib);
  }
}

// What one invocation runs: a fresh run from the flags, or a resumed one from its checkpoint.
struct RunPlan {
  std::string preset, init;
  ModelConfig model;
  TrainConfig train;
  Dataset data;
  std::string data_path;             // data.source, absolute (checkpoints record it)
  std::unique_ptr<Checkpoint> ckpt;  // resumed: where the run continues from
  int start = 0;                     // steps already done
  int stop = 0;                      // the last step this invocation takes
  std::string out;                   // checkpoint directory ("" = none)
  int save_every = 0, keep = 0;
};

void require_names(const TrainArgs& a) {
  for (const char* name : {"--out", "--resume", "--plot"}) {
    if (a.has(name) && a.given.at(name)->as<std::string>().empty()) {
      throw usage_error(std::string(name) + " needs a " +
                        (std::string(name) == "--plot" ? "file name" : "path"));
    }
  }
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

RunPlan fresh_plan(const TrainArgs& a) {
  RunPlan p;
  const Preset& preset = find_preset(a.preset);
  p.preset = preset.name;
  p.model = preset.model;
  p.train = merged_config(a, preset.train, true);
  const bool hf = !a.init_from.empty() && is_hf_model_path(a.init_from);
  if (!a.init_from.empty()) {
    p.model = hf ? read_hf_config(a.init_from) : read_llmc_config(a.init_from);
    // The file sets the shape, the preset the recipe: a preset of another family would train
    // this model under its name with its recipe (llama's z-loss).
    if (preset.model.arch != p.model.arch) {
      throw usage_error("--init-from " + a.init_from + " holds a " + enum_name(p.model.arch) +
                        " model but --preset " + preset.name + " is " +
                        enum_name(preset.model.arch) + "; use a " + enum_name(p.model.arch) +
                        " preset (e.g. " +
                        (p.model.arch == Arch::kGpt2 ? "gpt2-124m" : "llama-tiny") + ")");
    }
  }
  validate(p.model, p.train);
  for (const char* flag : {"--save-every", "--keep", "--stop-after"}) {
    if (a.has(flag) && a.out.empty()) {
      throw usage_error(std::string(flag) + " needs --out DIR, where the checkpoints go");
    }
  }
  p.data = load_data(a);
  fit_vocab(p.model, p.data, !a.init_from.empty());
  p.data_path = absolute_path(p.data.source);
  p.init = a.init_from.empty() ? "normal(0.02) from seed " + std::to_string(p.train.seed)
           : hf ? "hugging face " + std::string(enum_name(p.model.arch)) + " " + a.init_from
                : "llm.c checkpoint " + a.init_from;
  p.out = a.out, p.save_every = a.save_every, p.keep = a.keep;
  return p;
}

// A resumed run keeps its configuration: a flag that would change it is a usage error; only
// --steps may extend the run.
void check_resume_flags(const TrainArgs& a, const CheckpointMeta& m) {
  if (a.has("--init-from")) {
    throw usage_error("--init-from conflicts with --resume: the weights come from the checkpoint");
  }
  if (a.has("--preset") && a.preset != m.preset) {
    throw usage_error("--preset " + a.preset + " conflicts with the checkpoint's preset " +
                      m.preset +
                      "; a resumed run keeps its configuration (only --steps may change)");
  }
  TrainConfig wanted = merged_config(a, m.train, false);
  wanted.steps = m.train.steps;
  const Json want = train_config_json(wanted), have = train_config_json(m.train);
  for (auto it = have.begin(); it != have.end(); ++it) {
    if (want.at(it.key()) == it.value()) continue;
    std::string flag = "--" + it.key();
    std::replace(flag.begin(), flag.end(), '_', '-');
    throw usage_error(flag + " " + want.at(it.key()).dump() + " conflicts with the checkpoint's " +
                      it.value().dump() +
                      "; a resumed run keeps its configuration (only --steps may change)");
  }
}

Dataset checked_hash(Dataset d, const DataSource& src) {
  if (d.hash != src.hash || d.kind != src.kind) {
    throw input_error("data " + d.source +
                      " is not the data the checkpoint was trained on (its hash differs); pass "
                      "that data with --data or --data-tokens");
  }
  return d;
}

// The checkpoint's data, from where it was (or from --data/--data-tokens, if it moved).
Dataset reload_data(const TrainArgs& a, const DataSource& src) {
  std::shared_ptr<const Tokenizer> tokenizer = reload_tokenizer(src.tokenizer, a.tokenizer);
  if (a.has("--data") || a.has("--data-tokens")) {
    Dataset d = load_data(a);
    d.tokenizer = tokenizer;
    return checked_hash(std::move(d), src);
  }
  const std::string flag = src.kind == "llmc-tokens" ? "--data-tokens" : "--data";
  std::error_code ec;
  if (!std::filesystem::exists(src.path, ec)) {
    throw input_error("the checkpoint's data " + printable(src.path, 200) +
                      " does not exist; if it moved, pass it with " + flag + " FILE");
  }
  // Only the fortunes corpus is a directory of data; a checkpoint naming another directory
  // (crafted, or the corpus moved) would have every file in it read as fortunes.
  const bool fortunes = src.kind == "text" && src.path == kFortunesDir;
  if (!fortunes && std::filesystem::is_directory(src.path, ec)) {
    throw input_error("the checkpoint's data " + printable(src.path, 200) +
                      " is a directory, not the data file it names; pass the data with " + flag);
  }
  Dataset d = src.kind == "llmc-tokens" ? load_llmc_tokens(src.path)
              : fortunes                ? load_fortunes(src.path, tokenizer)
                                        : load_text_file(src.path, tokenizer);
  d.tokenizer = tokenizer;
  d.source = src.source;  // the name the run's trace and checkpoints know it by
  return checked_hash(std::move(d), src);
}

RunPlan resume_plan(const TrainArgs& a) {
  RunPlan p;
  p.ckpt = std::make_unique<Checkpoint>(read_checkpoint(a.resume));
  const CheckpointMeta& m = p.ckpt->meta;
  check_resume_flags(a, m);
  p.preset = m.preset, p.init = m.init, p.model = m.model, p.train = m.train;
  if (m.train.grad_accum % a.ranks != 0) {
    throw usage_error("the checkpoint's steps have " + std::to_string(m.train.grad_accum) +
                      " micro-batches, which " + std::to_string(a.ranks) +
                      " ranks cannot share evenly; resume on a number of ranks that divides " +
                      std::to_string(m.train.grad_accum));
  }
  p.start = int(m.step);
  if (a.has("--steps")) {
    if (a.over.steps <= m.step) {
      throw usage_error("--steps " + std::to_string(a.over.steps) +
                        " is not past the checkpoint's step " + std::to_string(m.step) +
                        "; pass a larger --steps");
    }
    p.train.steps = a.over.steps;
  } else if (m.step >= m.train.steps) {
    throw usage_error("checkpoint " + p.ckpt->path + " is at step " + std::to_string(m.step) +
                      ", the end of its run; pass --steps N (N > " + std::to_string(m.step) +
                      ") to train further");
  }
  p.data = reload_data(a, m.data);
  p.data_path =
      a.has("--data") || a.has("--data-tokens") ? absolute_path(p.data.source) : m.data.path;
  p.out = a.has("--out") ? a.out : std::filesystem::path(p.ckpt->path).parent_path().string();
  if (p.out.empty()) p.out = ".";
  p.save_every = a.has("--save-every") ? a.save_every : m.save_every;
  p.keep = a.has("--keep") ? a.keep : m.keep;
  return p;
}

// Saves when a step is due (every save_every steps, and at the last step this invocation takes)
// and keeps the newest `keep`; remembers the newest good checkpoint for messages.
class Saver {
 public:
  Saver(const RunPlan& p, const Dataset& d, Json run)
      : dir_(p.out), run_(std::move(run)), last_(p.ckpt ? p.ckpt->path : "") {
    meta_.preset = p.preset, meta_.init = p.init, meta_.model = p.model, meta_.train = p.train;
    meta_.data = {d.kind, d.source, p.data_path, d.hash, tokenizer_record(d.tokenizer.get())};
    meta_.save_every = p.save_every, meta_.keep = p.keep;
  }
  bool due(int step, int stop) const {
    return !dir_.empty() &&
           ((meta_.save_every > 0 && step % meta_.save_every == 0) || step == stop);
  }
  // Every rank takes part (rank 0 gathers the optimizer state's shards and writes the file).
  std::string save(Trainer& t, int step) {
    meta_.step = step, meta_.updates = t.updates();
    const std::unique_ptr<OptimizerState> gathered = t.gather_optimizer();
    if (t.comm().root()) {
      last_ = save_checkpoint(dir_, meta_, run_, t.model(), gathered ? *gathered : t.optimizer());
      prune_checkpoints(dir_, meta_.keep);
    } else {
      last_ = (std::filesystem::path(dir_) / checkpoint_file_name(step)).string();
    }
    return last_;
  }
  const std::string& last() const { return last_; }

 private:
  std::string dir_;
  Json run_;
  CheckpointMeta meta_;
  std::string last_;
};

// Writes each trace line, and keeps the step and val lines for --plot.
struct RunLog {
  TraceWriter* trace;
  Trace lines;
  void write(const Json& j) {
    trace->write(j);
    if (j.at("type") == "step") lines.steps.push_back(j);
    if (j.at("type") == "val") lines.vals.push_back(j);
  }
};

Json step_line(const StepResult& r) {
  Json j = {{"type", "step"},
            {"step", r.step},
            {"loss", json_float(r.loss)},
            {"lr", json_float(r.lr)},
            {"grad_norm", json_float(r.grad_norm)},
            {"clip", json_float(r.clip)},
            {"ms", std::round(r.ms * 1000.0) / 1000.0}};
  if (r.skipped) j["skipped"] = true;
  return j;
}

// A step whose loss was not finite was not applied: stop (the default), or go on.
void handle_nonfinite(const StepResult& r, bool skip, const Saver& saver, Progress& progress) {
  const std::string what = std::string("loss is ") + (std::isnan(r.loss) ? "NaN" : "infinite") +
                           " at step " + std::to_string(r.step);
  if (skip) {
    progress.line(what + ": its update was skipped (--skip-nonfinite)");
    return;
  }
  throw input_error(what + ", so its update was not applied; lower --lr or check the data" +
                    (saver.last().empty() ? std::string()
                                          : "; the last checkpoint " + saver.last() +
                                                " is intact and resumes the run") +
                    "; --skip-nonfinite skips such steps instead");
}

// SIGINT or SIGTERM, once received. The handler only sets it; the loop reads it between steps,
// so a step (and its save) is never cut in the middle. A second signal ends the process at once.
volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) {
  if (g_stop_signal != 0) _exit(128 + sig);
  g_stop_signal = sig;
}

void catch_stop_signals() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // writes and fsyncs in progress carry on
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// After a stop signal: the checkpoint of `step` (unless the loop just wrote it) or what was lost.
int stop_on_signal(Trainer& trainer, Saver& saver, const RunPlan& p, int step) {
  const int sig = g_stop_signal != 0 ? int(g_stop_signal) : SIGTERM;  // another rank's
  const std::string what = std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") +
                           ": stopped after step " + std::to_string(step) + " of " +
                           std::to_string(p.train.steps);
  if (!p.out.empty() && step == p.start) {
    std::printf("%s; no step taken since the start, nothing new to save\n", what.c_str());
  } else if (!p.out.empty()) {
    const std::string path = saver.due(step, p.stop) ? saver.last() : saver.save(trainer, step);
    std::printf("%s; checkpoint %s; continue with: reftrain train --resume %s\n", what.c_str(),
                path.c_str(), p.out.c_str());
  } else {
    std::printf(
        "%s; its %d steps are lost (no --out); pass --out DIR to save a checkpoint when "
        "stopped (and --save-every N to save while running)\n",
        what.c_str(), step - p.start);
  }
  return 128 + sig;
}

// Several ranks: rank 0's traffic and the time it spent exchanging, per step.
void report_exchange(Trainer& trainer, int steps, double seconds) {
  const DataParallel* dp = trainer.data_parallel();
  if (!dp || steps <= 0) return;
  std::printf("exchange: rank 0 sent %.2f MiB per step and spent %.1f ms per step (%.0f%%) in it\n",
              double(trainer.comm().bytes_sent()) / (1 << 20) / steps,
              1000.0 * dp->exchange_seconds() / steps, 100.0 * dp->exchange_seconds() / seconds);
}

struct LoopPlan {
  int start, stop;
  bool skip_nonfinite;
  KernelProfile* profile;  // --profile: set on the model after the loop's first step (warm-up)
};

// The steps start+1 .. stop, with validation at step 0, every val_every steps and at the end,
// each traced, and checkpoints as the Saver says. Returns the last step taken: before `stop`
// when a stop signal came.
int train_loop(Trainer& trainer, RunLog& log, Saver& saver, const LoopPlan& plan) {
  const TrainConfig& train = trainer.train_config();
  Progress progress(plan.start, plan.stop, train.steps, tokens_per_step(train));
  KernelProfile* profiling = nullptr;  // plan.profile once the first step is done
  auto validate_at = [&](int step) {
    trainer.model().set_profile(nullptr);  // validation's forwards are not training steps
    const float val = trainer.validate();
    trainer.model().set_profile(profiling);
    char buf[96];
    std::snprintf(buf, sizeof buf, "val  step %d | val loss %.4f", step, val);
    progress.line(buf);
    log.write({{"type", "val"}, {"step", step}, {"val_loss", json_float(val)}});
  };
  if (plan.start == 0) validate_at(0);
  int skipped = 0, done = plan.start, profiled_steps = 0;
  double profiled_ms = 0;
  // The ranks stop together, after the same step (mpirun passes a signal on to each rank).
  const auto stop_signal = [&trainer] { return any_rank(trainer.comm(), g_stop_signal != 0); };
  for (int k = plan.start; k < plan.stop && !stop_signal(); ++k) {
    const StepResult r = trainer.step(k);
    if (plan.profile && k > plan.start) ++profiled_steps, profiled_ms += r.ms;
    if (plan.profile && k == plan.start) trainer.model().set_profile(profiling = plan.profile);
    progress.step(r);
    log.write(step_line(r));
    if (r.skipped) handle_nonfinite(r, plan.skip_nonfinite, saver, progress), ++skipped;
    const bool last = r.step == train.steps;
    if (last || (train.val_every > 0 && r.step % train.val_every == 0)) validate_at(r.step);
    if (saver.due(r.step, plan.stop)) progress.line("checkpoint " + saver.save(trainer, r.step));
    done = r.step;
  }
  progress.finish();
  std::printf(
      "done: steps %d..%d in %s%s\n", plan.start + 1, done,
      duration(progress.total_seconds()).c_str(),
      skipped ? (", " + std::to_string(skipped) + " skipped (loss not finite)").c_str() : "");
  if (plan.profile) {
    trainer.model().set_profile(nullptr);
    plan.profile->print(stdout, profiled_steps, profiled_ms);
  }
  report_exchange(trainer, done - plan.start, progress.total_seconds());
  return done;
}

// The sample that ends a run: 256 tokens after <|endoftext|> (or a newline: default_prompt).
void print_sample(Trainer& trainer) {
  const std::shared_ptr<const Tokenizer>& tokenizer = trainer.data().tokenizer;
  const int32_t prompt = default_prompt(tokenizer.get(), trainer.model().config().vocab);
  std::printf("\nsample:\n%s", tokenizer ? "" : "(token ids; pass --tokenizer to read them)");
  try {
    trainer.sample({prompt}, {256, 1.0f, 0, trainer.train_config().seed}, token_printer(tokenizer));
  } catch (const UserError& e) {
    std::printf("(none: %s)", e.what());
  }
  std::printf("\n");
}

// The trace file: a fresh one starts with the run line; a resumed run's continues the trace it
// was written to (continued_trace), then says where it resumed.
std::vector<Json> trace_head(const std::string& path, const Json& run, const RunPlan& p) {
  if (!p.ckpt) return {run};
  const auto stored = p.ckpt->file.metadata.find("run");
  const Json ckpt_run = stored == p.ckpt->file.metadata.end()
                            ? Json()
                            : Json::parse(stored->second, nullptr, /*allow_exceptions=*/false);
  ContinuedTrace old = continued_trace(path, run, ckpt_run, p.start);
  if (old.dropped_line > 0) {
    std::printf("trace %s: dropped its incomplete last line %zu (written when the run stopped)\n",
                path.c_str(), old.dropped_line);
  }
  std::vector<Json> head = std::move(old.head);
  if (head.empty()) head.push_back(run);
  head.push_back({{"type", "resume"}, {"step", p.start}, {"checkpoint", p.ckpt->path}});
  return head;
}

void write_plot(const TrainArgs& a, const RunPlan& p, const Trace& lines) {
  if (a.plot.empty()) return;
  const std::string label = a.trace.empty() ? "run" : trace_label(a.trace);
  write_text_file(a.plot, loss_plot_svg({{label, &lines}}, "loss of " + p.preset + " (" +
                                                               enum_name(p.train.precision) + ", " +
                                                               enum_name(p.train.optimizer) + ")"));
  std::printf("plot: %s\n", a.plot.c_str());
}

// Weights and optimizer state: from the checkpoint, a Hugging Face model, an llm.c file, or
// the seed.
void initialise(Trainer& trainer, RunPlan& p, const TrainArgs& a) {
  if (p.ckpt) {
    restore_model(*p.ckpt, trainer.model());
    restore_optimizer(*p.ckpt, trainer.optimizer());
    trainer.set_updates(p.ckpt->meta.updates);
    p.ckpt->file.tensors.clear();  // now in the trainer's buffers
  } else if (!a.init_from.empty()) {
    Model& m = trainer.model();
    if (is_hf_model_path(a.init_from)) {
      load_hf_weights(a.init_from, p.model, m.layout(), m.weights());
    } else {
      load_llmc_weights(a.init_from, p.model, m.layout(), m.weights());
    }
    m.refresh_mirror();
  }
}

// No output may be an input or the other output, and none may sit in --out under a
// checkpoint's name, where a save would replace it.
void refuse_clobbering(const TrainArgs& a, const RunPlan& p) {
  std::vector<NamedPath> inputs = {{"--data", a.data},
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

// Rank 0 reads the data first, so a token cache it writes is there for the others to read.
RunPlan ranked_plan(const TrainArgs& a, Comm& comm) {
  if (!comm.root()) comm.barrier();
  RunPlan p = a.resume.empty() ? fresh_plan(a) : resume_plan(a);
  if (comm.root()) comm.barrier();
  return p;
}

// Every rank must train the same run on the same data: each compares its run line (model,
// training values, data hash, ...) with rank 0's.
void check_ranks_agree(Comm& comm, const Json& run) {
  if (comm.size() == 1) return;
  const std::string text = run.dump();
  const uint64_t mine = fnv1a64_bytes(text);
  std::vector<uint64_t> all(size_t(comm.size()));
  comm.allgather(&mine, all.data(), sizeof mine);
  for (int r = 1; r < comm.size(); ++r) {
    if (all[size_t(r)] == all[0]) continue;
    throw input_error("rank " + std::to_string(r) +
                      " would train another run than rank 0 (its data or configuration differs: "
                      "run-line hash " +
                      data_hash_text(all[size_t(r)]) + " vs " + data_hash_text(all[0]) +
                      "); every rank must read the same data and flags");
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
  RunPlan p = ranked_plan(a, comm);
  refuse_clobbering(a, p);
  // Before step 1, not after the whole run (--out is checked by prepare_checkpoint_dir).
  if (!a.trace.empty()) check_writable("--trace", a.trace);
  if (!a.plot.empty()) check_writable("--plot", a.plot);
  if (a.threads > 0) omp_set_num_threads(a.threads);
  if (a.has("--stop-after") && a.stop_after <= p.start) {
    throw usage_error("--stop-after " + std::to_string(a.stop_after) +
                      " is not past the run's step " + std::to_string(p.start));
  }
  p.stop = a.has("--stop-after") ? std::min(a.stop_after, p.train.steps) : p.train.steps;
  // Held until the run ends: no second run saves into (or cleans up) this directory meanwhile.
  const DirLock lock =
      p.out.empty() || !comm.root() ? DirLock() : prepare_checkpoint_dir(p.out, p.start);

  check_memory(estimate_memory(p.model, p.train, a.ranks), available_memory());
  // Memory from here on is the model's: reset the peak so loading's transients do not count.
  reset_peak_resident();
  const size_t baseline = resident_bytes();
  Trainer trainer(p.model, p.train, std::move(p.data), comm);
  initialise(trainer, p, a);
  const Json run = trainer.describe(p.preset, p.init);
  check_ranks_agree(comm, run);
  const std::vector<Json> head =
      a.trace.empty() ? std::vector<Json>{} : trace_head(a.trace, run, p);
  TraceWriter trace(a.trace, head);
  RunLog log{&trace, {}};
  for (const Json& j : head) {
    if (j.at("type") == "step") log.lines.steps.push_back(j);
    if (j.at("type") == "val") log.lines.vals.push_back(j);
  }
  Saver saver(p, trainer.data(), run);
  print_banner(p.preset, p.model, p.train, trainer, p.init);
  if (p.ckpt) std::printf("resumed from %s at step %d\n", p.ckpt->path.c_str(), p.start);

  catch_stop_signals();
  KernelProfile profile;
  const int done = train_loop(trainer, log, saver,
                              {p.start, p.stop, a.skip_nonfinite, a.profile ? &profile : nullptr});
  if (any_rank(comm, g_stop_signal != 0)) {
    const int code = stop_on_signal(trainer, saver, p, done);
    write_plot(a, p, log.lines);
    return code;
  }
  if (p.stop == p.train.steps) {
    if (comm.root()) print_sample(trainer);
  } else {
    std::printf("stopped after step %d of %d; continue with: reftrain train --resume %s\n", p.stop,
                p.train.steps, p.out.c_str());
  }
  write_plot(a, p, log.lines);
  report_memory(trace, baseline, estimate_memory(p.model, p.train, a.ranks));
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
      "bytes (default), gpt2, a tokenizer.json from `reftrain tokenizer train`, or a directory "
      "with encoder.json + vocab.bpe or vocab.json + merges.txt; a BPE tokenizer sets the "
      "model's vocab");
  app.add_option("--trace", a->trace,
                 "write a JSONL trace of the run to this file (with --resume: continue it)");
  for (const TrainField& f : train_fields()) {
    if (!f.help) continue;
    FieldOption& o = a->fields.emplace_back();
    add_field_option(app, f, a->over, o);
    a->given[field_flag(f)] = o.option;
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
