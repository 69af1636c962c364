#include "core/base/memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace reftrain {

namespace {
// The value in kB of a "Key:   1234 kB" line of /proc/self/status, in bytes.
size_t status_field(const char* key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream fields(line.substr(line.find(':') + 1));
    size_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}
}  // namespace

size_t resident_bytes() {
  return status_field("VmRSS:");
}

size_t peak_resident_bytes() {
  return status_field("VmHWM:");
}

bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace reftrain
