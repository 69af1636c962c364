// The study pages read as a course: docs/README.md names the first page (the map), every page
// ends with a "Next:" link to an existing page, following those links from the first page visits
// every page once and returns to the README, no link of the documentation leaves the repository,
// every page opens with an intuition and every kernel page ends with exercises, the glossary's
// terms are linked where the course first uses them, and the notation holds: every symbol a page
// lists is in the README's notation table, no symbol has two rows there, and no page defines a
// symbol of the table that its "Symbols:" line does not list (a second meaning).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kRepo = fs::path(REFTRAIN_SOURCE_DIR);
const fs::path kReadme = kRepo / "docs" / "README.md";

// The relative targets of the markdown links `[text](target)` of `text`, without #anchors;
// web addresses (scheme://) and same-page anchors are left out.
std::vector<std::string> relative_links(const std::string& text) {
  static const std::regex link(R"(\]\(([^)\s]+)\))");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator();
       ++it) {
    std::string target = (*it)[1];
    if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
    target = target.substr(0, target.find('#'));
    if (!target.empty()) out.push_back(target);
  }
  return out;
}

// The page a "Next: [..](target)" line of `page` points to; empty when its last non-empty line
// is not one.
fs::path next_of(const fs::path& page) {
  const std::string text = read_file(page.string());
  const size_t end = text.find_last_not_of('\n');
  const size_t begin = text.rfind('\n', end);
  const std::string last = text.substr(begin == std::string::npos ? 0 : begin + 1);
  if (last.rfind("Next: [", 0) != 0) return {};
  const std::vector<std::string> links = relative_links(last);
  if (links.empty()) return {};
  return fs::weakly_canonical(page.parent_path() / links[0]);
}

// The course's pages: every study page, and the chapters the README's reading order names.
std::set<fs::path> course_pages() {
  std::set<fs::path> pages;
  for (const auto& e : fs::directory_iterator(kRepo / "docs" / "kernels")) {
    if (e.path().extension() == ".md") pages.insert(fs::weakly_canonical(e.path()));
  }
  for (const char* chapter : {"training.md", "map.md"}) {
    if (fs::exists(kRepo / "docs" / chapter)) {
      pages.insert(fs::weakly_canonical(kRepo / "docs" / chapter));
    }
  }
  return pages;
}

// The README's "Read in this order: [first](...)" line names the first page.
fs::path first_page() {
  const std::string text = read_file(kReadme.string());
  const size_t at = text.find("Read in this order: [");
  if (at == std::string::npos) return {};
  const std::vector<std::string> links = relative_links(text.substr(at, text.find('\n', at) - at));
  return links.empty() ? fs::path() : fs::weakly_canonical(kReadme.parent_path() / links[0]);
}

TEST(Course, EveryPageEndsWithANextLinkThatResolves) {
  for (const fs::path& page : course_pages()) {
    const fs::path next = next_of(page);
    EXPECT_FALSE(next.empty()) << page << " does not end with a \"Next: [..](..)\" line";
    if (!next.empty()) {
      EXPECT_TRUE(fs::is_regular_file(next)) << page << " -> " << next;
    }
  }
}

TEST(Course, TheNextLinksWalkEveryPageOnceFromTheReadme) {
  const fs::path first = first_page();
  ASSERT_FALSE(first.empty()) << "docs/README.md has no \"Read in this order: [..](..)\" line";
  EXPECT_EQ(first.filename(), "map.md");
  const std::set<fs::path> pages = course_pages();
  std::set<fs::path> seen;
  fs::path at = first;
  while (at != fs::weakly_canonical(kReadme)) {
    ASSERT_TRUE(pages.count(at)) << at << " is not a course page";
    ASSERT_TRUE(seen.insert(at).second) << at << " is reached twice";
    at = next_of(at);
    ASSERT_FALSE(at.empty());
  }
  EXPECT_EQ(seen, pages) << "the chain ends at the README before visiting every page";
}

TEST(Course, NoLinkLeavesTheRepository) {
  const std::string root = fs::weakly_canonical(kRepo).string() + "/";
  std::vector<fs::path> docs = {kRepo / "ops" / "KERNELS.md"};
  for (const auto& e : fs::recursive_directory_iterator(kRepo / "docs")) {
    if (e.path().extension() == ".md") docs.push_back(e.path());
  }
  ASSERT_GT(docs.size(), 20u);
  for (const fs::path& doc : docs) {
    for (const std::string& link : relative_links(read_file(doc.string()))) {
      const fs::path target = fs::weakly_canonical(doc.parent_path() / link);
      EXPECT_EQ(target.string().rfind(root, 0), 0u) << doc << ": " << link << " leaves the repo";
      EXPECT_TRUE(fs::exists(target)) << doc << ": " << link << " does not exist";
    }
  }
}

