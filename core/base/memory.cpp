#include "core/base/memory.h"

#include <cstdlib>
#include <filesystem>
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

namespace reftrain {

namespace {
// The first number in `path`; 0 when the file is missing or holds none ("max": no limit).
size_t number_in(const std::string& path) {
  std::ifstream in(path);
  unsigned long long v = 0;
  return in >> v ? size_t(v) : 0;
}

// The smallest limit in `file` from the cgroup directory `dir` up to `root`. cgroup v1 writes
// "no limit" as a number near 2^63, which is treated as none.
size_t smallest_limit(std::filesystem::path dir, const std::filesystem::path& root,
                      const char* file) {
  size_t best = 0;
  for (;;) {
    const size_t v = number_in((dir / file).string());
    if (v > 0 && v < (size_t(1) << 60) && (best == 0 || v < best)) best = v;
    if (dir == root || !dir.has_relative_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  return best;
}

// The cgroup memory limit of this process: 0 when there is none.
MemoryLimit cgroup_limit() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), rel = line.substr(b + 1);
    if (controllers.empty()) {  // v2: "0::/path"
      const std::filesystem::path root = "/sys/fs/cgroup";
      if (const size_t v = smallest_limit(root / rel.substr(1), root, "memory.max")) {
        return {v, "the cgroup limit (memory.max)"};
      }
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      const std::filesystem::path root = "/sys/fs/cgroup/memory";
      if (const size_t v = smallest_limit(root / rel.substr(1), root, "memory.limit_in_bytes")) {
        return {v, "the cgroup limit (memory.limit_in_bytes)"};
      }
    }
  }
  return {};
}
}  // namespace

MemoryLimit available_memory() {
  if (const char* env = std::getenv("REFTRAIN_MEMORY_LIMIT")) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (*env != '\0' && *end == '\0' && v > 0) return {size_t(v), "REFTRAIN_MEMORY_LIMIT"};
  }
  const MemoryLimit cgroup = cgroup_limit();
  if (cgroup.bytes > 0) return cgroup;
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(line.find(':') + 1));
    size_t kib = 0;
    fields >> kib;
    return {kib * 1024, "MemAvailable"};
  }
  return {};
}

}  // namespace reftrain
