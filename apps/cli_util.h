// Command-line helpers shared by the subcommands.
#pragma once

#include <cstdint>
#include <string>

namespace reftrain {

// A --seed value: decimal digits only, 0 .. 2^64-1 (CLI11 would wrap "-1" or 2^64 into a valid
// uint64 silently); a usage error otherwise.
uint64_t parse_seed(const std::string& text);

}  // namespace reftrain
