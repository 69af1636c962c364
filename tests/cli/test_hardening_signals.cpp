// Signals a run must take without losing work: SIGINT and SIGTERM finish the step, save and
// exit 130 / 143, a second one exits at once, and a closed stdout (`| head -1`) does not stop
// the run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "core/train/checkpoint.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

// The step lines of a trace (complete lines only: the run is still writing it).
std::vector<json> step_lines(const std::string& trace) {
  std::vector<json> out;
  const std::string text = read_file(trace);
  for (const std::string& l : split_lines(text.substr(0, text.rfind('\n') + 1))) {
    const json j = json::parse(l, nullptr, false);
    if (j.is_object() && j.value("type", "") == "step") out.push_back(j);
  }
  return out;
}

class HardeningSignals : public LearnableTextTest {
 protected:
  // A run far longer than the test, to be stopped by a signal.
  std::string long_run() const {
    return "train --preset tiny --data " + text_ + " --steps 100000 --val-every 0";
  }
  // Waits until `trace` holds at least `n` step lines.
  bool wait_steps(const std::string& trace, size_t n) {
    return wait_for([&] { return step_lines(trace).size() >= n; }, 300);
  }
};

// SIGINT: the step in progress finishes, a checkpoint of it is written (--save-every 0 would
// save only at the end), the trace ends with that step, exit 130; the checkpoint resumes.
TEST_F(HardeningSignals, SigintSavesTheStepAndExits130) {
  const std::string out = dir_.file("ckpt"), trace = dir_.file("t.jsonl");
  const std::string stdout_path = dir_.file("out"), err = dir_.file("err");
  Background r(long_run() + " --out " + out + " --trace " + trace, stdout_path, err);
  ASSERT_TRUE(wait_steps(trace, 3)) << read_file(err);
  r.send(SIGINT);
  EXPECT_EQ(r.wait(), 130) << read_file(err);
  const int last = step_lines(trace).back().at("step").get<int>();
  const auto saved = list_checkpoints(out);
  ASSERT_EQ(saved.size(), 1u) << read_file(stdout_path);
  EXPECT_EQ(saved.back().first, last);
  const std::string said = read_file(stdout_path);
  EXPECT_NE(said.find("SIGINT: stopped after step " + std::to_string(last)), std::string::npos)
      << said;
  EXPECT_NE(said.find("continue with: reftrain train --resume " + out), std::string::npos) << said;
  const CommandResult resumed = run_reftrain("train --resume " + out + " --trace " + trace +
                                             " --stop-after " + std::to_string(last + 1));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(step_lines(trace).back().at("step"), last + 1);
}

// SIGTERM without --out: nothing can be saved, so the run says how many steps are lost and how
// to keep them next time; the trace is complete up to the last step; exit 143.
TEST_F(HardeningSignals, SigtermWithoutOutSaysWhatIsLost) {
  const std::string trace = dir_.file("t.jsonl"), stdout_path = dir_.file("out");
  Background r(long_run() + " --trace " + trace, stdout_path, dir_.file("err"));
  ASSERT_TRUE(wait_steps(trace, 2));
  r.send(SIGTERM);
  EXPECT_EQ(r.wait(), 143);
  const int last = step_lines(trace).back().at("step").get<int>();
  const std::string text = read_file(trace);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const std::string said = read_file(stdout_path);
  EXPECT_NE(said.find("SIGTERM: stopped after step " + std::to_string(last) + " of 100000; its " +
                      std::to_string(last) + " steps are lost (no --out)"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("--out DIR"), std::string::npos) << said;
  EXPECT_NE(said.find("--save-every N"), std::string::npos) << said;
}

// A second SIGINT while the first one's checkpoint is being written (held there by
// REFTRAIN_DEBUG_SAVE_PAUSE) ends the process at once, without that checkpoint.
TEST_F(HardeningSignals, SecondSignalExitsAtOnce) {
  const std::string out = dir_.file("ckpt"), trace = dir_.file("t.jsonl"), err = dir_.file("err");
  Background r(long_run() + " --out " + out + " --trace " + trace, dir_.file("out"), err,
               "env REFTRAIN_DEBUG_SAVE_PAUSE=600");
  ASSERT_TRUE(wait_steps(trace, 2)) << read_file(err);
  r.send(SIGINT);
  ASSERT_TRUE(wait_for(
      [&] {
        return read_file(err).find("REFTRAIN_DEBUG_SAVE_PAUSE") != std::string::npos ||
               !r.running();
      },
      300));
  ASSERT_TRUE(r.running()) << "the first SIGINT ended the run: " << read_file(err);
  r.send(SIGINT);
  EXPECT_TRUE(wait_for([&] { return !r.running(); }, 20));
  EXPECT_EQ(r.wait(), 130);
  EXPECT_TRUE(list_checkpoints(out).empty());
}

// `train ... | head -1`: the reader goes away after the first line; the run still finishes,
// saves its checkpoint and exits 0 (SIGPIPE would end it with 141 and nothing saved).
TEST_F(HardeningSignals, ClosedStdoutDoesNotStopTheRun) {
  const std::string out = dir_.file("ckpt"), rc = dir_.file("rc");
  const CommandResult r =
      run_command("{ " REFTRAIN_BIN " train --preset tiny --data " + text_ + " --steps 30 --out " +
                  out + "; echo $? >" + rc + "; } | head -1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("reftrain ", 0), 0u) << r.output;  // the banner's first line
  EXPECT_EQ(read_file(rc), "0\n");
  const auto saved = list_checkpoints(out);
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved.back().first, 30);
}

}  // namespace
}  // namespace reftrain::testing
