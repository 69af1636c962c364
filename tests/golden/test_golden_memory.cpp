// `golden run` on too little memory: refused before anything large is allocated, with advice the
// command can follow (it has no --batch, so the advice is a smaller preset), as `train` is.
#include <gtest/gtest.h>

#include <string>

#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

TEST(GoldenMemory, TooLittleMemoryIsRefusedWithAdviceGoldenRunCanFollow) {
  TempDir dir;
  const std::string cmd = "REFTRAIN_MEMORY_LIMIT=100000000 " REFTRAIN_BIN
                          " golden run --preset gpt2-124m --steps 1 --out " +
                          dir.file("g");
  const CommandResult out = run_command(cmd);
  EXPECT_EQ(out.exit_code, 1) << out.output;
  const std::vector<std::string> lines = non_empty_lines(out.output);
  ASSERT_EQ(lines.size(), 1u) << out.output;
  EXPECT_NE(lines[0].find("error: this run needs about"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("use a smaller preset"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("--batch or --seq"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace reftrain::testing
