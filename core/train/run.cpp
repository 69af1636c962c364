#include "core/train/run.h"

#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <optional>

#include "core/base/error.h"
#include "core/base/memory.h"

namespace reftrain {

RunLog::RunLog(const std::string& path, const std::vector<Json>& head) : trace_(path, head) {
  for (const Json& line : head) keep(line);
}

void RunLog::write(const Json& line) {
  trace_.write(line);
  keep(line);
}

void RunLog::keep(const Json& line) {
  if (line.at("type") == "step") lines_.steps.push_back(line);
  if (line.at("type") == "val") lines_.vals.push_back(line);
}

namespace {

// The validation loss of the best checkpoint a resumed run's directory keeps, or ∞ when there
// is none that belongs to the run so far (or it does not read).
float resumed_best(const std::string& dir, int start) {
  const std::string best = (std::filesystem::path(dir) / kBestDir).string();
  const auto saved = list_checkpoints(best);
  if (start == 0 || saved.empty() || saved.back().first > start) {
    return std::numeric_limits<float>::infinity();
  }
  try {
    const float loss = read_checkpoint(saved.back().second).meta.val_loss;
    return std::isfinite(loss) ? loss : std::numeric_limits<float>::infinity();
  } catch (const UserError&) {
    return std::numeric_limits<float>::infinity();
  }
}

}  // namespace

Saver::Saver(const RunPlan& p, const Dataset& d, Json run)
    : dir_(p.out), run_(std::move(run)), last_(p.ckpt ? p.ckpt->path : "") {
  meta_.preset = p.preset, meta_.init = p.init, meta_.model = p.model, meta_.train = p.train;
  meta_.data = {d.kind, d.source, p.data_path, d.hash, tokenizer_record(d.tokenizer.get())};
  meta_.save_every = p.save_every, meta_.keep = p.keep;
  if (!dir_.empty()) best_ = resumed_best(dir_, p.start);
}

std::string Saver::save_best(Trainer& t, int step, float val_loss) {
  if (!saves() || !(val_loss < best_)) return "";
  best_ = val_loss;
  CheckpointMeta meta = meta_;
  meta.step = step, meta.updates = t.updates(), meta.val_loss = val_loss;
  const std::string dir = (std::filesystem::path(dir_) / kBestDir).string();
  const std::unique_ptr<OptimizerState> gathered = t.gather_optimizer();
  std::string path = (std::filesystem::path(dir) / checkpoint_file_name(step)).string();
  if (t.comm().root()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    // The new best is on disk before the former one goes: a kill between leaves both, and
    // the newer (the lower loss) is the one read_checkpoint picks.
    path = save_checkpoint(dir, meta, run_, t.model(), gathered ? *gathered : t.optimizer());
    keep_only_checkpoint(dir, path);
  }
  return path;
}

std::string Saver::save(Trainer& t, int step) {
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

namespace {

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

// A step whose loss was not finite was not applied: stop (the default), or go on.
void handle_nonfinite(const StepResult& r, const LoopOptions& o, RunObserver& observer) {
  const std::string what = std::string("loss is ") + (std::isnan(r.loss) ? "NaN" : "infinite") +
                           " at step " + std::to_string(r.step);
  if (o.skip_nonfinite) {
    observer.note(what + ": its update was skipped (--skip-nonfinite)");
    return;
  }
  const std::string last = o.saver ? o.saver->last() : "";
  // Before the first update of a fresh run, no learning rate has acted yet: the start is at
  // fault (the weights it was given, or the data).
  const bool first = r.step == 1;
  const std::string fix = first && !o.init_from.empty()
                              ? "check the weights of --init-from " + o.init_from + " and the data"
                          : first ? "check the data"
                                  : "lower --lr or check the data";
  throw input_error(what + ", so its update was not applied; " + fix +
                    (last.empty()
                         ? std::string()
                         : "; the last checkpoint " + last + " is intact and resumes the run") +
                    "; --skip-nonfinite skips such steps instead");
}

// After a stop signal: the signal, and the checkpoint of `end.done` (unless the loop just wrote
// it, or no step was taken since the start).
void stop_on_signal(Trainer& trainer, const LoopOptions& o, LoopEnd& end) {
  end.signal = g_stop_signal != 0 ? int(g_stop_signal) : SIGTERM;  // another rank's
  if (!o.saver || !o.saver->saves() || end.done == o.start) return;
  end.checkpoint =
      o.saver->due(end.done, o.stop) ? o.saver->last() : o.saver->save(trainer, end.done);
}

}  // namespace

LoopEnd run_loop(Trainer& trainer, RunLog& log, RunObserver& observer, const LoopOptions& o) {
  const TrainConfig& train = trainer.train_config();
  KernelProfile* profiling = nullptr;  // o.profile once the first step is done
  const Dataset& data = trainer.data();
  // The val line goes into the trace before the step's checkpoint (a resumed run's trace then
  // holds it too); the best checkpoint is saved after the step's own, so a kill during that
  // save leaves the step's checkpoint complete.
  auto validate_at = [&](int step) {
    trainer.model().set_profile(nullptr);  // validation's forwards are not training steps
    Validation v;
    v.step = step, v.loss = trainer.validate();
    v.bits_per_byte = bits_per_byte(v.loss, data.val.size(), data.val_bytes);
    trainer.model().set_profile(profiling);
    Json line = {{"type", "val"}, {"step", step}, {"val_loss", json_float(v.loss)}};
    if (std::isfinite(v.bits_per_byte)) line["val_bpb"] = json_float(float(v.bits_per_byte));
    log.write(line);
    return v;
  };
  const auto report = [&](Validation v) {
    if (o.saver && v.step > 0) v.best = o.saver->save_best(trainer, v.step, v.loss);
    observer.validated(v);
  };
  if (o.validate && o.start == 0) report(validate_at(0));
  LoopEnd end;
  end.done = o.start;
  // The ranks stop together, after the same step (mpirun passes a signal on to each rank).
  const auto stop_signal = [&trainer] { return any_rank(trainer.comm(), g_stop_signal != 0); };
  for (int k = o.start; k < o.stop && !stop_signal(); ++k) {
    const StepResult r = observer.step(trainer, k);
    end.seconds += r.ms / 1000.0;
    if (o.profile && k > o.start) ++end.profiled_steps, end.profiled_ms += r.ms;
    if (o.profile && k == o.start) trainer.model().set_profile(profiling = o.profile);
    StepRecord line{r.step, r.loss, r.grad_norm, r.clip, r.lr, {}, {}, r.skipped};
    if (o.timed) line.ms = r.ms;
    observer.stepped(trainer, r, line);
    log.write(step_line(line));
    if (r.skipped) handle_nonfinite(r, o, observer), ++end.skipped;
    const bool last = r.step == train.steps;
    std::optional<Validation> validation;
    if (o.validate && (last || (train.val_every > 0 && r.step % train.val_every == 0))) {
      validation = validate_at(r.step);
    }
    if (o.saver && o.saver->due(r.step, o.stop)) observer.saved(o.saver->save(trainer, r.step));
    if (validation) report(*validation);
    end.done = r.step;
  }
  if (o.profile) trainer.model().set_profile(nullptr);
  if (any_rank(trainer.comm(), g_stop_signal != 0)) stop_on_signal(trainer, o, end);
  return end;
}

namespace {

DirLock locked_dir(const RunPlan& p, Comm& comm) {
  return p.out.empty() || !comm.root() ? DirLock() : prepare_checkpoint_dir(p.out, p.start);
}

// Checks that the run fits in memory; memory from here on is the model's, so the peak is reset
// (loading's transients do not count) and the resident bytes are the baseline.
size_t checked_baseline(const RunPlan& p, int ranks) {
  check_memory(estimate_memory(p.model, p.train, ranks), available_memory());
  reset_peak_resident();
  return resident_bytes();
}

// The run line, once the trainer's weights are the run's and every rank agrees on it.
Json initialised_run(Trainer& trainer, RunPlan& p) {
  initialise(trainer, p);
  Json run = trainer.describe(p.preset, p.init);
  check_ranks_agree(trainer.comm(), run, p);
  return run;
}

}  // namespace

TrainRun::TrainRun(RunPlan plan, Comm& comm, const std::string& trace_path)
    : plan_(std::move(plan)),
      lock_(locked_dir(plan_, comm)),
      baseline_(checked_baseline(plan_, comm.size())),
      trainer_(plan_.model, plan_.train, std::move(plan_.data), comm),
      run_(initialised_run(trainer_, plan_)),
      log_(trace_path, trace_path.empty() ? std::vector<Json>{}
                                          : trace_head(trace_path, run_, plan_, dropped_line_)),
      saver_(plan_, trainer_.data(), run_) {}

LoopEnd TrainRun::run(RunObserver& observer, bool skip_nonfinite, KernelProfile* profile) {
  catch_stop_signals();
  LoopOptions o;
  o.start = plan_.start, o.stop = plan_.stop;
  o.skip_nonfinite = skip_nonfinite, o.profile = profile, o.saver = &saver_;
  o.init_from = plan_.init_from;
  return run_loop(trainer_, log_, observer, o);
}

}  // namespace reftrain
