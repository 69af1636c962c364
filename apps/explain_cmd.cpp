// `reftrain explain KERNEL [--seed S]`, `reftrain explain --list`, the exercises
// (`--exercise N`, `--check N ANSWER`, `--answer N`) and the study pages' figures
// (`--figures DIR`).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

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
  int exercise = 0;                // --exercise N
  int answer = 0;                  // --answer N
  std::vector<std::string> check;  // --check N ANSWER
  std::string figures;             // --figures DIR
  std::string broken;              // --break BUG
};

int write_figures(const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const explain::Figure& f : explain::figures()) {
    const std::string path = dir + "/" + f.name + ".svg";
    std::ofstream out(path, std::ios::binary);
    out << f.svg();
    if (!out) throw input_error("cannot write " + path);
    std::printf("%s  (%s)\n", path.c_str(), f.page.c_str());
  }
  return 0;
}

// Exercise `n` of `kernel`, or a usage error that says how many there are.
explain::Exercise find_exercise(const std::string& kernel, uint64_t seed, int n) {
  const std::vector<explain::Exercise> all = explain::exercises(kernel, seed);
  if (all.empty()) throw usage_error("'" + kernel + "' has no exercises");
  if (n < 1 || size_t(n) > all.size()) {
    throw usage_error("'" + kernel + "' has exercises 1.." + std::to_string(all.size()));
  }
  return all[size_t(n - 1)];
}

int parse_number(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    const int n = std::stoi(text, &used);
    if (used == text.size()) return n;
  } catch (const std::exception&) {
  }
  throw usage_error(what + " must be an integer, got '" + text + "'");
}

int run_exercise(const ExplainArgs& a, uint64_t seed) {
  if (a.exercise > 0) {
    std::fputs(find_exercise(a.kernel, seed, a.exercise).text.c_str(), stdout);
    return 0;
  }
  if (a.answer > 0) {
    std::printf("%.6f\n", find_exercise(a.kernel, seed, a.answer).answer);
    return 0;
  }
  const int n = parse_number(a.check[0], "--check's exercise number");
  const explain::Exercise e = find_exercise(a.kernel, seed, n);
  double given = 0.0;
  try {
    size_t used = 0;
    given = std::stod(a.check[1], &used);
    if (used != a.check[1].size()) throw std::invalid_argument("trailing text");
  } catch (const std::exception&) {
    throw usage_error("--check's answer must be a number, got '" + a.check[1] + "'");
  }
  // A wrong answer exits 1 without the right one, so a student can try again; --answer shows it.
  if (std::isfinite(given) && std::abs(given - e.answer) <= e.tolerance) {
    std::printf("right: %s is within %g of the program's answer\n", a.check[1].c_str(),
                e.tolerance);
    return 0;
  }
  std::printf(
      "wrong: %s is more than %g from the program's answer (try again, or see it with "
      "--answer %d)\n",
      a.check[1].c_str(), e.tolerance, n);
  return 1;
}

int run_explain(const ExplainArgs& a) {
  const auto& all = explain::explainers();
  std::string names;
  for (const explain::Explainer& e : all) names += (names.empty() ? "" : ", ") + e.name;
  if (!a.figures.empty()) return write_figures(a.figures);
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
    if (a.exercise > 0 || a.answer > 0 || !a.check.empty()) {
      return run_exercise(a, parse_seed(a.seed));
    }
    explain::Printer out;
    if (!a.broken.empty()) {
      std::string bugs;
      for (const std::string& b : e.breaks) bugs += (bugs.empty() ? "" : ", ") + b;
      if (std::find(e.breaks.begin(), e.breaks.end(), a.broken) == e.breaks.end()) {
        throw usage_error("'" + e.name + "' has " +
                          (bugs.empty() ? "no broken variants" : "the broken variants: " + bugs));
      }
      e.run_broken(out, parse_seed(a.seed), a.broken);
    } else {
      e.run(out, parse_seed(a.seed));
    }
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
  app.add_option("--exercise", a->exercise, "print exercise N of the kernel's page, with its data")
      ->check(CLI::PositiveNumber);
  app.add_option("--check", a->check, "check ANSWER to exercise N: --check N ANSWER")
      ->expected(2)
      ->allow_extra_args(false);
  app.add_option("--answer", a->answer, "print the program's answer to exercise N")
      ->check(CLI::PositiveNumber);
  app.add_option("--figures", a->figures, "write the study pages' figures (SVG) into DIR");
  app.add_option("--break", a->broken, "run the example with a classic bug put in (see its page)");
  return [a] { return run_explain(*a); };
}

}  // namespace reftrain
