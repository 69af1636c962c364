// The process's resident memory, from /proc/self/status (Linux). Used to report a run's peak
// next to estimate_memory(), so the estimate is checked on every run.
#pragma once

#include <cstddef>

namespace reftrain {

size_t resident_bytes();       // VmRSS now; 0 when unknown
size_t peak_resident_bytes();  // VmHWM: the peak since start or since reset_peak_resident()
// Restarts VmHWM from the current RSS (writes 5 to /proc/self/clear_refs); false if refused.
bool reset_peak_resident();

}  // namespace reftrain
