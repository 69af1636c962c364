// `reftrain explain KERNEL [--seed S]` and `reftrain explain --list`.
#include <cstdio>
#include <memory>
#include <string>

#include "apps/cli_util.h"
#include "apps/commands.h"
#include "apps/explain/explain.h"
#include "core/base/error.h"

namespace reftrain {

namespace {
struct ExplainArgs {
  std::string kernel;
  std::string seed = "1";
  bool list = false;
};

int run_explain(const ExplainArgs& a) {
  const auto& all = explain::explainers();
  std::string names;
  for (const explain::Explainer& e : all) names += (names.empty() ? "" : ", ") + e.name;
  if (a.list) {
    // Two lines a kernel, so that the list fits 80 columns: the name and what it is, then its
    // study page.
    for (const explain::Explainer& e : all) {
      std::printf("%-19s %s\n%-19s %s\n", e.name.c_str(), e.summary.c_str(), "", e.page.c_str());
    }
    return 0;
  }
  parse_seed(a.seed);  // a bad --seed is an error whatever the kernel
  if (a.kernel.empty()) throw usage_error("name a kernel to explain: " + names);
  for (const explain::Explainer& e : all) {
    if (e.name != a.kernel) continue;
    explain::Printer out;
    e.run(out, parse_seed(a.seed));
    std::fputs(out.text().c_str(), stdout);
    return 0;
  }
  throw usage_error("unknown kernel '" + a.kernel + "'; choose one of: " + names);
}
}  // namespace

CommandRunner add_explain_command(CLI::App& app) {
  auto a = std::make_shared<ExplainArgs>();
  app.add_option("kernel", a->kernel, "the kernel to walk through (see --list)");
  app.add_option("--seed", a->seed, "seed of the tiny example's numbers")->capture_default_str();
  app.add_flag("--list", a->list, "list the kernels and their study pages");
  return [a] { return run_explain(*a); };
}

}  // namespace reftrain
