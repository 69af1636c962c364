// Opening a file a reader is about to trust. Every reader makes the same checks first: the file
// exists, it is a regular file (a directory, FIFO or device could block or never end), and it
// opens; its size is known before anything is allocated. Reads are bounds-checked against that
// size, so a file that is shorter than its header claims is an input error, never a short
// buffer.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace reftrain {

class InputFile {
 public:
  // `what` names the file's role in messages: "checkpoint", "token file", ...
  InputFile(const std::string& path, const std::string& what);

  uint64_t size() const { return size_; }
  // "WHAT PATH", the subject of every message about this file.
  const std::string& name() const { return name_; }

  // Reads `n` bytes at `offset` into `dst`; an input error "NAME ends early while reading
  // CONTEXT" when the file does not hold them.
  void read_at(uint64_t offset, void* dst, uint64_t n, const std::string& context);
  std::string read_all();

 private:
  std::ifstream in_;
  std::string name_;
  uint64_t size_ = 0;
};

}  // namespace reftrain
