// The study pages (docs/kernels/, and docs/training.md) and `reftrain explain` must agree: every
// worked example on a page is the verbatim output of the command named in the marker above it, and
// every kernel `explain --list` names has its page, which shows its example.
//
// A page marks an example (or an exercise's text, `explain NAME --exercise N`) as
//   <!-- reftrain explain NAME --seed S -->
//   ```text
//   ...the output...
//   ```
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ops/bf16.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

const std::string kDocs = std::string(REFTRAIN_SOURCE_DIR) + "/docs/kernels";

struct Example {
  std::string page, args, text;
};

// Every marked example of every page.
std::vector<Example> examples() {
  const std::regex marker(
      R"(<!-- reftrain (explain [a-z0-9_]+ (?:--break [a-z_]+ )?--(?:seed|exercise) [0-9]+) -->\n```text\n)");
  std::vector<Example> out;
  std::vector<fs::path> pages = {fs::path(REFTRAIN_SOURCE_DIR) / "docs" / "training.md"};
  for (const auto& entry : fs::directory_iterator(kDocs)) pages.push_back(entry.path());
  for (const fs::path& path : pages) {
    if (path.extension() != ".md") continue;
    const std::string page = read_file(path.string());
    for (auto it = std::sregex_iterator(page.begin(), page.end(), marker);
         it != std::sregex_iterator(); ++it) {
      const size_t begin = size_t(it->position(0) + it->length(0));
      const size_t end = page.find("```\n", begin);
      EXPECT_NE(end, std::string::npos) << path << ": unterminated example";
      if (end == std::string::npos) continue;
      out.push_back({path.filename().string(), (*it)[1], page.substr(begin, end - begin)});
    }
  }
  return out;
}

TEST(Explain, EveryPageExampleIsTheProgramsOutput) {
  const std::vector<Example> all = examples();
  ASSERT_FALSE(all.empty()) << "no marked examples under " << kDocs;
  for (const Example& e : all) {
    SCOPED_TRACE(e.page + ": reftrain " + e.args);
    const CommandResult r = run_reftrain(e.args);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(e.text, r.output) << "regenerate the example with: ./build/reftrain " << e.args;
  }
}

// The definition of `function` in `source`: from its signature (and a `template` line right
// above it) to the first line that is a lone "}". Empty when the file defines no such function.
std::string definition(const std::string& source, const std::string& function) {
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  const std::regex signature("^[A-Za-z_][\\w:<>,\\s\\*&]*\\b" + function + "\\(");
  auto last = [](const std::string& l) { return l.empty() ? '\0' : l.back(); };
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!std::regex_search(lines[i], signature)) continue;
    size_t j = i;
    while (j < lines.size() && last(lines[j]) != '{' && last(lines[j]) != ';') ++j;
    if (j == lines.size() || last(lines[j]) == ';') continue;  // a declaration
    const size_t start = i > 0 && lines[i - 1].rfind("template", 0) == 0 ? i - 1 : i;
    std::string text;
    for (size_t k = start; k < lines.size(); ++k) {
      text += lines[k] + "\n";
      if (k > j && lines[k] == "}") return text;
    }
  }
  return "";
}

TEST(Explain, EveryCodeListingIsTheSource) {
  const std::regex marker(R"(<!-- listing ([\w/.]+) (\w+) -->\n```cpp\n)");
  int listings = 0;
  for (const auto& entry : fs::directory_iterator(kDocs)) {
    const std::string page = read_file(entry.path().string());
    for (auto it = std::sregex_iterator(page.begin(), page.end(), marker);
         it != std::sregex_iterator(); ++it) {
      const std::string file = (*it)[1], function = (*it)[2];
      SCOPED_TRACE(entry.path().filename().string() + ": " + file + " " + function);
      const size_t begin = size_t(it->position(0) + it->length(0));
      const size_t end = page.find("```\n", begin);
      ASSERT_NE(end, std::string::npos) << "unterminated listing";
      const std::string source = read_file(std::string(REFTRAIN_SOURCE_DIR) + "/" + file);
      const std::string wanted = definition(source, function);
      EXPECT_FALSE(wanted.empty()) << file << " defines no " << function;
      EXPECT_EQ(page.substr(begin, end - begin), wanted) << "copy the function again from " << file;
      ++listings;
    }
  }
  EXPECT_GE(listings, 12);
}

// A page that derives a backward quotes the reference's backward too, not only its forward.
TEST(Explain, EveryDerivedBackwardIsQuoted) {
  const std::vector<std::pair<std::string, std::string>> wanted = {
      {"01_embed.md", "embed_backward"},
      {"02_norm.md", "layernorm_backward"},
      {"02_norm.md", "rmsnorm_backward"},
      {"04_rope.md", "rope_backward"},
      {"06_swiglu.md", "gelu_backward"},
      {"06_swiglu.md", "swiglu_backward"},
      {"07_loss.md", "crossentropy_forward_backward"},
      {"09_backward_ffn.md", "residual_backward"},
      {"10_attention_backward.md", "attention_backward"},
      {"11_linear_backward.md", "linear_backward"}};
  for (const auto& [page, function] : wanted) {
    const std::string text = read_file(kDocs + "/" + page);
    EXPECT_TRUE(std::regex_search(text, std::regex("<!-- listing [\\w/.]+ " + function + " -->")))
        << page << " derives " << function << " but does not quote it";
  }
}

