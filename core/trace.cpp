#include "core/trace.h"

#include <cmath>
#include <cstdlib>

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
  // JSON text is UTF-8; a value that is not (a file name in another encoding) gets U+FFFD in
  // place of its bad bytes instead of a type_error that would end the run.
  const std::string s = line.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  if (std::fwrite(s.data(), 1, s.size(), f_) != s.size() || std::fflush(f_) != 0) {
    throw input_error("writing trace file " + path_ + " failed (disk full?)");
  }
}

}  // namespace reftrain
