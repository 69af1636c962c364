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
  const std::string s = line.dump() + "\n";
  if (std::fwrite(s.data(), 1, s.size(), f_) != s.size() || std::fflush(f_) != 0) {
    throw input_error("writing trace file " + path_ + " failed (disk full?)");
  }
}

}  // namespace reftrain