TEST(Explain, DefinitionSkipsDeclarationsAndEndsAtTheClosingBrace) {
  const std::string source =
      "void f(int x);\nint g();\ntemplate <typename T>\nvoid f(T x,\n       int y) {\n  if (x) "
      "{\n  }\n}\nvoid h() {}\n";
  EXPECT_EQ(definition(source, "f"),
            "template <typename T>\nvoid f(T x,\n       int y) {\n  if (x) {\n  }\n}\n");
  EXPECT_EQ(definition(source, "missing"), "");
}

TEST(Explain, EveryKernelHasItsPageAndExample) {
  const CommandResult list = run_reftrain("explain --list");
  ASSERT_EQ(list.exit_code, 0) << list.output;
  std::set<std::string> shown;
  for (const Example& e : examples()) {
    // Exercises and broken variants are not the example.
    if (e.args.find("--seed") == std::string::npos || e.args.find("--break") != std::string::npos)
      continue;
    shown.insert(e.page + " " + e.args.substr(8, e.args.find(' ', 8) - 8));
  }
  // --list prints two lines a kernel: "NAME  summary", then the indented page path.
  std::istringstream lines(list.output);
  int kernels = 0;
  for (std::string line, page_line; std::getline(lines, line) && std::getline(lines, page_line);) {
    EXPECT_LE(line.size(), 80u) << line;
    EXPECT_LE(page_line.size(), 80u) << page_line;
    const std::string name = line.substr(0, line.find(' '));
    const std::string page = page_line.substr(page_line.find_first_not_of(' '));
    ++kernels;
    EXPECT_TRUE(fs::exists(std::string(REFTRAIN_SOURCE_DIR) + "/" + page)) << name << ": " << page;
    EXPECT_TRUE(shown.count(fs::path(page).filename().string() + " " + name))
        << name << " has no worked example on " << page;
  }
  EXPECT_GE(kernels, 12);
}

// Every exercise a page shows is checked by the program: the program's own answer is right, a
// number off by a little more than the tolerance is wrong, and the text fits 80 columns. Seeds
// other than 1 give other data and other answers.
TEST(Explain, ExercisesAreCheckedByTheProgram) {
  int checked = 0;
  for (const Example& e : examples()) {
    if (e.args.find("--exercise") == std::string::npos) continue;
    SCOPED_TRACE(e.page + ": reftrain " + e.args);
    const std::string kernel = e.args.substr(8, e.args.find(' ', 8) - 8);
    const std::string n = e.args.substr(e.args.rfind(' ') + 1);
    std::istringstream lines(e.text);
    for (std::string l; std::getline(lines, l);) EXPECT_LE(l.size(), 80u) << l;
    EXPECT_NE(e.text.find("reftrain explain " + kernel + " --check " + n + " ANSWER"),
              std::string::npos)
        << "the exercise does not say how to check it";
    for (const char* seed : {"1", "7"}) {
      const std::string at = "explain " + kernel + " --seed " + seed;
      const CommandResult answer = run_reftrain(at + " --answer " + n);
      ASSERT_EQ(answer.exit_code, 0) << answer.output;
      const double value = std::stod(answer.output);
      const CommandResult right = run_reftrain(at + " --check " + n + " " + answer.output);
      EXPECT_EQ(right.exit_code, 0) << right.output;
      EXPECT_EQ(right.output.rfind("right: ", 0), 0u) << right.output;
      // 0.05 is above every exercise's tolerance (answers to 2 decimals or finer).
      char off[64];
      std::snprintf(off, sizeof off, "%.6f", value + 0.05);
      const CommandResult wrong = run_reftrain(at + " --check " + n + " " + off);
      EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
      EXPECT_EQ(wrong.output.rfind("wrong: ", 0), 0u) << wrong.output;
      EXPECT_EQ(wrong.output.find(answer.output.substr(0, answer.output.size() - 1)),
                std::string::npos)
          << "a wrong answer must not give the right one away";
    }
    ++checked;
  }
  EXPECT_GE(checked, 14);
  EXPECT_EQ(run_reftrain("explain backprop --check 9 1").exit_code, 2);
  EXPECT_EQ(run_reftrain("explain backprop --check 1 one").exit_code, 2);
  EXPECT_EQ(run_reftrain("explain init --exercise 1").exit_code, 2);
}

