// Command-line helpers shared by the subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>

#include "core/train/run_config.h"

namespace reftrain {

// A --seed value: decimal digits only, 0 .. 2^64-1 (CLI11 would wrap "-1" or 2^64 into a valid
// uint64 silently); a usage error otherwise.
uint64_t parse_seed(const std::string& text);

// A training value the user may give: the option of one row of train_fields(), flag and help
// from the row. Numbers land in `numbers` (CLI11 checks their type), names and the seed in
// `text` (the names checked against the enum's table).
struct FieldOption {
  const TrainField* field = nullptr;
  CLI::Option* option = nullptr;
  std::string text;
  bool given() const { return option->count() > 0; }
};
// `out` must stay where it is while `app` parses (the option writes into out.text).
void add_field_option(CLI::App& app, const TrainField& field, TrainConfig& numbers,
                      FieldOption& out);
// Sets the field in `t` from what the user gave (nothing when it was not given).
void apply_field_option(const FieldOption& o, const TrainConfig& numbers, TrainConfig& t);

// Number checks for options, like CLI11's NonNegativeNumber and PositiveNumber but with a short
// message: those print the double range's end in full ("Value -5 not in range 0.000000 to
// 17976931348623157...", 309 digits). NaN passes neither.
CLI::Validator non_negative_number();
CLI::Validator positive_number();

// Prints each sampled token as soon as it is drawn, flushed: a text model's byte as it is, an
// llm.c model's token id as " ID". Used by `sample` and by the sample that ends `train`.
std::function<void(int32_t)> token_printer(bool byte_tokens);

}  // namespace reftrain
