// ops/KERNELS.md gives every kernel one row: reference, fast version, variants, GPU twin, study
// page, explainer, golden fixture, tests, benchmark. It is generated from the kernel records
// (`reftrain kernels --markdown`), as tests/webgpu/kernels.json is (`--json`): both committed
// files must equal the command's output. These tests then hold the records to the code: every
// file the table names exists, every function it names is declared in a file of its cell, every
// WGSL entry point of ours it names is a @compute function of its file, every explainer and
// fixture it names exists, and every explainer (`reftrain explain --list`) and every fixture
// (`reftrain golden kernels`) has a row.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

const std::string kSourceDir = REFTRAIN_SOURCE_DIR;

// The table's columns, in order.
enum Column {
  kKey,
  kReference,
  kFast,
  kVariants,
  kTwin,
  kPage,
  kExplain,
  kFixtures,
  kTests,
  kBench,
  kCount
};

struct Row {
  std::string key;
  std::vector<std::vector<std::string>> cells;  // the backticked names of each column
};

// The backticked words of one cell.
std::vector<std::string> quoted(const std::string& cell) {
  static const std::regex word("`([^`]+)`");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(cell.begin(), cell.end(), word); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

// Every row whose first cell is a backticked key, split on the column bars.
std::vector<Row> table() {
  std::istringstream lines(read_file(kSourceDir + "/ops/KERNELS.md"));
  std::vector<Row> rows;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream parts(line.substr(1));
    for (std::string cell; std::getline(parts, cell, '|');) cells.push_back(cell);
    EXPECT_EQ(cells.size(), size_t(kCount)) << line;
    if (cells.size() != size_t(kCount)) continue;
    Row r;
    for (const std::string& c : cells) r.cells.push_back(quoted(c));
    EXPECT_EQ(r.cells[kKey].size(), 1u) << line;
    r.key = r.cells[kKey].empty() ? "" : r.cells[kKey][0];
    rows.push_back(r);
  }
  return rows;
}

bool is_path(const std::string& word) {
  return word.find('/') != std::string::npos;
}

// The names of one column over all rows, each with its row's key.
std::map<std::string, std::string> column(const std::vector<Row>& rows, Column c) {
  std::map<std::string, std::string> names;
  for (const Row& r : rows) {
    for (const std::string& w : r.cells[c]) names[w] = r.key;
  }
  return names;
}

// `reftrain explain --list`: two lines a kernel, the name first.
std::set<std::string> explainers() {
  const CommandResult list = run_reftrain("explain --list");
  EXPECT_EQ(list.exit_code, 0) << list.output;
  std::set<std::string> names;
  std::istringstream lines(list.output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] != ' ') names.insert(line.substr(0, line.find(' ')));
  }
  return names;
}

TEST(KernelsTable, IsGeneratedFromTheRecords) {
  const CommandResult md = run_reftrain("kernels --markdown");
  ASSERT_EQ(md.exit_code, 0) << md.output;
  EXPECT_TRUE(md.output == read_file(kSourceDir + "/ops/KERNELS.md"))
      << "ops/KERNELS.md differs from `reftrain kernels --markdown`: regenerate it";
  const CommandResult js = run_reftrain("kernels --json");
  ASSERT_EQ(js.exit_code, 0) << js.output;
  EXPECT_TRUE(js.output == read_file(kSourceDir + "/tests/webgpu/kernels.json"))
      << "tests/webgpu/kernels.json differs from `reftrain kernels --json`: regenerate it";
  EXPECT_NE(run_reftrain("kernels --json --markdown").exit_code, 0);
}

TEST(KernelsTable, HasTheKernelsOnce) {
  const std::vector<Row> rows = table();
  EXPECT_GE(rows.size(), 17u);
  std::set<std::string> keys;
  for (const Row& r : rows) EXPECT_TRUE(keys.insert(r.key).second) << "two rows for " << r.key;
}

TEST(KernelsTable, EveryNamedFileExists) {
  for (const Row& r : table()) {
    for (int c = kReference; c < kCount; ++c) {
      for (const std::string& w : r.cells[size_t(c)]) {
        if (!is_path(w)) continue;
        EXPECT_TRUE(fs::exists(kSourceDir + "/" + w)) << r.key << ": " << w;
      }
    }
  }
}