// The symbols of a notation table (the README's "## Notation" section, or `text` itself when it
// has none): the first cell of each row, split at ", ", each with the rows it appears in.
std::map<std::string, int> notation_rows(const std::string& text) {
  size_t begin = text.find("\n## Notation\n");
  size_t end = text.size();
  if (begin == std::string::npos) {
    begin = 0;
  } else {
    end = text.find("\n## ", begin + 1);
  }
  std::istringstream rows(text.substr(begin, end - begin));
  std::map<std::string, int> symbols;
  for (std::string row; std::getline(rows, row);) {
    if (row.rfind("| ", 0) != 0 || row.rfind("| symbol", 0) == 0) continue;
    std::istringstream cell(row.substr(2, row.find(" |", 2) - 2));
    for (std::string sym; std::getline(cell, sym, ',');) ++symbols[sym.substr(sym[0] == ' ')];
  }
  return symbols;
}

std::set<std::string> notation() {
  std::set<std::string> symbols;
  for (const auto& [sym, rows] : notation_rows(read_file(kReadme.string()))) symbols.insert(sym);
  return symbols;
}

// The symbols a page's "Symbols:" line lists.
std::set<std::string> listed_symbols(const std::string& page) {
  static const std::regex word("`([^`]+)`");
  std::set<std::string> out;
  const size_t at = page.find("\nSymbols: ");
  if (at == std::string::npos) return out;
  const std::string line = page.substr(at + 1, page.find('\n', at + 1) - at - 1);
  for (auto it = std::sregex_iterator(line.begin(), line.end(), word); it != std::sregex_iterator();
       ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

// The definitions `X = ...` of a page's derivations: in every indented (4-space) line outside
// the fenced code and outputs, a name at the line's start, after a label ("gpt2:"), or after a
// gap of two or more spaces, followed by " =". Subscripts, indices and primes are cut off, so
// "mx_t =", "mx[r] =" and "mx' =" all define mx. Each is returned with its line.
std::vector<std::pair<std::string, std::string>> definitions(const std::string& page) {
  static const std::regex def(
      R"((?:^ {4}| {2,}|: +)([^\s=,;()\[_']+)(?:\[[^\]]*\]|_\{?\w+\}?|')*\s+=(?!=))");
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream lines(page);
  bool fenced = false;
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced || l.rfind("    ", 0) != 0) continue;
    for (auto it = std::sregex_iterator(l.begin(), l.end(), def); it != std::sregex_iterator();
         ++it) {
      out.push_back({(*it)[1], l});
    }
  }
  return out;
}

TEST(Course, EveryPagesSymbolsAreInTheNotationTable) {
  const std::set<std::string> table = notation();
  ASSERT_GT(table.size(), 30u);
  for (const auto& e : fs::directory_iterator(kRepo / "docs" / "kernels")) {
    const std::string text = read_file(e.path().string());
    ASSERT_NE(text.find("\nSymbols: "), std::string::npos)
        << e.path() << " has no \"Symbols:\" line";
    for (const std::string& sym : listed_symbols(text)) {
      EXPECT_TRUE(table.count(sym))
          << e.path().filename() << ": " << sym << " is not in docs/README.md's notation table";
    }
  }
}

// A symbol in two rows of the table is a symbol with two meanings.
TEST(Course, NoSymbolHasTwoRowsInTheNotationTable) {
  for (const auto& [sym, rows] : notation_rows(read_file(kReadme.string()))) {
    EXPECT_EQ(rows, 1) << sym << " has " << rows << " rows in docs/README.md's notation table";
  }
  EXPECT_EQ(notation_rows("| symbol | meaning |\n| m, v | moments |\n| s, m | softmax |\n")["m"],
            2);
}

// A page that defines a symbol of the table without listing it gives the symbol a meaning of its
// own: the symbol now has two. (A page that lists it claims the table's meaning.)
TEST(Course, NoPageDefinesATableSymbolItDoesNotList) {
  const std::set<std::string> table = notation();
  int checked = 0;
  for (const auto& e : fs::directory_iterator(kRepo / "docs" / "kernels")) {
    const std::string text = read_file(e.path().string());
    const std::set<std::string> listed = listed_symbols(text);
    for (const auto& [sym, line] : definitions(text)) {
      ++checked;
      if (!table.count(sym)) continue;
      EXPECT_TRUE(listed.count(sym))
          << e.path().filename() << " defines " << sym << ", which its \"Symbols:\" line does not "
          << "list (the table gives it another meaning): " << line;
    }
  }
  EXPECT_GT(checked, 50);
}

TEST(Course, DefinitionsAreFoundInDerivationsOnly) {
  const std::string page =
      "# page\nSymbols: `s`\n\n    mx    = max_j x_j\n    ℓ     = Σ_j exp(x_j − mx)\n"
      "    gpt2:   h = x W        act = gelu(h)\n    mx[r] = −∞,  ℓ[r] = 0\n"
      "prose s = 1 is not a derivation\n```cpp\n    s = 2;\n```\n    a == b\n";
  std::vector<std::string> found;
  for (const auto& [sym, line] : definitions(page)) found.push_back(sym);
  EXPECT_EQ(found, (std::vector<std::string>{"mx", "ℓ", "h", "act", "mx", "ℓ"}));
  EXPECT_EQ(listed_symbols(page), (std::set<std::string>{"s"}));
}

