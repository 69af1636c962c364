// The dependency direction of the tree: apps -> core (golden -> train -> formats -> model ->
// tokenizer -> dist -> base) -> optim -> ops -> simd. Every project #include in a source file must
// name a header of its own folder or of a folder below it; an edge back up fails here, with the
// file and line. And simd/ is the only folder that knows the instruction set: no preprocessor
// conditional on an ISA macro, and no intrinsics header, anywhere above it.
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

// Every line of the .h and .cpp files under the folders above simd/ that matches `pattern`, as
// "path:line: text"; `files` counts the files read.
std::vector<std::string> lines_above_simd(const std::regex& pattern, int& files) {
  const fs::path root = REFTRAIN_SOURCE_DIR;
  std::vector<std::string> found;
  files = 0;
  for (const char* top : {"ops", "optim", "core", "apps"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
      const std::string rel = fs::relative(e.path(), root).string();
      ++files;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        if (std::regex_search(line, pattern))
          found.push_back(rel + ":" + std::to_string(n) + ": " + line);
      }
    }
  }
  return found;
}

// The macros that name an instruction set or an architecture: x86's feature macros (__AVX512F__,
// __SSE4_2__, __F16C__, __FMA__, __BMI2__, ...), ARM's (__ARM_NEON, __ARM_FEATURE_FMA, ...) and
// the architectures themselves.
const char* const kIsaMacro =
    R"((__AVX\w*|__SSE\w*|__F16C__|__FMA\w*|__BMI\w*|__POPCNT__|__LZCNT__|__MMX__|__ARM_NEON\w*|)"
    R"(__ARM_FEATURE\w*|__aarch64__|__arm__|__arm64__|__x86_64__|__amd64__|__i386__|_M_X64|_M_AMD64|)"
    R"(_M_IX86|_M_ARM64|_M_ARM))";

// A preprocessor conditional (#if, #ifdef, #ifndef, #elif, ...) that names one of them.
std::regex isa_conditional() {
  return std::regex(std::string(R"(^\s*#\s*(if|ifdef|ifndef|elif|elifdef|elifndef)\b.*\b)") +
                    kIsaMacro + R"(\b)");
}

// A kernel that needs another ISA's instructions gets a simd/ primitive (simd/f16.h, simd/bytes.h,
// the per-ISA files of simd/microkernel.h) instead of an #if of its own, so that what each ISA
// does is in one place and every kernel above simd/ is the same code on every ISA.
TEST(Layering, IsaConditionalsOnlyInSimd) {
  const std::regex conditional = isa_conditional();
  int files = 0;
  for (const std::string& hit : lines_above_simd(conditional, files)) ADD_FAILURE() << hit;
  EXPECT_GT(files, 100);
}

TEST(Layering, IntrinsicsHeadersOnlyInSimd) {
  const std::regex include(
      R"(^\s*#\s*include\s*<(\w*intrin\.h|arm_neon\.h|arm_fp16\.h|arm_sve\.h|arm_acle\.h)>)");
  int files = 0;
  for (const std::string& hit : lines_above_simd(include, files)) ADD_FAILURE() << hit;
  EXPECT_GT(files, 100);
}

// The pattern itself: the spellings of an ISA conditional it must catch, and lines it must not.
TEST(Layering, IsaConditionalPatternCatchesEverySpelling) {
  const std::regex conditional = isa_conditional();
  for (const char* line :
       {"#if defined(__AVX512F__)", "#ifdef __F16C__", "  #  elif defined(__aarch64__)",
        "#if defined(__AVX__) && defined(__FMA__)", "#ifndef __ARM_NEON", "#elif __x86_64__",
        "#if defined(__SSE4_2__)"}) {
    EXPECT_TRUE(std::regex_search(std::string(line), conditional)) << line;
  }
  for (const char* line : {"#if defined(__BYTE_ORDER__)", "#ifdef __clang__", "// #if __AVX__",
                           "#endif  // __AVX512F__", "#pragma once"}) {
    EXPECT_FALSE(std::regex_search(std::string(line), conditional)) << line;
  }
}

}  // namespace
