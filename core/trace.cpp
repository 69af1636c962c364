#include "core/trace.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "core/error.h"

namespace reftrain {

double json_float(float x) {
  if (!std::isfinite(x)) return double(x);
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, double(x));
    if (std::strtof(buf, nullptr) == x) break;
  }
  return std::strtod(buf, nullptr);
}

TraceWriter::TraceWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) throw input_error("cannot write trace file " + path + " (does its directory exist?)");
}

TraceWriter::~TraceWriter() {
  if (f_) std::fclose(f_);
}

void TraceWriter::write(const Json& line) {
  if (!f_) return;
  const std::string s = line.dump() + "\n";
  if (std::fwrite(s.data(), 1, s.size(), f_) != s.size() || std::fflush(f_) != 0) {
    throw input_error("writing trace file " + path_ + " failed (disk full?)");
  }
}

namespace {

bool is_number_or_null(const Json& j, const char* key) {
  return j.contains(key) && (j.at(key).is_number() || j.at(key).is_null());
}

// Why line `j` (not the first) is not a valid step or val line, or "" when it is. `last` is the
// step number of the previous line of the same type.
std::string bad_record(const Json& j, const char* value_key, long long last) {
  if (!j.contains("step") || !j.at("step").is_number_integer() ||
      j.at("step").get<long long>() < 0) {
    return "needs an integer \"step\" >= 0";
  }
  if (!is_number_or_null(j, value_key)) return std::string("needs a number \"") + value_key + "\"";
  if (j.at("step").get<long long>() <= last) return "step numbers must increase";
  return "";
}

}  // namespace

Trace read_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error("cannot open trace " + path);
  Trace t;
  t.path = path;
  std::string text;
  long long last_step = -1, last_val = -1;
  for (size_t line_no = 1; std::getline(in, text); ++line_no) {
    const auto fail = [&](const std::string& why) {
      return input_error(path + ":" + std::to_string(line_no) + ": " + why);
    };
    Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) throw fail("not a JSON object");
    if (!j.contains("type") || !j.at("type").is_string()) throw fail("needs a string \"type\"");
    const std::string type = j.at("type").get<std::string>();
    if (line_no == 1) {
      if (type != "run") throw fail("the first line must be the run line (\"type\": \"run\")");
      t.run = std::move(j);
      continue;
    }
    const bool step = type == "step", val = type == "val";
    if (!step && !val) {
      t.other.push_back(std::move(j));
      continue;
    }
    const std::string why = bad_record(j, step ? "loss" : "val_loss", step ? last_step : last_val);
    if (!why.empty()) throw fail(type + " line " + why);
    (step ? last_step : last_val) = j.at("step").get<long long>();
    (step ? t.steps : t.vals).push_back(std::move(j));
  }
  if (in.bad()) throw input_error("reading trace " + path + " failed");
  if (t.run.is_null()) throw input_error(path + ": empty trace (no run line)");
  return t;
}

}  // namespace reftrain
