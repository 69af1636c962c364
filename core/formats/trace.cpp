#include "core/formats/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "core/base/error.h"
#include "core/base/json_depth.h"
#include "core/formats/atomic_file.h"
#include "core/formats/input_file.h"

namespace reftrain {

double json_float(float x) {
  if (!std::isfinite(x)) return double(x);
  char buf[32];
  *std::to_chars(buf, buf + sizeof buf - 1, x).ptr = '\0';  // the shortest that reads back
  return std::strtod(buf, nullptr);
}

std::string json_number(double x) {
  if (!std::isfinite(x)) return "null";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  char sci[32];
  *std::to_chars(sci, sci + sizeof sci - 1, x, std::chars_format::scientific).ptr = '\0';
  // sci is [-]d[.ddd]e±XX: the digits, and the exponent of the first one.
  std::string out, digits;
  const char* p = sci;
  if (*p == '-') out += *p++;
  for (; *p != 'e'; ++p) {
    if (*p != '.') digits += *p;
  }
  const int k = int(digits.size()), n = std::atoi(p + 1) + 1;  // value = 0.digits × 10^n
  if (k <= n && n <= 15) return out + digits + std::string(size_t(n - k), '0') + ".0";
  if (0 < n && n <= 15) return out + digits.substr(0, size_t(n)) + "." + digits.substr(size_t(n));
  if (-4 < n && n <= 0) return out + "0." + std::string(size_t(-n), '0') + digits;
  out += digits.substr(0, 1) + (k > 1 ? "." + digits.substr(1) : "") + "e";
  const int e = n - 1;
  out += e < 0 ? '-' : '+';
  const std::string mag = std::to_string(std::abs(e));
  return out + (mag.size() < 2 ? "0" : "") + mag;
}

namespace {

void append_json(std::string& out, const Json& j, int indent, int level) {
  const auto newline = [&](int depth) {
    if (indent >= 0) out += "\n" + std::string(size_t(indent * depth), ' ');
  };
  if (j.is_number_float()) {
    out += json_number(j.get<double>());
  } else if ((j.is_object() || j.is_array()) && !j.empty()) {
    out += j.is_object() ? '{' : '[';
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it, first = false) {
      if (!first) out += ',';
      newline(level + 1);
      if (j.is_object()) {
        out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace);
        out += indent >= 0 ? ": " : ":";
      }
      append_json(out, *it, indent, level + 1);
    }
    newline(level);
    out += j.is_object() ? '}' : ']';
  } else {
    out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

}  // namespace

std::string json_text(const Json& j, int indent) {
  std::string out;
  append_json(out, j, indent, 0);
  return out;
}

Json step_line(const StepRecord& r) {
  Json j = {{"type", "step"}, {"step", r.step}, {"loss", json_float(r.loss)}};
  if (r.z_loss) j["z_loss"] = json_float(*r.z_loss);
  j["grad_norm"] = json_float(r.grad_norm);
  j["clip"] = json_float(r.clip);
  j["lr"] = json_float(r.lr);
  if (r.ms) j["ms"] = std::round(*r.ms * 1000.0) / 1000.0;
  if (r.skipped) j["skipped"] = true;
  return j;
}

TraceWriter::TraceWriter(const std::string& path, const std::vector<Json>& head) : path_(path) {
  if (path.empty()) return;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw input_error("trace file " + printable(path, 200) + " is a directory; give a file name");
  }
  if (!head.empty()) {
    AtomicFileWriter out(path);
    for (const Json& line : head) {
      const std::string s = json_text(line) + "\n";
      out.write(s.data(), s.size());
    }
    out.commit();
  }
  f_ = std::fopen(path.c_str(), head.empty() ? "w" : "a");
  if (!f_) throw input_error("cannot write trace file " + path + " (does its directory exist?)");
}

TraceWriter::~TraceWriter() {
  if (f_) std::fclose(f_);
}

void TraceWriter::write(const Json& line) {
  if (!f_) return;
  // JSON text is UTF-8; a value that is not (a file name in another encoding) gets U+FFFD in
  // place of its bad bytes instead of a type_error that would end the run.
  const std::string s = json_text(line) + "\n";
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

constexpr int kMaxTraceDepth = 16;

// Why `text` is not JSON, where the reason is more than a syntax error.
std::string json_syntax_error(const std::string& text) {
  try {
    const Json j = Json::parse(text);  // throws: the caller's parse of the same text failed
  } catch (const Json::out_of_range& e) {
    // 406: a number beyond the double range (1e400), which the parser refuses.
    if (e.id == 406) return "a number is out of range (beyond +-1.8e308)";
  } catch (const Json::exception&) {
  }
  return "not a JSON object";
}

}  // namespace

