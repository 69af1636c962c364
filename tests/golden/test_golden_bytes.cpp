// The golden files are the contract with every GPU backend: their bytes may change only on
// purpose. This test writes the golden runs of tiny and llama-tiny × fp32/mixed/bf16 ×
// adamw/adamw8bit and × bf16-pure/adamw and bf16-kahan/adamw (50 steps, the default corpus) and the
// kernel fixtures of both families, and compares every file's SHA-256 with
// tests/golden/golden_bytes.sha256 (written by the build before the "every kernel has one home"
// restructuring; re-pinned since where docs/golden-format.md, "Stability", says why:
// shortest-decimal JSON numbers, the ISA-independent reference GELU, and config.json's
// "grad_accum"). build.json names the build and is not part of the contract. A change that moves
// these bytes must say why in its commit and in docs/golden-format.md, and regenerate the list:
// write the same directories as this test into an empty folder, then, inside it,
//   find . -type f ! -name build.json | sort | sed 's|^\./||' |
//     xargs sha256sum > tests/golden/golden_bytes.sha256
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "tests/common/golden_set.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::TempDir;

const std::string kHashes = REFTRAIN_SOURCE_DIR "/tests/golden/golden_bytes.sha256";

// The files the hash list names, relative to its directory.
std::set<std::string> listed_files() {
  std::istringstream in(testing::read_file(kHashes));
  std::set<std::string> files;
  std::string hash, name;
  while (in >> hash >> name) files.insert(name);
  return files;
}

std::set<std::string> written_files(const std::string& root) {
  std::set<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || e.path().filename() == "build.json") continue;
    files.insert(std::filesystem::relative(e.path(), root).string());
  }
  return files;
}

TEST(GoldenBytes, RunsAndFixturesMatchThePinnedHashes) {
  TempDir dir;
  const std::string root = dir.file("golden");
  for (const testing::PinnedRun& run : testing::pinned_golden_runs()) {
    const testing::CommandResult r =
        testing::run_reftrain(run.args() + " --out " + root + "/" + run.name());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  for (const char* arch : {"gpt2", "llama"}) {
    const testing::CommandResult r = testing::run_reftrain(
        std::string("golden kernels --arch ") + arch + " --out " + root + "/kernels-" + arch);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  EXPECT_EQ(written_files(root), listed_files());
  const testing::CommandResult check =
      testing::run_command("cd " + root + " && sha256sum --check --quiet " + kHashes);
  EXPECT_EQ(check.exit_code, 0) << "golden bytes moved:\n" << check.output;
}

}  // namespace
}  // namespace reftrain
