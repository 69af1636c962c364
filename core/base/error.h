// Errors a user can cause. Each carries a one-line message that names the problem and,
// where there is one, the fix; apps/main.cpp prints it and exits with `exit_code`.
#pragma once

#include <stdexcept>
#include <string>

namespace reftrain {

// Exit codes of the `reftrain` command (documented in README.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitInputError = 1,  // a file or its contents: missing, unreadable, corrupt, too short
  kExitUsageError = 2,  // the command line: unknown flag or preset, value out of range
};

class UserError : public std::runtime_error {
 public:
  UserError(const std::string& message, int exit_code)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

inline UserError usage_error(const std::string& message) {
  return UserError(message, kExitUsageError);
}
inline UserError input_error(const std::string& message) {
  return UserError(message, kExitInputError);
}

// `text` taken from a file (a tensor name, a dtype), fit for a one-line message: quoted,
// control and non-ASCII bytes as \xNN, cut at `max_chars` with "...". A corrupt file can hold
// a newline or a megabyte where a name should be.
inline std::string printable(const std::string& text, size_t max_chars = 64) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == max_chars) return out + "'...";
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out + "'";
}

}  // namespace reftrain
