// The benchmark harness: bench/step_report.py's FLOP formula against PyTorch's own count, and
// bench/run_all.sh end to end on the test presets (every run reported, each reftrain ms/step
// the median of its trace's steps 2..N).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/formats/trace.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::python_script;
using testing::read_file;
using testing::run_command;
using testing::TempDir;

// Exact integer FLOP counts on both sides (tests/torch/flop_check.py): no tolerance.
TEST(BenchFlops, FormulaEqualsPyTorchProfilerCount) {
  const testing::CommandResult r = run_command(python_script("flop_check.py"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("MISMATCH"), std::string::npos) << r.output;
  size_t checked = 0;
  for (size_t at = r.output.find(": ok"); at != std::string::npos;
       at = r.output.find(": ok", at + 1)) {
    ++checked;
  }
  EXPECT_EQ(checked, 3u) << r.output;  // two gpt2 shapes, one llama
}

// run_all.sh with the environment that points it at this build and a scratch OUT directory.
std::string run_all_command(const std::string& out, const std::string& settings) {
  const std::string build = std::filesystem::path(REFTRAIN_BIN).parent_path().string();
  return "BUILD=" + build + " OUT=" + out + " PYTHON=" REFTRAIN_TORCH_PYTHON " " + settings +
         " bash " REFTRAIN_SOURCE_DIR "/bench/run_all.sh";
}

// The median `ms` of steps 2..N, formatted as the summary table prints it.
std::string median_ms_of_steps_after_first(const std::string& trace_path) {
  const Trace t = read_trace(trace_path);
  std::vector<double> ms;
  for (size_t k = 1; k < t.steps.size(); ++k) ms.push_back(t.steps[k].at("ms").get<double>());
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  const double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", median);
  return buf;
}

TEST(BenchHarness, RunAllReportsEveryRunOfTheTestPresets) {
  TempDir dir;
  const std::string out = dir.file("out");
  const testing::CommandResult r = run_command(run_all_command(
      out, "PRESETS='tiny llama-tiny' THREADS=1 STEPS=4 TORCH_MODES=stock KERNEL_BENCHES= BUSY=1"));
  // A busy loop left running would hold the output pipe open: the command would never end.
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string summary = read_file(out + "/summary.md");
  EXPECT_NE(summary.find("busy loops beside the training steps (BUSY): 1\n"), std::string::npos)
      << summary;
  for (const std::string preset : {"tiny", "llama-tiny"}) {
    const std::string row = "| " + preset + " | 4×32 | 1 | ";
    const std::string ms =
        median_ms_of_steps_after_first(out + "/traces/" + preset + "_t1_r1_default.jsonl");
    EXPECT_NE(summary.find(row + "reftrain | " + ms + " | "), std::string::npos)
        << "reftrain's row should show the trace's median " << ms << "\n"
        << summary;
    // The reference-kernel variant: measured, or skipped where this build lacks the flags.
    EXPECT_NE(summary.find(row + "reftrain --matmul naive --attention materialised | "),
              std::string::npos)
        << summary;
    const size_t torch_at = summary.find(row + "PyTorch ");
    ASSERT_NE(torch_at, std::string::npos) << summary;
    const std::string torch_row = summary.substr(torch_at, summary.find('\n', torch_at) - torch_at);
    EXPECT_NE(torch_row.find(" stock | "), std::string::npos) << torch_row;
    EXPECT_EQ(torch_row.find("skipped"), std::string::npos) << torch_row;
    EXPECT_NE(torch_row.find("× |"), std::string::npos) << "time ÷ reftrain's\n" << torch_row;
  }
}

TEST(BenchHarness, RunAllNamesAMissingBuild) {
  TempDir dir;
  const testing::CommandResult r = run_command("BUILD=" + dir.file("no-build") +
                                               " bash " REFTRAIN_SOURCE_DIR "/bench/run_all.sh");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("error: " + dir.file("no-build") + "/reftrain not found"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace reftrain
