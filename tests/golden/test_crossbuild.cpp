// Bit-identical across builds: a nested build of this source tree for the portable baseline
// (-DREFTRAIN_PORTABLE=ON, only the `reftrain` target: x86-64-v3 with AVX2 on x86, armv8-a on
// aarch64) writes the same golden run, byte for byte, as the build under test (-march=native:
// AVX-512 where the machine has it) — gpt2 and
// llama, fp32, mixed, bf16, bf16-pure and bf16-kahan. Every reduction must have a fixed logical
// width and order, FMA only where written, the same exp/tanh on every ISA. Label `crossbuild`
// (ctest -L crossbuild; the first run builds the nested tree, a few minutes on 2 cores).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::CommandResult;
using testing::run_command;

const std::string kPortableDir = REFTRAIN_BINARY_DIR "/crossbuild-portable";

// Configures and builds the portable reftrain once per build tree (later runs are incremental).
std::string portable_reftrain() {
  const std::string cmake = REFTRAIN_CMAKE;
  const std::string configure =
      cmake + " -S " REFTRAIN_SOURCE_DIR " -B " + kPortableDir +
      " -G \"" REFTRAIN_GENERATOR "\" -DCMAKE_CXX_COMPILER=" REFTRAIN_CXX_COMPILER
      " -DCMAKE_BUILD_TYPE=" REFTRAIN_BUILD_TYPE
      " -DREFTRAIN_PORTABLE=ON -DREFTRAIN_BUILD_TESTS=OFF -DREFTRAIN_BUILD_BENCH=OFF"
      " -DCMAKE_UNITY_BUILD=ON";
  const CommandResult c = run_command(configure);
  EXPECT_EQ(c.exit_code, 0) << configure << "\n" << c.output;
  const std::string build = cmake + " --build " + kPortableDir + " --target reftrain -j2";
  const CommandResult b = run_command(build);
  EXPECT_EQ(b.exit_code, 0) << build << "\n" << b.output;
  return kPortableDir + "/reftrain";
}

TEST(CrossBuild, PortableBuildWritesTheSameGoldenRun) {
  if (REFTRAIN_IS_PORTABLE) GTEST_SKIP() << "the build under test is the portable one already";
  const std::string portable = portable_reftrain();
  ASSERT_FALSE(::testing::Test::HasFailure());
  // Outputs stay in the build tree after a failure, to be compared.
  const std::filesystem::path out = REFTRAIN_BINARY_DIR "/crossbuild-out";
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  const std::string data = REFTRAIN_SOURCE_DIR "/README.md";
  for (const char* preset : {"tiny", "llama-tiny"}) {
    for (const char* precision : {"fp32", "mixed", "bf16", "bf16-pure", "bf16-kahan"}) {
      SCOPED_TRACE(std::string(preset) + " " + precision);
      const std::string args = std::string(" golden run --steps 3 --preset ") + preset +
                               " --precision " + precision + " --data " + data + " --out ";
      const std::string a = (out / (std::string("native-") + preset + "-" + precision)).string();
      const std::string b = (out / (std::string("portable-") + preset + "-" + precision)).string();
      ASSERT_EQ(run_command(REFTRAIN_BIN + args + a).exit_code, 0);
      ASSERT_EQ(run_command(portable + args + b).exit_code, 0);
      for (const char* f : {"trace.jsonl", "init.safetensors", "debug_state.safetensors",
                            "batches.safetensors", "config.json"}) {
        const std::string fa = testing::read_file(a + "/" + f),
                          fb = testing::read_file(b + "/" + f);
        EXPECT_FALSE(fa.empty()) << f;
        EXPECT_TRUE(fa == fb) << f << " differs between the builds; run `reftrain compare " << a
                              << "/" << f << " " << b << "/" << f << "` to see where";
      }
      const auto simd = [](const std::string& d) {
        return nlohmann::json::parse(testing::read_file(d + "/build.json")).at("simd");
      };
      std::printf("%s %s: identical from %s and %s builds\n", preset, precision,
                  simd(a).get<std::string>().c_str(), simd(b).get<std::string>().c_str());
    }
  }
}

}  // namespace
}  // namespace reftrain
