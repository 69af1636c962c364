// The training trace: JSONL, one JSON object per line. The first line describes the run
// ({"type": "run", preset, every config value, seed, data source and hash, optimizer, build
// flags, version}); then one {"type": "step", step, loss, lr, grad_norm, clip, ms} per step
// (loss of step k is the forward loss before the k-th update), and {"type": "val", step,
// val_loss} after each validation. Numbers are written so that they read back bit-exact.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

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

}  // namespace reftrain
