// The dependency direction of the tree: apps -> core (golden -> train -> formats -> model ->
// tokenizer -> dist -> base) -> optim -> ops -> simd. Every project #include in a source file must
// name a header of its own folder or of a folder below it; an edge back up fails here, with the
// file and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// The folders from the bottom up; a folder may include from itself and any folder before it.
const std::vector<std::string> kLayers = {
    "simd",       "ops",          "optim",      "core/base",   "core/dist", "core/tokenizer",
    "core/model", "core/formats", "core/train", "core/golden", "apps"};

// The layer of a path relative to the repository root, or -1 when it is in none (tests, bench,
// fuzz, system headers).
int layer_of(const std::string& path) {
  int found = -1;
  for (size_t i = 0; i < kLayers.size(); ++i) {
    if (path.rfind(kLayers[i] + "/", 0) == 0) found = int(i);
  }
  return found;
}

TEST(Layering, EveryIncludePointsDown) {
  const fs::path root = REFTRAIN_SOURCE_DIR;
  const std::regex include(R"re(^\s*#\s*include\s+"([^"]+)")re");
  int files = 0, edges = 0;
  for (const char* top : {"simd", "ops", "optim", "core", "apps"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
      const std::string rel = fs::relative(e.path(), root).string();
      const int from = layer_of(rel);
      ASSERT_GE(from, 0) << rel << " is in no layer";
      ++files;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const int to = layer_of(m[1]);
        if (to < 0) continue;  // "tests/..." never appears here; other quoted headers are local
        ++edges;
        EXPECT_LE(to, from) << rel << ":" << n << " includes " << m[1] << ", a layer above";
      }
    }
  }
  EXPECT_GT(files, 100);
  EXPECT_GT(edges, 200);
}

// xsimd is included in one place, simd/simd.h, which fixes what xsimd 8 gets wrong (a fused
// multiply-add on AVX-512, IEEE division and square root on NEON) before any kernel instantiates
// it: a file that included <xsimd/...> itself could use the unfixed operations.
TEST(Layering, OnlySimdHeaderIncludesXsimd) {
  const fs::path root = REFTRAIN_SOURCE_DIR;
  const std::regex include(R"re(^\s*#\s*include\s+<xsimd/)re");
  int files = 0;
  for (const char* top : {"simd", "ops", "optim", "core", "apps", "tests", "bench", "fuzz"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
      const std::string rel = fs::relative(e.path(), root).string();
      ++files;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        if (rel != "simd/simd.h") {
          EXPECT_FALSE(std::regex_search(line, include)) << rel << ":" << n << ": " << line;
        }
      }
    }
  }
  EXPECT_GT(files, 150);
}

}  // namespace