// Every course page opens with its intuition ("**Intuition.**" before its first section), and
// every kernel page ends with 2-4 exercises, at least one of them checked by the program (shown
// with its `reftrain explain NAME --exercise N` marker; tests/cli/test_explain.cpp checks the
// output and the answers).
TEST(Course, EveryPageOpensWithAnIntuition) {
  for (const fs::path& page : course_pages()) {
    const std::string text = read_file(page.string());
    const size_t intuition = text.find("\n**Intuition.** ");
    EXPECT_NE(intuition, std::string::npos) << page.filename() << " has no intuition";
    EXPECT_LT(intuition, text.find("\n## ")) << page.filename() << ": the intuition comes first";
  }
}

TEST(Course, EveryKernelPageEndsWithExercisesTheProgramChecks) {
  static const std::regex numbered(R"(\n(\d)\. )");
  static const std::regex checked(R"(<!-- reftrain explain [a-z0-9_]+ --exercise \d+ -->)");
  for (const auto& e : fs::directory_iterator(kRepo / "docs" / "kernels")) {
    const std::string text = read_file(e.path().string());
    const size_t at = text.find("\n## Exercises\n");
    ASSERT_NE(at, std::string::npos) << e.path().filename() << " has no \"## Exercises\"";
    const std::string section = text.substr(at, text.find("\n## ", at + 1) - at);
    int count = 0;
    for (auto it = std::sregex_iterator(section.begin(), section.end(), numbered);
         it != std::sregex_iterator(); ++it) {
      ++count;
    }
    EXPECT_GE(count, 2) << e.path().filename();
    EXPECT_LE(count, 4) << e.path().filename();
    EXPECT_TRUE(std::regex_search(section, checked))
        << e.path().filename() << ": no exercise the program checks";
  }
}

// A student reads a page's math in one sitting: the GPU bindings, the fast versions and their
// benchmarks sit in "## For the engineer: ..." sections after the math path (what it is, the
// derivations, the reference code, the worked example).
TEST(Course, TheEngineersSectionsComeAfterTheMathPath) {
  static const std::regex heading(R"(\n## ([^\n]+))");
  for (const auto& e : fs::directory_iterator(kRepo / "docs" / "kernels")) {
    const std::string text = read_file(e.path().string());
    bool engineer = false;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), heading);
         it != std::sregex_iterator(); ++it) {
      const std::string h = (*it)[1];
      const bool marked = h.rfind("For the engineer: ", 0) == 0;
      if (h.find("GPU twin") != std::string::npos || h.find("fast version") != std::string::npos) {
        EXPECT_TRUE(marked) << e.path().filename() << ": \"" << h << "\" is not marked";
      }
      if (marked) engineer = true;
      if (engineer && !marked) {
        EXPECT_TRUE(h == "Checklist" || h == "Exercises")
            << e.path().filename() << ": \"" << h << "\" comes after the engineer's sections";
      }
    }
  }
}

// The glossary's terms (README, "<a id="g-TERM">**term**") are linked (README.md#g-TERM) from the
// first page of the reading order that uses them.
TEST(Course, GlossaryTermsAreLinkedWhereFirstUsed) {
  const std::string readme = read_file(kReadme.string());
  static const std::regex entry(R"re(<a id="(g-[a-z-]+)"></a>\*\*([^*]+)\*\*)re");
  std::vector<fs::path> order;
  for (fs::path at = first_page(); !at.empty() && at != fs::weakly_canonical(kReadme);
       at = next_of(at)) {
    order.push_back(at);
    if (order.size() > 40) break;
  }
  int terms = 0;
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), entry);
       it != std::sregex_iterator(); ++it, ++terms) {
    const std::string anchor = (*it)[1], term = (*it)[2];
    const std::regex use("\\b" + term + "\\b", std::regex::icase);
    for (const fs::path& page : order) {
      const std::string text = read_file(page.string());
      if (!std::regex_search(text, use)) continue;
      EXPECT_NE(text.find("README.md#" + anchor + ")"), std::string::npos)
          << page.filename() << " is the first page to use \"" << term
          << "\" and does not link it to the glossary (README.md#" << anchor << ")";
      break;
    }
  }
  EXPECT_GE(terms, 9);
}

TEST(Course, LinksAreFoundAndWebAddressesLeftOut) {
  const std::vector<std::string> links =
      relative_links("see [a](a.md#x), [b](https://example.org/b) and [c](../c/d.md) [e](#f)");
  EXPECT_EQ(links, (std::vector<std::string>{"a.md", "../c/d.md"}));
}

}  // namespace
}  // namespace reftrain::testing
