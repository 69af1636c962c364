// `train --kernels reference|fast`: reference runs the whole model and optimizer on the scalar
// references (tests/test_torch_parity.cpp holds them against PyTorch); here, as a user sees it:
// the trace records the choice, the run is bit-identical for any thread count, it trains within
// rounding of the fast kernels, conflicting flags are one-line usage errors, and a checkpoint
// keeps the choice across --resume.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

using KernelsFlag = LearnableTextTest;

std::vector<double> losses(const std::string& trace) {
  std::vector<double> out;
  for (const json& j : read_trace(trace)) {
    if (j.value("type", "") == "step") out.push_back(j.at("loss").get<double>());
  }
  return out;
}

TEST_F(KernelsFlag, ReferenceRunIsRecordedDeterministicAndTracksTheFastRun) {
  for (const char* preset : {"tiny", "llama-tiny"}) {
    SCOPED_TRACE(preset);
    const std::string base = std::string("train --preset ") + preset + " --steps 8 --data " + text_;
    const std::string ref1 = dir_.file(std::string(preset) + "-ref1.jsonl");
    const std::string ref2 = dir_.file(std::string(preset) + "-ref2.jsonl");
    const std::string fast = dir_.file(std::string(preset) + "-fast.jsonl");
    ASSERT_EQ(run_command("OMP_NUM_THREADS=1 " REFTRAIN_BIN " " + base +
                          " --kernels reference --trace " + ref1)
                  .exit_code,
              0);
    ASSERT_EQ(run_command("OMP_NUM_THREADS=2 " REFTRAIN_BIN " " + base +
                          " --kernels reference --trace " + ref2)
                  .exit_code,
              0);
    ASSERT_EQ(run_reftrain(base + " --trace " + fast).exit_code, 0);
    expect_same_trace(ref1, ref2);

    const json run_ref = read_trace(ref1).at(0), run_fast = read_trace(fast).at(0);
    EXPECT_EQ(run_ref.at("train").at("kernels"), "reference");
    EXPECT_EQ(run_ref.at("train").at("matmul"), "naive");
    EXPECT_EQ(run_ref.at("train").at("attention"), "materialised");
    EXPECT_EQ(run_fast.at("train").at("kernels"), "fast");

    // The fast kernels' row sums (norms, loss) round differently from the references', so the
    // two runs agree to float rounding, not necessarily to the bit.
    const std::vector<double> a = losses(ref1), b = losses(fast);
    ASSERT_EQ(a.size(), 8u);
    ASSERT_EQ(b.size(), 8u);
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_NEAR(a[k], b[k], 1e-4 * std::abs(b[k])) << "step " << k + 1;
    }
  }
}

TEST_F(KernelsFlag, ConflictingFlagsAreUsageErrors) {
  expect_user_error("train --preset tiny --kernels reference --matmul blocked --data " + text_, 2,
                    "--matmul blocked conflicts with --kernels reference");
  expect_user_error("train --preset tiny --kernels reference --attention fused --data " + text_, 2,
                    "--attention fused conflicts with --kernels reference");
  expect_user_error("train --preset tiny --kernels slow --data " + text_, 2, "--kernels");
}

TEST_F(KernelsFlag, ResumeKeepsTheReferenceKernels) {
  const std::string ckpt = dir_.file("ckpt"), trace = dir_.file("run.jsonl");
  const std::string base = "train --preset tiny --steps 4 --data " + text_;
  ASSERT_EQ(
      run_reftrain(base + " --kernels reference --stop-after 2 --out " + ckpt + " --trace " + trace)
          .exit_code,
      0);
  expect_user_error("train --resume " + ckpt + " --kernels fast", 2,
                    "--kernels \"fast\" conflicts with the checkpoint's \"reference\"");
  ASSERT_EQ(run_reftrain("train --resume " + ckpt + " --trace " + trace).exit_code, 0);
  const std::string whole = dir_.file("whole.jsonl");
  ASSERT_EQ(run_reftrain(base + " --kernels reference --trace " + whole).exit_code, 0);
  expect_same_trace(trace, whole);
}

}  // namespace
}  // namespace reftrain::testing
