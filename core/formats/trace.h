// The training trace: JSONL, one JSON object per line. The first line describes the run
// ({"type": "run", preset, every config value, seed, data source and hash, optimizer, build
// flags, version}); then one {"type": "step", step, loss, grad_norm, clip, lr, ms} per step
// (loss of step k is the forward loss before the k-th update; step_line writes it), and
// {"type": "val", step, val_loss} after each validation. Numbers are written so that they read
// back bit-exact.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace reftrain {

using Json = nlohmann::ordered_json;  // keys stay in the order written: "type" first

// A float as the shortest decimal that reads back to the same float (0.9f -> 0.9, not
// 0.8999999761581421), so traces are both readable and bit-exact.
double json_float(float x);

// A double as the shortest decimal that reads back to it (std::to_chars), laid out as
// nlohmann's dump lays numbers out ("1.0", "0.0001", "1e-05"). Not finite: "null".
std::string json_number(double x);

// JSON text as reftrain writes it to files, laid out as nlohmann's dump(indent) but with every
// float through json_number: dump's Grisu2 misses the shortest form for about 1 double in 800
// (0.00030197992 came out 0.00030197992000000003). JSON is UTF-8; a string that is not (a file
// name in another encoding) gets U+FFFD in place of its bad bytes instead of a type_error.
std::string json_text(const Json& j, int indent = -1);

// What one step line says. `z_loss` and `ms` are each written only when set: the golden run's
// trace has the z-loss part of the loss and no wall time (its bytes are a pure function of the
// command line); `reftrain train`'s has the wall time.
struct StepRecord {
  int step;
  float loss, grad_norm, clip, lr;
  std::optional<float> z_loss;
  std::optional<double> ms;
  bool skipped = false;  // the loss was not finite and the update not applied
};
// {"type": "step", step, loss, z_loss, grad_norm, clip, lr, ms, skipped}, in that order (the
// golden run's trace.jsonl fixes it), without the optional fields that are not set.
Json step_line(const StepRecord& r);

class TraceWriter {
 public:
  TraceWriter() = default;
  // Opens (truncates) `path`; input error when it cannot. An empty path writes nothing. With
  // `head` (a resumed run's trace: the lines it continues from, see continued_trace), the file
  // is first replaced atomically by those lines, and later lines are appended.
  explicit TraceWriter(const std::string& path, const std::vector<Json>& head = {});
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  ~TraceWriter();

  void write(const Json& line);  // one line, flushed

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

// A trace read back: the run line, then the step and val lines in file order. Lines of other
// types are kept in `other` (later versions may add some); a reader ignores what it does not know.
struct Trace {
  std::string path;
  Json run;                 // the first line
  std::vector<Json> steps;  // {"type": "step", "step": k, "loss": x, ...}, k strictly increasing
  std::vector<Json> vals;   // {"type": "val", "step": k, "val_loss": x}
  std::vector<Json> other;
  size_t dropped_line = 0;  // the torn last line read_trace dropped (TornLastLine::kDrop), or 0
};

// What read_trace does with a torn last line: one without its newline, or not a JSON object (a
// run killed, or a disk filling up, in the middle of writing it).
enum class TornLastLine { kError, kDrop };

// Reads and validates a JSONL trace: every line a JSON object with a string "type", the first
// of type "run", each step/val line with an integer "step" ≥ 0 and a number (or null, which is
// how JSON writes a NaN or infinite loss) for "loss"/"val_loss", step numbers strictly
// increasing. A bad file is an input error "PATH:LINE: problem". With TornLastLine::kDrop a torn
// last line (only the last) is left out and its number kept in `dropped_line`.
Trace read_trace(const std::string& path, TornLastLine torn = TornLastLine::kError);

// The head of a resumed run's trace: `run` (its run line), then the step, val and resume lines
// of the trace at `path` up to step `step` (the checkpoint's), in the order a run writes them;
// what came after the checkpoint (steps a killed run took past it, its memory line) is dropped.
// Empty when `path` does not exist or is a device or FIFO. An input error when the file's run line
// describes another run or when the file stops before `step`. Run lines are compared without
// "version", "build" and "simd"; the file's must be `checkpoint_run` (the run line stored in the
// checkpoint), or `run` when the file was already continued by a resumed run (which may extend
// train.steps). A torn last line (a run killed while writing it) is dropped; `dropped_line` says
// which, 0 when none was.
struct ContinuedTrace {
  std::vector<Json> head;
  size_t dropped_line = 0;
};
ContinuedTrace continued_trace(const std::string& path, const Json& run, const Json& checkpoint_run,
                               long long step);

}  // namespace reftrain
