#include "core/formats/input_file.h"

#include <filesystem>

#include "core/base/checked.h"
#include "core/base/error.h"

namespace reftrain {

namespace fs = std::filesystem;

InputFile::InputFile(const std::string& path, const std::string& what) : name_(what + " " + path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) throw input_error(name_ + " does not exist");
  if (st.type() == fs::file_type::directory) throw input_error(name_ + " is a directory");
  if (ec || st.type() != fs::file_type::regular) {
    throw input_error(name_ + " is not a regular file (a device, pipe or unreadable path?)");
  }
  size_ = fs::file_size(path, ec);
  in_.open(path, std::ios::binary);
  if (ec || !in_) throw input_error(name_ + " cannot be read (permissions?)");
}

void InputFile::read_at(uint64_t offset, void* dst, uint64_t n, const std::string& context) {
  if (!(CheckedSize(offset) + n).fits(size_)) {
    throw input_error(name_ + " ends early while reading " + context);
  }
  in_.clear();
  in_.seekg(std::streamoff(offset));
  if (!in_.read(static_cast<char*>(dst), std::streamsize(n))) {
    throw input_error(name_ + " ends early while reading " + context + " (did it change?)");
  }
}

std::string InputFile::read_all() {
  std::string bytes(size_, '\0');
  read_at(0, bytes.data(), size_, "its contents");
  return bytes;
}

}  // namespace reftrain
