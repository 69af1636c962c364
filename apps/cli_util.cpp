#include "apps/cli_util.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "core/base/error.h"

namespace reftrain {

uint64_t parse_seed(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 20 &&
                      text.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  const unsigned long long v = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE) {
    throw usage_error("--seed " + text + " is not an integer in [0, 18446744073709551615]");
  }
  return v;
}

std::function<void(int32_t)> token_printer(bool byte_tokens) {
  return [byte_tokens](int32_t token) {
    if (byte_tokens) {
      std::fputc(token, stdout);
    } else {
      std::printf(" %d", int(token));
    }
    std::fflush(stdout);
  };
}

}  // namespace reftrain