TEST(KernelsTable, EveryFunctionIsDeclaredInAFileOfItsCell) {
  for (const Row& r : table()) {
    for (Column c : {kReference, kFast}) {
      std::string sources;
      for (const std::string& w : r.cells[c]) {
        if (is_path(w)) sources += read_file(kSourceDir + "/" + w);
      }
      for (const std::string& w : r.cells[c]) {
        if (is_path(w)) continue;
        const std::regex declared("\\b" + w + "\\s*[(<]");
        EXPECT_TRUE(std::regex_search(sources, declared))
            << r.key << ": " << w << " is not declared in the files of its cell";
      }
    }
  }
}

// Whether `source` declares `entry` as a compute entry point: `fn entry(` right after an
// attribute list that holds @compute (in either order with @workgroup_size).
bool declares_compute_entry(const std::string& source, const std::string& entry) {
  const std::regex fn("((?:@\\w+(?:\\([^)]*\\))?\\s*)+)fn\\s+" + entry + "\\s*\\(");
  for (auto it = std::sregex_iterator(source.begin(), source.end(), fn);
       it != std::sregex_iterator(); ++it) {
    if ((*it)[1].str().find("@compute") != std::string::npos) return true;
  }
  return false;
}

// Whether `file`'s text declares `entry`: as written, or through its `//#template` section,
// which tests/webgpu/source.mjs writes once per item of the registry's template list; its
// `@compute fn {{ENTRY}}(` then declares every product registry.mjs lists as `NAME: { prefix:`
// (the linear forms).
bool declares_entry(const std::string& source, const std::string& entry) {
  if (declares_compute_entry(source, entry)) return true;
  const size_t begin = source.find("//#template"), end = source.find("//#end");
  if (begin == std::string::npos || end == std::string::npos) return false;
  const std::string section = source.substr(begin, end - begin);
  if (!declares_compute_entry(section, "\\{\\{ENTRY\\}\\}")) return false;
  const std::string registry = read_file(kSourceDir + "/tests/webgpu/registry.mjs");
  return registry.find("  " + entry + ": { prefix:") != std::string::npos;
}

// The GPU twin cell: the mirrored kernel's file and entry points (a bare file name), then ours,
// a .wgsl path under tests/webgpu/ and the entry points that follow it up to the next file.
TEST(KernelsTable, EveryRowsWgslTwinExistsAndDeclaresItsEntryPoints) {
  for (const Row& r : table()) {
    std::string file, source;
    size_t ours = 0;
    for (const std::string& w : r.cells[kTwin]) {
      if (w.size() > 5 && w.compare(w.size() - 5, 5, ".wgsl") == 0) {
        file = is_path(w) ? w : "";
        if (file.empty()) continue;
        EXPECT_EQ(file.rfind("tests/webgpu/", 0), 0u) << r.key << ": " << file;
        EXPECT_TRUE(fs::is_regular_file(kSourceDir + "/" + file)) << r.key << ": no file " << file;
        source =
            fs::is_regular_file(kSourceDir + "/" + file) ? read_file(kSourceDir + "/" + file) : "";
      } else if (!file.empty()) {
        EXPECT_TRUE(declares_entry(source, w))
            << r.key << ": " << file << " declares no @compute fn " << w << "(";
        ++ours;
      }
    }
    // A kernel with a fixture has a twin of ours that the harness runs on it.
    if (!r.cells[kFixtures].empty()) {
      EXPECT_GT(ours, 0u) << r.key << ": the GPU twin column names no entry point of ours";
    }
  }
}

