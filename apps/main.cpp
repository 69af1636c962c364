// reftrain: a CPU GPT trainer and golden model. Subcommands live in apps/*_cmd.cpp.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "apps/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  using namespace reftrain;
  CLI::App app{"reftrain " REFTRAIN_VERSION ": train small GPTs on the CPU, bit-reproducibly"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("reftrain ") + REFTRAIN_VERSION);
  std::map<CLI::App*, CommandRunner> runners;
  runners[app.add_subcommand("train", "train a preset on text or llm.c tokens")] = {};
  CLI::App* train = app.get_subcommand("train");
  runners[train] = add_train_command(*train);
  CLI::App* presets = app.add_subcommand("presets", "list presets, parameter counts and memory");
  runners[presets] = add_presets_command(*presets);
  CLI::App* explain =
      app.add_subcommand("explain", "walk one kernel's math on a tiny example, step by step");
  runners[explain] = add_explain_command(*explain);
  CLI::App* golden =
      app.add_subcommand("golden", "write golden runs and kernel fixtures for GPU parity tests");
  runners[golden] = add_golden_command(*golden);
  CLI::App* compare =
      app.add_subcommand("compare", "compare a result with a golden trace, tensor file or run");
  runners[compare] = add_compare_command(*compare);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (what.empty()) what = "a subcommand is required: train, presets, explain, golden or compare";
    std::fprintf(stderr, "error: %s (see reftrain --help)\n", what.c_str());
    return kExitUsageError;
  }
  try {
    for (const auto& [sub, run] : runners) {
      if (sub->parsed()) return run();
    }
  } catch (const UserError& e) {
    if (isatty(fileno(stdout))) std::printf("\n");  // end a progress line left open
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory; try a smaller --batch or --seq\n");
    return kExitInputError;
  }
  return kExitUsageError;
}
