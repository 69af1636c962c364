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

// A double as the shortest decimal that reads back to it (std::to_chars), laid out as
// nlohmann's dump lays numbers out ("1.0", "0.0001", "1e-05"). Not finite: "null".
std::string json_number(double x);

// JSON text as reftrain writes it to files, laid out as nlohmann's dump(indent) but with every
// float through json_number: dump's Grisu2 misses the shortest form for about 1 double in 800
// (0.00030197992 came out 0.00030197992000000003). JSON is UTF-8; a string that is not (a file
// name in another encoding) gets U+FFFD in place of its bad bytes instead of a type_error.
std::string json_text(const Json& j, int indent = -1);

// How a writer formats floats: json_text's shortest form, or nlohmann's dump as it was. Only the
// golden files use kPinnedDump: their bytes are pinned (tests/golden/golden_bytes.sha256) and one
// of them holds a float dump wrote long (llama-tiny-mixed-adamw8bit's trace, grad_norm of step
// 49, 0.6706055400000001). Moving them to the shortest form is a re-pin of those hashes.
enum class JsonFloats { kShortest, kPinnedDump };
std::string json_text(const Json& j, int indent, JsonFloats floats);

class TraceWriter {
 public:
  TraceWriter() = default;
  // Opens (truncates) `path`; input error when it cannot. An empty path writes nothing. With
  // `head` (a resumed run's trace: the lines it continues from, see continued_trace), the file
  // is first replaced atomically by those lines, and later lines are appended.
  explicit TraceWriter(const std::string& path, const std::vector<Json>& head = {},
                       JsonFloats floats = JsonFloats::kShortest);
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  ~TraceWriter();

  void write(const Json& line);  // one line, flushed

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
  JsonFloats floats_ = JsonFloats::kShortest;
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

// The head of a resumed run's trace: `run` (its run line), then the step, val and resume lines
// of the trace at `path` up to step `step` (the checkpoint's), in the order a run writes them;
// what came after the checkpoint (steps a killed run took past it, its memory line) is dropped.
// Empty when `path` does not exist. An input error when the file's run line describes another
// run (they may differ only in "version", "build", "simd" and train.steps, which a resume may
// extend) or when the file stops before `step`.
std::vector<Json> continued_trace(const std::string& path, const Json& run, long long step);

}  // namespace reftrain