TEST(KernelsTable, ComputeEntryPointsAreFoundOnlyWhereDeclared) {
  const std::string wgsl =
      "@compute @workgroup_size(64)\nfn ours(@builtin(global_invocation_id) g: vec3<u32>) {}\n"
      "@workgroup_size(16, 16) @compute fn also_ours() {}\nfn helper(x: u32) -> u32 { return x; "
      "}\n";
  EXPECT_TRUE(declares_compute_entry(wgsl, "ours"));
  EXPECT_TRUE(declares_compute_entry(wgsl, "also_ours"));
  EXPECT_FALSE(declares_compute_entry(wgsl, "helper"));
  EXPECT_FALSE(declares_compute_entry(wgsl, "our"));
  EXPECT_FALSE(declares_compute_entry(wgsl, "missing"));
  const std::string templated =
      "//#template\n@compute @workgroup_size(16)\nfn {{ENTRY}}() {}\n//#end\n";
  EXPECT_TRUE(declares_entry(templated, "linear_forward"));
  EXPECT_FALSE(declares_entry(templated, "layernorm_forward"));  // no product of the template
  EXPECT_FALSE(declares_entry("fn {{ENTRY}}() {}\n", "linear_forward"));  // no section
}

// The explainers of the section "Explainers that walk no kernel": one `- \`name\`` item each.
std::set<std::string> kernelless_explainers() {
  const std::string text = read_file(kSourceDir + "/ops/KERNELS.md");
  const size_t begin = text.find("\n## Explainers that walk no kernel\n");
  std::set<std::string> names;
  if (begin == std::string::npos) return names;
  const size_t end = text.find("\n## ", begin + 1);
  const std::string section = text.substr(begin, end == std::string::npos ? end : end - begin);
  static const std::regex item("\n- `([a-z0-9_]+)`");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), item);
       it != std::sregex_iterator(); ++it) {
    names.insert((*it)[1]);
  }
  return names;
}

TEST(KernelsTable, EveryExplainerHasARowAndEveryRowsExplainerRuns) {
  const std::set<std::string> listed = explainers();
  ASSERT_FALSE(listed.empty());
  const std::map<std::string, std::string> named = column(table(), kExplain);
  const std::set<std::string> kernelless = kernelless_explainers();
  for (const std::string& e : listed) {
    EXPECT_TRUE(named.count(e) || kernelless.count(e))
        << "`reftrain explain " << e << "` has no row";
  }
  for (const std::string& e : kernelless) {
    EXPECT_TRUE(listed.count(e)) << "the section of explainers without a kernel names " << e;
    EXPECT_FALSE(named.count(e)) << e << " has a row and is listed as walking no kernel";
  }
  for (const auto& [e, key] : named) {
    EXPECT_TRUE(listed.count(e)) << key << ": no explainer " << e;
  }
  // A kernel with an explainer is explained under its own key.
  for (const Row& r : table()) {
    if (!r.cells[kExplain].empty() && r.cells[kExplain][0] != r.key) {
      EXPECT_FALSE(listed.count(r.key)) << r.key << ": list `" << r.key << "` first";
    }
  }
}

TEST(KernelsTable, EveryFixtureHasARowWithItsTwin) {
  TempDir dir;
  const CommandResult r = run_reftrain("golden kernels --out " + dir.file("k"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json manifest = nlohmann::json::parse(read_file(dir.file("k/manifest.json")));
  const std::vector<Row> rows = table();
  std::map<std::string, const Row*> row_of;
  for (const Row& row : rows) {
    for (const std::string& f : row.cells[kFixtures]) row_of[f] = &row;
  }
  std::set<std::string> fixtures;
  for (const nlohmann::json& k : manifest.at("kernels")) {
    const std::string name = k.at("name");
    fixtures.insert(name);
    ASSERT_TRUE(row_of.count(name)) << "fixture " << name << " has no row";
    const std::vector<std::string>& twin = row_of[name]->cells[kTwin];
    for (const char* part : {"file", "entry"}) {
      const std::string want = k.at("twin").at(part);
      if (want.empty()) continue;  // no GPU study mirrors it (gelu_erf)
      EXPECT_NE(std::find(twin.begin(), twin.end(), want), twin.end())
          << row_of[name]->key << ": the twin of " << name << " is " << want;
    }
  }
  for (const auto& [f, row] : row_of)
    EXPECT_TRUE(fixtures.count(f)) << row->key << ": no fixture " << f;
}

}  // namespace
}  // namespace reftrain::testing
