// What every fuzz target shares. The readers take a path, as the program calls them, so each
// input is written to one scratch file per process (in /dev/shm when there is one: no disk I/O)
// and the target calls the program's own reader on it. A reader may throw only UserError (its
// documented error); anything else escapes the target and libFuzzer reports it, as it does a
// crash, a sanitizer report, a hang (-timeout) or a huge allocation (-malloc_limit_mb).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace reftrain::fuzz {

class ScratchFile {
 public:
  explicit ScratchFile(const std::string& target) {
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm", ec)
                                          ? std::filesystem::path("/dev/shm")
                                          : std::filesystem::temp_directory_path();
    path_ = (dir / ("reftrain-fuzz-" + target + "-" + std::to_string(getpid()))).string();
  }
  ~ScratchFile() { std::remove(path_.c_str()); }

  // Replaces the file's contents with the input; returns its path.
  const std::string& write(const uint8_t* data, size_t size) {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
      std::perror(path_.c_str());  // the fuzzing machine, not the input, is at fault
      std::abort();
    }
    return path_;
  }

 private:
  std::string path_;
};

// A scratch directory per process, for readers that find their files by name in a directory
// (vocab.json + merges.txt, config.json beside model.safetensors).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& target) {
    std::error_code ec;
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    path_ = base / ("reftrain-fuzz-" + target + "-" + std::to_string(getpid()));
    std::filesystem::create_directories(path_, ec);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  // Replaces DIR/NAME's contents with `bytes`; returns its path.
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string file = (path_ / name).string();
    std::FILE* f = std::fopen(file.c_str(), "wb");
    if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
        std::fclose(f) != 0) {
      std::perror(file.c_str());
      std::abort();
    }
    return file;
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// An invariant the reader promises for every file it accepts; a violation is a finding.
#define FUZZ_CHECK(cond)                                                                \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

}  // namespace reftrain::fuzz
