// Command-line helpers shared by the subcommands.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace reftrain {

// A --seed value: decimal digits only, 0 .. 2^64-1 (CLI11 would wrap "-1" or 2^64 into a valid
// uint64 silently); a usage error otherwise.
uint64_t parse_seed(const std::string& text);

// Prints each sampled token as soon as it is drawn, flushed: a text model's byte as it is, an
// llm.c model's token id as " ID". Used by `sample` and by the sample that ends `train`.
std::function<void(int32_t)> token_printer(bool byte_tokens);

}  // namespace reftrain
