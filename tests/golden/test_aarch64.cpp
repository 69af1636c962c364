// The same bytes on ARM: this source tree cross-built for aarch64 (Debian's g++-aarch64-linux-gnu,
// cmake/toolchains/aarch64-linux-gnu.cmake) and run under qemu's user-mode emulator must
//  1. pass the kernel tests: all of reftrain_kernel_tests (every fast kernel against its scalar
//     reference, bits across thread counts and tails, simd/ and its IEEE arithmetic), through
//     the nested tree's CTest, which runs each test binary under the toolchain's emulator;
//  2. write the golden files byte for byte as the native x86 build does: the golden runs of tiny
//     and llama-tiny × fp32/mixed/bf16 × adamw/adamw8bit and × bf16-pure and bf16-kahan with
//     adamw, and the kernel fixtures of both families
//     (the set tests/golden/golden_bytes.sha256 pins, so they must match those hashes too).
// Label `aarch64` (ctest -L aarch64). The nested tree lives in build/nested-aarch64 and is built
// once (about 5 minutes on 2 cores), incrementally after that. Timing under emulation means
// nothing, and nothing here measures it.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "tests/common/golden_set.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::CommandResult;
using testing::run_command;

const std::string kTree = REFTRAIN_BINARY_DIR "/nested-aarch64";

// Configures and builds the aarch64 tree (reftrain and the kernel tests); false on failure.
bool build_aarch64_tree() {
  const std::string cmake = REFTRAIN_CMAKE;
  const std::string configure = cmake + " -S " REFTRAIN_SOURCE_DIR " -B " + kTree +
                                " -G \"" REFTRAIN_GENERATOR
                                "\" -DCMAKE_TOOLCHAIN_FILE=" REFTRAIN_SOURCE_DIR
                                "/cmake/toolchains/aarch64-linux-gnu.cmake"
                                " -DCMAKE_BUILD_TYPE=" REFTRAIN_BUILD_TYPE
                                " -DREFTRAIN_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=ON";
  const CommandResult c = run_command(configure);
  EXPECT_EQ(c.exit_code, 0) << configure << "\n" << c.output;
  if (c.exit_code != 0) return false;
  const std::string build =
      cmake + " --build " + kTree + " --target reftrain reftrain_kernel_tests -j2";
  const CommandResult b = run_command(build);
  EXPECT_EQ(b.exit_code, 0) << build << "\n" << b.output;
  return b.exit_code == 0;
}

// The emulator command the toolchain file set (tests/CMakeLists.txt writes it down).
std::string emulator() {
  std::string command = testing::read_file(kTree + "/crosscompiling_emulator.txt");
  while (!command.empty() && command.back() == '\n') command.pop_back();
  return command;
}

// The golden runs and kernel fixtures that tests/golden/golden_bytes.sha256 pins, under root.
void write_golden_files(const std::string& reftrain, const std::string& root) {
  for (const testing::PinnedRun& run : testing::pinned_golden_runs()) {
    const std::string cmd = reftrain + " " + run.args() + " --out " + root + "/" + run.name();
    const CommandResult r = run_command(cmd);
    ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  }
  for (const char* arch : {"gpt2", "llama"}) {
    const std::string cmd =
        reftrain + " golden kernels --arch " + arch + " --out " + root + "/kernels-" + arch;
    const CommandResult r = run_command(cmd);
    ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  }
}

// The files the hash list names, relative to its directory.
std::set<std::string> pinned_files() {
  std::istringstream in(
      testing::read_file(REFTRAIN_SOURCE_DIR "/tests/golden/golden_bytes.sha256"));
  std::set<std::string> files;
  std::string hash, name;
  while (in >> hash >> name) files.insert(name);
  return files;
}

TEST(Aarch64, KernelTestsPassUnderQemu) {
  ASSERT_TRUE(build_aarch64_tree());
  // One test at a time: each runs 2 OpenMP threads, and two emulated processes spinning at
  // their barriers on 2 cores took twice as long.
  const std::string cmd =
      std::string(REFTRAIN_CTEST) + " --test-dir " + kTree + " --output-on-failure --timeout 1200";
  const CommandResult r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  // Not vacuous: the emulated binary ran every kernel test (at least this many).
  const size_t at = r.output.find("tests failed out of ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_GE(std::stoi(r.output.substr(at + 20)), 190) << r.output;
  std::printf("%s\n", r.output.substr(r.output.rfind('\n', at) + 1).c_str());
}

TEST(Aarch64, GoldenFilesEqualTheNativeBuildsByteForByte) {
  ASSERT_TRUE(build_aarch64_tree());
  const std::string qemu = emulator();
  ASSERT_NE(qemu.find("qemu-aarch64"), std::string::npos) << "emulator: '" << qemu << "'";
  // Outputs stay in the build tree after a failure, to be compared.
  const std::filesystem::path out = REFTRAIN_BINARY_DIR "/aarch64-golden";
  std::filesystem::remove_all(out);
  const std::string arm = (out / "aarch64").string(), native = (out / "native").string();
  write_golden_files(qemu + " " + kTree + "/reftrain", arm);
  write_golden_files(REFTRAIN_BIN, native);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::set<std::string> files = pinned_files();
  for (const std::string& f : files) {
    const std::string a = testing::read_file(arm + "/" + f),
                      n = testing::read_file(native + "/" + f);
    EXPECT_FALSE(a.empty()) << f;
    EXPECT_TRUE(a == n) << f << " differs between aarch64 and x86-64; run `reftrain compare " << arm
                        << "/" << f << " " << native << "/" << f << "` to see where";
  }
  const std::string check = "cd " + arm +
                            " && sha256sum --check --quiet " REFTRAIN_SOURCE_DIR
                            "/tests/golden/golden_bytes.sha256";
  const CommandResult c = run_command(check);
  EXPECT_EQ(c.exit_code, 0) << "the aarch64 golden files are not the pinned bytes:\n" << c.output;
  std::printf(
      "%zu golden files identical from the aarch64 build and the native one; aarch64's "
      "build.json: %s\n",
      files.size(), testing::read_file(arm + "/tiny-fp32-adamw/build.json").c_str());
}

}  // namespace
}  // namespace reftrain
