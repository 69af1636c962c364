// The process's resident memory, from /proc/self/status (Linux). Used to report a run's peak
// next to estimate_memory(), so the estimate is checked on every run.
#pragma once

#include <cstddef>
#include <string>

namespace reftrain {

size_t resident_bytes();       // VmRSS now; 0 when unknown
size_t peak_resident_bytes();  // VmHWM: the peak since start or since reset_peak_resident()
// Restarts VmHWM from the current RSS (writes 5 to /proc/self/clear_refs); false if refused.
bool reset_peak_resident();

// The memory a run may use: the environment's REFTRAIN_MEMORY_LIMIT (bytes, for tests and for
// a user who wants a cap), else the cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes; the
// smallest along the process's cgroup path) when there is one, else MemAvailable from
// /proc/meminfo. `bytes` 0: unknown (nothing to check against). `source` names where it came
// from, for messages.
struct MemoryLimit {
  size_t bytes = 0;
  std::string source;
};
MemoryLimit available_memory();

}  // namespace reftrain
