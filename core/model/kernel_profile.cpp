#include "core/model/kernel_profile.h"

#include <algorithm>

namespace reftrain {

void KernelProfile::add(const std::string& name, double ms) {
  auto [it, fresh] = index_.try_emplace(name, entries_.size());
  if (fresh) entries_.push_back({name, 0, 0.0});
  Entry& e = entries_[it->second];
  ++e.calls;
  e.ms += ms;
}

std::vector<KernelProfile::Entry> KernelProfile::sorted() const {
  std::vector<Entry> out = entries_;
  std::stable_sort(out.begin(), out.end(),
                   [](const Entry& a, const Entry& b) { return a.ms > b.ms; });
  return out;
}

double KernelProfile::total_ms() const {
  double sum = 0;
  for (const Entry& e : entries_) sum += e.ms;
  return sum;
}

void KernelProfile::print(std::FILE* out, int steps, double step_ms) const {
  if (steps <= 0) return;
  const double per_step = step_ms / steps;
  auto row = [&](const std::string& name, const char* calls, double ms) {
    std::fprintf(out, "%-44s %8s %10.3f %6.1f%%\n", name.c_str(), calls, ms / steps,
                 per_step > 0 ? 100.0 * ms / step_ms : 0.0);
  };
  std::fprintf(out, "profile: %d steps (the first step is not profiled), %.3f ms/step\n", steps,
               per_step);
  std::fprintf(out, "%-44s %8s %10s %7s\n", "kernel", "calls", "ms/step", "share");
  for (const Entry& e : sorted()) {
    char calls[32];
    std::snprintf(calls, sizeof calls, "%.1f", double(e.calls) / steps);
    row(e.name, calls, e.ms);
  }
  const double kernels = total_ms();
  row("all kernels above", "", kernels);
  row("rest of the step (optimizer, clip, data)", "", std::max(0.0, step_ms - kernels));
}

}  // namespace reftrain
