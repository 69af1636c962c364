// The study pages read as a course: docs/README.md names the first page, every page ends with a
// "Next:" link to an existing page, following those links from the first page visits every page
// once and returns to the README, no link of the documentation leaves the repository, and every
// symbol a page lists is in the README's notation table.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = fs::path(REFTRAIN_SOURCE_DIR);
const fs::path kReadme = kRoot / "docs" / "README.md";

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
  for (const auto& e : fs::directory_iterator(kRoot / "docs" / "kernels")) {
    if (e.path().extension() == ".md") pages.insert(fs::weakly_canonical(e.path()));
  }
  if (fs::exists(kRoot / "docs" / "training.md")) {
    pages.insert(fs::weakly_canonical(kRoot / "docs" / "training.md"));
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
  EXPECT_EQ(first.filename(), "00_backprop.md");
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
  const std::string root = fs::weakly_canonical(kRoot).string() + "/";
  std::vector<fs::path> docs = {kRoot / "ops" / "KERNELS.md"};
  for (const auto& e : fs::recursive_directory_iterator(kRoot / "docs")) {
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

// The symbols of the README's notation table: the first cell of each row, split at ", ".
std::set<std::string> notation() {
  const std::string text = read_file(kReadme.string());
  const size_t begin = text.find("\n## Notation\n");
  const size_t end = text.find("\n## ", begin + 1);
  std::istringstream rows(text.substr(begin, end - begin));
  std::set<std::string> symbols;
  for (std::string row; std::getline(rows, row);) {
    if (row.rfind("| ", 0) != 0 || row.rfind("| symbol", 0) == 0) continue;
    std::istringstream cell(row.substr(2, row.find(" |", 2) - 2));
    for (std::string sym; std::getline(cell, sym, ',');) symbols.insert(sym.substr(sym[0] == ' '));
  }
  return symbols;
}

TEST(Course, EveryPagesSymbolsAreInTheNotationTable) {
  const std::set<std::string> table = notation();
  ASSERT_GT(table.size(), 30u);
  static const std::regex word("`([^`]+)`");
  for (const auto& e : fs::directory_iterator(kRoot / "docs" / "kernels")) {
    const std::string text = read_file(e.path().string());
    const size_t at = text.find("\nSymbols: ");
    ASSERT_NE(at, std::string::npos) << e.path() << " has no \"Symbols:\" line";
    const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    for (auto it = std::sregex_iterator(line.begin(), line.end(), word);
         it != std::sregex_iterator(); ++it) {
      EXPECT_TRUE(table.count((*it)[1])) << e.path().filename() << ": " << (*it)[1]
                                         << " is not in docs/README.md's notation table";
    }
  }
}

TEST(Course, LinksAreFoundAndWebAddressesLeftOut) {
  const std::vector<std::string> links =
      relative_links("see [a](a.md#x), [b](https://example.org/b) and [c](../c/d.md) [e](#f)");
  EXPECT_EQ(links, (std::vector<std::string>{"a.md", "../c/d.md"}));
}

}  // namespace
}  // namespace reftrain::testing