Trace read_trace(const std::string& path, TornLastLine torn) {
  InputFile file(path, "trace");
  const std::string all = file.read_all();
  const bool ends_in_newline = all.empty() || all.back() == '\n';
  const size_t line_count = size_t(std::count(all.begin(), all.end(), '\n')) + !ends_in_newline;
  std::istringstream in(all);
  Trace t;
  t.path = path;
  std::string text;
  long long last_step = -1, last_val = -1;
  for (size_t line_no = 1; std::getline(in, text); ++line_no) {
    const auto fail = [&](const std::string& why) {
      return input_error(path + ":" + std::to_string(line_no) + ": " + why);
    };
    // A byte order mark (editors on Windows write one) opens the file, not the JSON.
    if (line_no == 1 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
    // reftrain's lines nest 3 levels; parsing "[[[[" costs ~40 bytes of memory a byte.
    const bool too_deep = json_nested_deeper_than(text, kMaxTraceDepth);
    Json j = too_deep ? Json(Json::value_t::discarded)
                      : Json::parse(text, nullptr, /*allow_exceptions=*/false);
    const bool whole = !j.is_discarded() && j.is_object();
    if (torn == TornLastLine::kDrop && line_no == line_count && (!whole || !ends_in_newline)) {
      t.dropped_line = line_no;
      break;
    }
    if (too_deep) {
      throw fail("JSON nested deeper than " + std::to_string(kMaxTraceDepth) +
                 " levels, which no trace line is");
    }
    if (j.is_discarded()) throw fail(json_syntax_error(text));
    if (!j.is_object()) throw fail("not a JSON object");
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
  if (t.run.is_null()) throw input_error(path + ": empty trace (no run line)");
  return t;
}

namespace {

// The run line without what may change between a run and its resumption (and, unless
// `with_steps`, without train.steps, which a resumed run may extend).
Json comparable_run(Json run, bool with_steps) {
  if (!run.is_object()) return run;
  for (const char* key : {"version", "build", "simd"}) run.erase(key);
  if (!with_steps && run.contains("train") && run["train"].is_object()) run["train"].erase("steps");
  return run;
}

long long step_of(const Json& j) {
  return j.contains("step") && j.at("step").is_number_integer() ? j.at("step").get<long long>()
                                                                : -1;
}

// An input error when `old` is not the trace of the run that wrote the checkpoint (whose run
// line is `checkpoint_run`) nor this invocation's own (`run`, after it resumed the trace once).
void check_same_run(const std::string& path, const Trace& old, const Json& run,
                    const Json& checkpoint_run) {
  const Json a = comparable_run(old.run, false), b = comparable_run(run, false);
  if (a != b) {
    std::string key = "?";
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (!a.contains(it.key()) || a.at(it.key()) != it.value()) {
        key = it.key();
        break;
      }
    }
    throw input_error("trace " + path + " is the trace of another run (its run line differs in \"" +
                      key + "\"); give the resumed run a new --trace file");
  }
  // The same configuration but another length is another run too: the schedule differs.
  const Json mine = comparable_run(old.run, true);
  if (mine == comparable_run(checkpoint_run, true)) return;
  const bool resumed = std::any_of(old.other.begin(), old.other.end(),
                                   [](const Json& j) { return j.at("type") == "resume"; });
  if (resumed && mine == comparable_run(run, true)) return;
  const auto steps = [](const Json& j) {
    const Json none;
    const Json& train = j.is_object() && j.contains("train") ? j.at("train") : none;
    return train.is_object() && train.contains("steps") ? train.at("steps").dump() : "?";
  };
  throw input_error("trace " + path + " is the trace of another run (a " + steps(old.run) +
                    "-step run; the checkpoint's is a " + steps(checkpoint_run) +
                    "-step run); give the resumed run a new --trace file");
}

}  // namespace

ContinuedTrace continued_trace(const std::string& path, const Json& run, const Json& checkpoint_run,
                               long long step) {
  // Nothing to continue in a new file, nor in a device or FIFO (--trace /dev/null).
  std::error_code ec;
  const auto kind = std::filesystem::status(path, ec).type();
  if (kind == std::filesystem::file_type::not_found ||
      kind == std::filesystem::file_type::character || kind == std::filesystem::file_type::fifo) {
    return {};
  }
  const Trace old = read_trace(path, TornLastLine::kDrop);
  check_same_run(path, old, run, checkpoint_run);
  if (old.steps.empty() || step_of(old.steps.back()) < step) {
    throw input_error("trace " + path + " ends before step " + std::to_string(step) +
                      ", the checkpoint's; give the resumed run a new --trace file");
  }
  // (step, rank, line): a run writes step k's line, then val k, then a resume at k.
  std::vector<std::tuple<long long, int, const Json*>> lines;
  for (const Json& j : old.steps) lines.emplace_back(step_of(j), 0, &j);
  for (const Json& j : old.vals) lines.emplace_back(step_of(j), 1, &j);
  for (const Json& j : old.other) {
    if (j.at("type") == "resume") lines.emplace_back(step_of(j), 2, &j);
  }
  std::stable_sort(lines.begin(), lines.end(), [](const auto& x, const auto& y) {
    return std::get<0>(x) != std::get<0>(y) ? std::get<0>(x) < std::get<0>(y)
                                            : std::get<1>(x) < std::get<1>(y);
  });
  ContinuedTrace out{{run}, old.dropped_line};
  for (const auto& [k, rank, line] : lines) {
    if (k >= 0 && k <= step) out.head.push_back(*line);
  }
  return out;
}

}  // namespace reftrain
