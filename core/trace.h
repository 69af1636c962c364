// The training trace: JSONL, one JSON object per line. The first line describes the run
// ({"type": "run", preset, every config value, seed, data source and hash, optimizer, build
// flags, version}); then one {"type": "step", step, loss, lr, grad_norm, clip, ms} per step
// (loss of step k is the forward loss before the k-th update), and {"type": "val", step,
// val_loss} after each validation. Numbers are written so that they read back bit-exact.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace reftrain {

using Json = nlohmann::ordered_json;  // keys stay in the order written: "type" first

// A float as the shortest decimal that reads back to the same float (0.9f -> 0.9, not
// 0.8999999761581421), so traces are both readable and bit-exact.
double json_float(float x);

class TraceWriter {
 public:
  TraceWriter() = default;
  // Opens (truncates) `path`; input error when it cannot. An empty path writes nothing.
  explicit TraceWriter(const std::string& path);
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
};

// Reads and validates a JSONL trace: every line a JSON object with a string "type", the first
// of type "run", each step/val line with an integer "step" ≥ 0 and a number (or null, which is
// how JSON writes a NaN or infinite loss) for "loss"/"val_loss", step numbers strictly
// increasing. A bad file is an input error "PATH:LINE: problem".
Trace read_trace(const std::string& path);

}  // namespace reftrain
