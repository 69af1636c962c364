// The subcommands of `reftrain`. Each registers its options on the CLI11 app and returns the
// function that runs it after parsing; a UserError thrown there becomes a one-line message.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>

namespace reftrain {

using CommandRunner = std::function<int()>;

CommandRunner add_train_command(CLI::App& app);
CommandRunner add_sample_command(CLI::App& app);
CommandRunner add_plot_command(CLI::App& app);
CommandRunner add_presets_command(CLI::App& app);
CommandRunner add_explain_command(CLI::App& app);

// A --seed value: 0 .. 2^64-1 written in decimal, a usage error otherwise (CLI11 alone would
// wrap "-1" into a valid seed).
uint64_t parse_seed(const std::string& text);

// Prints each sampled token as soon as it is drawn, flushed: a text model's byte as it is, an
// llm.c model's token id as " ID".
std::function<void(int32_t)> token_printer(bool byte_tokens);

}  // namespace reftrain