// A "break it" variant shown on a page is caught by its own check: the finite difference fails
// or the compare with the kernel does.
TEST(Explain, EveryBrokenVariantIsCaught) {
  int broken = 0;
  for (const Example& e : examples()) {
    if (e.args.find("--break") == std::string::npos) continue;
    ++broken;
    EXPECT_TRUE(e.text.find("DIFFERENT") != std::string::npos ||
                e.text.find("fails the check") != std::string::npos)
        << e.page << ": reftrain " << e.args << " is not caught:\n"
        << e.text;
  }
  EXPECT_GE(broken, 2);
  for (const Example& e : examples()) {
    if (e.args.find("--break") == std::string::npos) continue;
    std::istringstream lines(e.text);
    for (std::string l; std::getline(lines, l);) EXPECT_LE(l.size(), 80u) << e.args << ": " << l;
  }
  EXPECT_EQ(run_reftrain("explain attention --break no_such_bug").exit_code, 2);
  EXPECT_EQ(run_reftrain("explain embed --break assign").exit_code, 2);
}

// `explain bf16_dot` prints its inputs' bf16 bits and both orders' result bits: computed again
// from those inputs, dot_bf16_canonical gives the canonical bits and one FMA chain over k the
// sequential ones, and the seed's example is one where the two differ.
TEST(Explain, Bf16DotPrintsTheCanonicalProductOfItsInputs) {
  const std::regex input(R"(\n +(\d+)  0x([0-9A-F]{4}) +\S+   0x([0-9A-F]{4}) )");
  const std::regex result(R"(\n  (canonical|sequential) +\S+ +bits 0x([0-9A-F]{8}) )");
  for (const char* seed : {"1", "7"}) {
    SCOPED_TRACE(std::string("seed ") + seed);
    const CommandResult r = run_reftrain(std::string("explain bf16_dot --seed ") + seed);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::vector<bf16> x, w;
    for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), input);
         it != std::sregex_iterator(); ++it) {
      EXPECT_EQ(std::stoi((*it)[1]), int(x.size()));
      x.push_back(bf16{uint16_t(std::stoul((*it)[2], nullptr, 16))});
      w.push_back(bf16{uint16_t(std::stoul((*it)[3], nullptr, 16))});
    }
    ASSERT_EQ(x.size(), 40u);
    std::map<std::string, uint32_t> printed;
    for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), result);
         it != std::sregex_iterator(); ++it) {
      printed[(*it)[1]] = uint32_t(std::stoul((*it)[2], nullptr, 16));
    }
    ASSERT_EQ(printed.size(), 2u) << r.output;
    const float canonical = dot_bf16_canonical(0.0f, x.data(), 1, w.data(), 1, 40);
    float sequential = 0.0f;
    for (size_t k = 0; k < x.size(); ++k) {
      sequential = std::fma(bf16_to_f32(x[k]), bf16_to_f32(w[k]), sequential);
    }
    uint32_t c, s;
    std::memcpy(&c, &canonical, sizeof c);
    std::memcpy(&s, &sequential, sizeof s);
    EXPECT_EQ(printed["canonical"], c);
    EXPECT_EQ(printed["sequential"], s);
    EXPECT_NE(c, s) << "the example should show two orders giving two results";
  }
}

// The two exercises of bf16_dot ask for the same sum in two orders: their answers differ, by a
// multiple of 2^-8 (what the sequential chain rounds away next to 2^18).
TEST(Explain, Bf16DotExercisesHaveTwoAnswers) {
  for (const char* seed : {"1", "2", "3", "7"}) {
    const std::string at = std::string("explain bf16_dot --seed ") + seed + " --answer ";
    const CommandResult one = run_reftrain(at + "1"), two = run_reftrain(at + "2");
    ASSERT_EQ(one.exit_code, 0) << one.output;
    ASSERT_EQ(two.exit_code, 0) << two.output;
    const double diff = std::abs(std::stod(one.output) - std::stod(two.output)) * 256;
    EXPECT_GE(diff, 1 - 1e-3) << seed;
    EXPECT_NEAR(diff, std::round(diff), 1e-3) << seed;
  }
}

TEST(Explain, ThePagesAndTheIndexExist) {
  for (const char* page :
       {"00_backprop.md", "01_embed.md", "02_norm.md", "03_linear.md", "04_rope.md",
        "05_attention.md", "06_swiglu.md", "07_loss.md", "08_cast.md", "09_backward_ffn.md",
        "10_attention_backward.md", "11_linear_backward.md", "12_optimizer.md", "13_tokenizer.md",
        "14_bf16.md"}) {
    EXPECT_TRUE(fs::exists(kDocs + "/" + page)) << page;
  }
  EXPECT_TRUE(fs::exists(std::string(REFTRAIN_SOURCE_DIR) + "/docs/README.md"));
}

TEST(Explain, UnknownKernelIsAUsageError) {
  const CommandResult r = run_reftrain("explain no_such_kernel");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown kernel 'no_such_kernel'"), std::string::npos) << r.output;
}

TEST(Explain, OutputFitsEightyColumns) {
  const CommandResult list = run_reftrain("explain --list");
  std::istringstream lines(list.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == ' ') continue;  // page lines
    const std::string name = line.substr(0, line.find(' '));
    const CommandResult r = run_reftrain("explain " + name + " --seed 1");
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.output;
    std::istringstream out(r.output);
    for (std::string l; std::getline(out, l);) EXPECT_LE(l.size(), 80u) << name << ": " << l;
  }
}

}  // namespace
}  // namespace reftrain::testing
