// Helpers shared by the tests: running a command, temporary directories, small files.
#pragma once

#include <omp.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/base/error.h"

namespace reftrain::testing {

struct CommandResult {
  int exit_code;       // the process's exit status, or -1 when it did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs `cmd` through /bin/sh with stderr merged into stdout.
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r{-1, ""};
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

// `reftrain ARGS`, the binary built alongside the tests.
inline CommandResult run_reftrain(const std::string& args) {
  return run_command(std::string(REFTRAIN_BIN) + " " + args);
}

// The command line that runs tests/torch/NAME under the python that has torch (the PyTorch
// oracle's interpreter, found by tests/CMakeLists.txt).
inline std::string python_script(const std::string& name) {
  return std::string(REFTRAIN_TORCH_PYTHON) + " " REFTRAIN_SOURCE_DIR "/tests/torch/" + name;
}

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("reftrain-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The elements' bytes as they are in memory (little-endian raw arrays for the Python oracles).
template <typename T>
void write_raw(const std::string& path, const std::vector<T>& v) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(T)));
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// llm.c's 256-int32 little-endian header followed by `tail`.
inline std::string llmc_header(const std::vector<int32_t>& values, const std::string& tail = "") {
  std::string h(256 * 4, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t v = uint32_t(values[i]);
    for (int b = 0; b < 4; ++b) h[4 * i + b] = char((v >> (8 * b)) & 0xff);
  }
  return h + tail;
}

// Tokens as llm.c stores them: little-endian uint16.
inline std::string uint16_le(const std::vector<uint16_t>& tokens) {
  std::string s;
  for (uint16_t t : tokens) s += char(t & 0xff), s += char(t >> 8);
  return s;
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
// Unit roundoff of float: one rounding errs by at most u relative to its result.
constexpr double kU = 0x1p-24;

// The message of the reftrain::UserError that `f` throws ("" when it throws none).
template <typename F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// Deterministic test data: mt19937_64's sequence is fixed by the standard, and every mapping is
// done here, so no library distribution is involved and the data is the same on every platform.
class TestData {
 public:
  explicit TestData(uint64_t seed) : gen_(seed) {}
  double unit() { return double(gen_() >> 11) * 0x1p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }
  uint64_t below(uint64_t n) { return gen_() % n; }
  std::vector<double> vec(size_t n, double lo, double hi) {
    std::vector<double> v(n);
    for (double& x : v) x = uniform(lo, hi);
    return v;
  }
  // ±[1, 2)·2^e with e uniform in [lo, hi]: values spread over many binades.
  double spread(int lo, int hi) {
    const double mag = std::ldexp(uniform(1.0, 2.0), lo + int(below(uint64_t(hi - lo + 1))));
    return unit() < 0.5 ? -mag : mag;
  }
  double normal() {  // Box-Muller
    const double r = std::sqrt(-2.0 * std::log(1.0 - unit()));
    return r * std::cos(6.283185307179586 * unit());
  }
  // Student's t with 3 degrees of freedom: heavy tails (finite variance, infinite kurtosis).
  double student3() {
    const double z = normal();
    double c = 0;
    for (int k = 0; k < 3; ++k) {
      const double x = normal();
      c += x * x;
    }
    return z / std::sqrt(c / 3);
  }

 private:
  std::mt19937_64 gen_;
};

// OpenMP team size control: sets the thread count (dynamic adjustment off) and restores both on
// destruction. team_size() is what a parallel region actually gets, so a test can check that
// OpenMP honoured the request rather than silently running one thread.
class OmpThreads {
 public:
  OmpThreads() : saved_(omp_get_max_threads()), saved_dynamic_(omp_get_dynamic()) {
    omp_set_dynamic(0);
  }
  ~OmpThreads() {
    omp_set_num_threads(saved_);
    omp_set_dynamic(saved_dynamic_);
  }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;
  void set(int n) { omp_set_num_threads(n); }
  static int team_size() {
    int team = 0;
#pragma omp parallel
    {
#pragma omp single
      team = omp_get_num_threads();
    }
    return team;
  }

 private:
  int saved_;
  int saved_dynamic_;
};

}  // namespace reftrain::testing
