// What `train` and `plot` write, as a user may point it: a trace torn by a kill resumes, a second
// run cannot share a checkpoint directory, an output never replaces an input or another run's
// trace, devices and symlinks are written through, and every output is checked before step 1.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/train/checkpoint.h"
#include "tests/cli_util.h"
#include "tests/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

class HardeningOutputs : public LearnableTextTest {
 protected:
  std::string run(int steps) const {
    return "train --preset tiny --data " + text_ + " --steps " + std::to_string(steps) +
           " --val-every 4";
  }
  // Steps 1-4 of a 12-step run that saves every 4 steps into `out`, traced to `trace`.
  void first_four_of_twelve(const std::string& out, const std::string& trace) {
    const CommandResult r =
        run_reftrain(run(12) + " --stop-after 4 --save-every 4 --out " + out + " --trace " + trace);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
};

// A run killed (or out of disk) in the middle of a trace line leaves half a line at the end;
// resuming drops it, says so, and continues to the trace of the run never stopped. A torn line
// anywhere else is still an error: only the last line can be cut by a stopped writer.
TEST_F(HardeningOutputs, TornLastTraceLineIsDroppedOnResume) {
  const std::string reference = dir_.file("straight.jsonl");
  ASSERT_EQ(run_reftrain(run(12) + " --trace " + reference).exit_code, 0);
  const std::string out = dir_.file("ckpt"), trace = dir_.file("t.jsonl");
  ASSERT_NO_FATAL_FAILURE(first_four_of_twelve(out, trace));
  const std::string whole = read_file(trace);
  const std::string copy = dir_.file("copy");
  fs::copy(out, copy);

  // Unparsable though it ends in a newline, in the middle: an error naming the line.
  const std::string middle = dir_.file("middle.jsonl");
  const size_t second = whole.find('\n') + 1;
  write_file(middle, whole.substr(0, second) + "{\"type\": \"st\n" + whole.substr(second));
  expect_user_error("train --resume " + copy + " --trace " + middle, 1,
                    middle + ":2: not a JSON object");

  // Unparsable, with its newline, at the end: dropped.
  const std::string garbled = dir_.file("garbled.jsonl");
  write_file(garbled, whole + "{\"type\": \"step\", \"st\n");
  const CommandResult g = run_reftrain("train --resume " + copy + " --trace " + garbled);
  ASSERT_EQ(g.exit_code, 0) << g.output;
  expect_same_trace(reference, garbled);

  // A complete-looking line without its newline: cut before the newline, dropped too.
  write_file(trace, whole + "{\"type\": \"step\", \"step\": 5}");
  const CommandResult r = run_reftrain("train --resume " + out + " --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t lines = split_lines(whole).size() + 1;
  EXPECT_NE(r.output.find("trace " + trace + ": dropped its incomplete last line " +
                          std::to_string(lines)),
            std::string::npos)
      << r.output;
  expect_same_trace(reference, trace);
}

}  // namespace
}  // namespace reftrain::testing
