// Per-kernel wall time of training steps (`reftrain train --profile`): the model times every
// kernel call of forward() and backward() while a profile is set (Model::set_profile), each
// under its kernel name and shape, e.g. `linear_forward 2048x384->1152`. The step time the
// kernels do not cover (optimizer, clipping, data, grad-accum sums) is reported by the caller as
// the rest of the step. Timing reads a steady clock around each call, after the call returns,
// so a kernel's time includes its OpenMP fork and join; nothing inside the kernels changes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace reftrain {

class KernelProfile {
 public:
  struct Entry {
    std::string name;  // kernel and shape
    long long calls = 0;
    double ms = 0;
  };

  // Adds one call of `name` that took `ms`.
  void add(const std::string& name, double ms);
  // The entries, slowest first.
  std::vector<Entry> sorted() const;
  double total_ms() const;
  // A table on `out`: per kernel, calls per step, ms per step, % of the step; then the kernels'
  // sum and the rest of the step. steps: the steps profiled; step_ms: their summed wall time.
  void print(std::FILE* out, int steps, double step_ms) const;

 private:
  std::vector<Entry> entries_;  // in first-call order
  std::unordered_map<std::string, size_t> index_;
};

// Times its scope into `profile` under `name` (nothing when profile is null; the name is
// copied only then, so an unprofiled kernel call allocates nothing).
class ProfileScope {
 public:
  ProfileScope(KernelProfile* profile, std::string_view name)
      : profile_(profile), name_(profile ? std::string(name) : std::string()) {
    if (profile_) start_ = std::chrono::steady_clock::now();
  }
  ~ProfileScope() {
    if (!profile_) return;
    const std::chrono::duration<double, std::milli> d = std::chrono::steady_clock::now() - start_;
    profile_->add(name_, d.count());
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  KernelProfile* profile_;
  std::string name_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace reftrain
