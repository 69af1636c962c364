// The training loop of `reftrain train` and `reftrain golden run`: steps, their trace lines,
// validation, checkpoints and the stop on SIGINT or SIGTERM. The commands print through a
// RunObserver, and the golden run adds its per-step extras (the kernel dump, the debug state,
// the z-loss part of the loss) through the same observer.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "core/formats/trace.h"
#include "core/model/kernel_profile.h"
#include "core/train/checkpoint.h"
#include "core/train/run_plan.h"
#include "core/train/trainer.h"

namespace reftrain {

// Writes each trace line, and keeps the step and val lines (for a loss plot).
class RunLog {
 public:
  // A trace at `path` ("" = none) that starts with `head` (see TraceWriter); head's step and
  // val lines are kept as well.
  RunLog(const std::string& path, const std::vector<Json>& head);
  void write(const Json& line);
  const Trace& lines() const { return lines_; }

 private:
  void keep(const Json& line);
  TraceWriter trace_;
  Trace lines_;
};

// Saves when a step is due (every save_every steps, and at the last step this invocation takes)
// and keeps the newest `keep`; remembers the newest good checkpoint for messages.
class Saver {
 public:
  Saver(const RunPlan& p, const Dataset& d, Json run);
  bool saves() const { return !dir_.empty(); }
  bool due(int step, int stop) const {
    return saves() && ((meta_.save_every > 0 && step % meta_.save_every == 0) || step == stop);
  }
  // Every rank takes part (rank 0 gathers the optimizer state's shards and writes the file).
  std::string save(Trainer& t, int step);
  const std::string& last() const { return last_; }
  // After the validation of `step` (≥ 1): when `val_loss` is the lowest of the run so far,
  // saves DIR/best/ckpt-<step> (atomically, as save() does), removes the former best and returns
  // its path; "" otherwise. Every rank takes part. A resumed run's best so far is the one in
  // DIR/best, if that checkpoint is not past the step it resumes from.
  std::string save_best(Trainer& t, int step, float val_loss);

 private:
  std::string dir_;
  Json run_;
  CheckpointMeta meta_;
  std::string last_;
  float best_ = std::numeric_limits<float>::infinity();
};

// One validation: its loss, bits per byte (NaN when the split's bytes are unknown), and the
// best checkpoint it saved ("" when it saved none).
struct Validation {
  int step = 0;
  float loss = 0;
  double bits_per_byte = 0;
  std::string best;
};

// What a command sees of, and adds to, the loop. Every hook but step() does nothing by default.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // Takes step k (0-based): trainer.step(k), or the golden run's recorded step.
  virtual StepResult step(Trainer& trainer, int k) { return trainer.step(k); }
  // After step r, before its trace line `line`, which it may add to.
  virtual void stepped(Trainer&, const StepResult&, StepRecord&) {}
  virtual void validated(const Validation& /*v*/) {}
  virtual void saved(const std::string& /*path*/) {}
  // Something the run tells its user (a step skipped).
  virtual void note(const std::string& /*text*/) {}
};

struct LoopOptions {
  int start = 0, stop = 0;      // the steps start+1 .. stop
  bool validate = true;         // at step 0 (a fresh run), every val_every steps and at the end
  bool timed = true;            // step lines carry the step's wall time
  bool skip_nonfinite = false;  // skip a step whose loss is not finite instead of stopping
  KernelProfile* profile = nullptr;  // set on the model after the loop's first step (warm-up)
  Saver* saver = nullptr;            // checkpoints (null: none)
  std::string init_from;             // weights the run started from ("" = the seed's)
};

struct LoopEnd {
  int done = 0;            // the last step taken: before `stop` when a stop signal came
  int skipped = 0;         // steps whose update was skipped (loss not finite)
  double seconds = 0;      // the steps' wall time
  int profiled_steps = 0;  // steps the profile timed, and their wall time
  double profiled_ms = 0;
  int signal = 0;          // the stop signal (SIGINT or SIGTERM) on any rank, or 0
  std::string checkpoint;  // after a stop signal: the checkpoint of `done`, or "" when none
};

// Steps start+1 .. stop with their trace lines, validation and checkpoints, stopping after the
// step in progress when a stop signal came (on any rank; the ranks stop together), and then
// saving that step unless it was just saved or none was taken. A step whose loss is not finite
// is an input error unless skip_nonfinite.
LoopEnd run_loop(Trainer& trainer, RunLog& log, RunObserver& observer, const LoopOptions& o);

// A planned `reftrain train` run, ready for its first step: the checkpoint directory locked
// (held until the run ends, so no second run saves into it or cleans it up meanwhile), the
// memory checked, the weights and optimizer state in place, every rank's run line the same, and
// the trace opened (a resumed run's continues the trace it was written to).
class TrainRun {
 public:
  TrainRun(RunPlan plan, Comm& comm, const std::string& trace_path);
  Trainer& trainer() { return trainer_; }
  const RunPlan& plan() const { return plan_; }  // its data now the trainer's (trainer().data())
  RunLog& log() { return log_; }
  // The torn last line of the continued trace, left out (a run stopped while writing it), or 0.
  size_t dropped_trace_line() const { return dropped_line_; }
  // Resident memory before the model was allocated.
  size_t baseline_bytes() const { return baseline_; }
  // The plan's steps with the plan's checkpoints. From here on SIGINT or SIGTERM stops the run
  // after the step in progress (and saves it); a second signal ends the process at once.
  LoopEnd run(RunObserver& observer, bool skip_nonfinite, KernelProfile* profile);

 private:
  RunPlan plan_;
  DirLock lock_;
  size_t baseline_;
  Trainer trainer_;
  Json run_;  // the trace's run line
  size_t dropped_line_ = 0;
  RunLog log_;
  Saver saver_;
};

}  // namespace reftrain
