// The subcommands of `reftrain`. Each registers its options on the CLI11 app and returns the
// function that runs it after parsing; a UserError thrown there becomes a one-line message.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace reftrain {

using CommandRunner = std::function<int()>;

CommandRunner add_train_command(CLI::App& app);
CommandRunner add_sample_command(CLI::App& app);
CommandRunner add_eval_command(CLI::App& app);
CommandRunner add_plot_command(CLI::App& app);
CommandRunner add_presets_command(CLI::App& app);
CommandRunner add_explain_command(CLI::App& app);
CommandRunner add_golden_command(CLI::App& app);
CommandRunner add_compare_command(CLI::App& app);
CommandRunner add_tokenizer_command(CLI::App& app);
CommandRunner add_export_command(CLI::App& app);
CommandRunner add_kernels_command(CLI::App& app);

}  // namespace reftrain
