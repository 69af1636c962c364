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

}  // namespace reftrain
