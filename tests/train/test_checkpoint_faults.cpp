// Faults a run must survive without losing more than the steps since its last checkpoint: an
// out directory it cannot write, a full disk (a file-size limit everywhere; a small tmpfs where
// the test may mount one), SIGKILL in the middle of a save (deterministically, between the synced
// temporary file and its rename, and at random moments of a run that saves every step), and a
// loss that turns NaN. After each, the last good checkpoint loads and the resumed run's trace is
// the trace of the run that never failed.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/train/checkpoint.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

// The step of the newest checkpoint in `dir`, 0 when there is none.
int newest_step(const std::string& dir) {
  if (!fs::exists(dir)) return 0;
  const auto all = list_checkpoints(dir);
  return all.empty() ? 0 : int(all.back().first);
}

// Whether this process may mount in a private mount namespace (root in CI containers often may
// not); the tmpfs and read-only variants run only then.
bool can_mount(const std::string& dir) {
  fs::create_directories(dir);
  return run_command("unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs " + dir + "'").exit_code ==
         0;
}

class FaultTest : public LearnableTextTest {
 protected:
  std::string run(int steps) const {
    return "train --preset tiny --data " + text_ + " --steps " + std::to_string(steps) +
           " --val-every 4";
  }
  // The reference: the same run, never interrupted.
  std::string straight(int steps) {
    const std::string trace = dir_.file("straight.jsonl");
    EXPECT_EQ(run_reftrain(run(steps) + " --trace " + trace).exit_code, 0);
    return trace;
  }
  // Resumes `from` to the end, continuing `trace`, and compares with the straight run.
  // Steps 1-4 of a 12-step run that saves every 4 steps; the checkpoint of step 4 is in `out`.
  void first_four_of_twelve(const std::string& out, const std::string& trace) {
    const std::string args = " --stop-after 4 --save-every 4 --out " + out + " --trace " + trace;
    ASSERT_EQ(run_reftrain(run(12) + args).exit_code, 0);
  }

  void expect_resumes_exactly(const std::string& from, const std::string& trace,
                              const std::string& reference, const std::string& extra = "") {
    const CommandResult r = run_reftrain("train --resume " + from + " --trace " + trace + extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_same_trace(reference, trace);
  }
};

// --- an out directory that cannot be written ----------------------------------------------------

// Root ignores permission bits, so the portable case is a path below a regular file (no one can
// create a directory there); a read-only bind mount and a chmod'ed directory are added where the
// test can make them. Each fails before training, in one line, and leaves the good run alone.
TEST_F(FaultTest, UnwritableOutDirectory) {
  const std::string reference = straight(8);
  const std::string good = dir_.file("good"), trace = dir_.file("t.jsonl");
  ASSERT_EQ(run_reftrain(run(8) + " --stop-after 4 --out " + good + " --trace " + trace).exit_code,
            0);
  const std::string file = dir_.file("a-file");
  write_file(file, "x");
  expect_user_error("train --resume " + good + " --out " + file + "/sub", 1,
                    "cannot create checkpoint directory " + file + "/sub: Not a directory");
  expect_user_error(run(8) + " --out " + file, 1, "exists and is not a directory");
  if (geteuid() != 0) {
    const std::string locked = dir_.file("locked");
    fs::create_directories(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    expect_user_error("train --resume " + good + " --out " + locked, 1, "is not writable");
  }
  const std::string ro = dir_.file("ro"), err = dir_.file("ro-err");
  if (can_mount(ro)) {
    const CommandResult r =
        run_command("unshare -m sh -c 'mount --bind " + ro + " " + ro +
                    " && mount -o remount,bind,ro " + ro + " && exec " + REFTRAIN_BIN +
                    " train --resume " + good + " --out " + ro + " 2>" + err + "'");
    EXPECT_EQ(r.exit_code, 1) << read_file(err);
    const std::vector<std::string> lines = non_empty_lines(read_file(err));
    ASSERT_EQ(lines.size(), 1u) << read_file(err);
    EXPECT_NE(lines[0].find("is not writable: Read-only file system"), std::string::npos)
        << lines[0];
  }
  EXPECT_EQ(files_in(good), (std::vector<std::string>{kBestDir, checkpoint_file_name(4)}));
  expect_resumes_exactly(good, trace, reference);
}

// --- a full disk -------------------------------------------------------------------------------

// RLIMIT_FSIZE below a checkpoint's size (tiny: ~430 KB) makes its write fail with EFBIG, as a
// full disk fails it with ENOSPC, at any machine and user. The save of step 8 fails: one line,
// exit 1, no temporary file left; the checkpoint of step 4 resumes the run exactly.
TEST_F(FaultTest, DiskFullFileSizeLimit) {
  const std::string reference = straight(12);
  const std::string out = dir_.file("ckpt"), trace = dir_.file("t.jsonl");
  ASSERT_NO_FATAL_FAILURE(first_four_of_twelve(out, trace));
  const std::string err = dir_.file("err");
  Background limited("train --resume " + out + " --trace " + trace, dir_.file("out"), err, "",
                     200 * 1000);
  EXPECT_EQ(limited.wait(), 1);
  const std::vector<std::string> lines = non_empty_lines(read_file(err));
  ASSERT_EQ(lines.size(), 1u) << read_file(err);
  for (const char* part : {"error: saving the checkpoint of step 8 failed", "File too large",
                           "file-size limit", "the previous checkpoint is intact"}) {
    EXPECT_NE(lines[0].find(part), std::string::npos) << lines[0];
  }
  EXPECT_EQ(files_in(out), (std::vector<std::string>{kBestDir, checkpoint_file_name(4)}));
  expect_resumes_exactly(out, trace, reference);
}

// The same with a real ENOSPC: the checkpoints go to a 1100 KB tmpfs, which holds two (~430 KB
// each: step 4's and the best, step 4's copy) but not the next. Runs where the test may mount (in a
// private mount namespace).
TEST_F(FaultTest, DiskFullTmpfs) {
  const std::string mnt = dir_.file("mnt");
  if (!can_mount(mnt)) GTEST_SKIP() << "cannot mount a tmpfs here (unshare -m / mount refused)";
  const std::string reference = straight(12);
  const std::string kept = dir_.file("kept"), trace = dir_.file("t.jsonl");
  fs::create_directories(kept);
  const std::string script = "mount -t tmpfs -o size=1100k tmpfs " + mnt + " && { " + REFTRAIN_BIN +
                             " " + run(12) + " --save-every 4 --out " + mnt + " --trace " + trace +
                             " >/dev/null 2>" + dir_.file("err") + "; echo $? >" + dir_.file("rc") +
                             "; ls -A " + mnt + " >" + dir_.file("ls") + "; cp " + mnt +
                             "/ckpt-* " + kept + "/; }";
  ASSERT_EQ(run_command("unshare -m sh -c '" + script + "'").exit_code, 0);
  EXPECT_EQ(read_file(dir_.file("rc")), "1\n");
  const std::vector<std::string> lines = non_empty_lines(read_file(dir_.file("err")));
  ASSERT_EQ(lines.size(), 1u) << read_file(dir_.file("err"));
  EXPECT_NE(lines[0].find("saving the checkpoint of step 8 failed"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("No space left on device: the disk is full"), std::string::npos)
      << lines[0];
  // No .tmp left.
  EXPECT_EQ(read_file(dir_.file("ls")),
            std::string(kBestDir) + "\n" + checkpoint_file_name(4) + "\n");
  expect_resumes_exactly(kept + "/" + checkpoint_file_name(4), trace, reference, " --out " + kept);
}

// --- SIGKILL during a save ---------------------------------------------------------------------

// REFTRAIN_DEBUG_SAVE_PAUSE holds the save of step 8 after its temporary file is written and
// synced, before the rename; the kill lands exactly there. The directory then holds the complete
// step-4 checkpoint and the orphaned temporary file, and no step-8 checkpoint; --resume DIR picks
// step 4, removes the orphan, and finishes the run exactly.
TEST_F(FaultTest, KilledBetweenWriteAndRename) {
  const std::string reference = straight(12);
  const std::string out = dir_.file("ckpt"), trace = dir_.file("t.jsonl");
  ASSERT_NO_FATAL_FAILURE(first_four_of_twelve(out, trace));
  const std::string err = dir_.file("err");
  Background paused("train --resume " + out + " --trace " + trace, dir_.file("out"), err,
                    "env REFTRAIN_DEBUG_SAVE_PAUSE=600");
  ASSERT_TRUE(wait_for(
      [&] { return read_file(err).find("REFTRAIN_DEBUG_SAVE_PAUSE") != std::string::npos; }, 300))
      << read_file(err);
  paused.kill();
  EXPECT_EQ(paused.wait(), 128 + SIGKILL);
  const std::string orphan = ".ckpt-00000008.safetensors.tmp";
  EXPECT_EQ(files_in(out), (std::vector<std::string>{orphan, kBestDir, checkpoint_file_name(4)}));
  EXPECT_NO_THROW(read_safetensors(out + "/" + orphan));  // written in full, just not renamed
  EXPECT_EQ(read_checkpoint(out).meta.step, 4);
  expect_resumes_exactly(out, trace, reference);
  EXPECT_EQ(files_in(out),
            (std::vector<std::string>{kBestDir, checkpoint_file_name(4), checkpoint_file_name(8),
                                      checkpoint_file_name(12)}));
}

// A run that saves every step, SIGKILLed eight times at random moments (each time after it made
// progress: a newer checkpoint exists, then 0-15 ms more), and resumed from its directory after
// each kill. After every kill each checkpoint file in the directory is complete and valid, and
// the run, resumed to the end, has the straight run's trace.
TEST_F(FaultTest, KilledAtRandomMoments) {
  const int steps = 40;
  const std::string reference = straight(steps);
  const std::string out = dir_.file("ckpt"), trace = dir_.file("t.jsonl");
  const std::string first = run(steps) + " --save-every 1 --out " + out + " --trace " + trace;
  TestData delays(20240520);
  int newest = 0, kills = 0;
  for (int i = 0; i < 8 && newest < steps - 2; ++i) {
    Background b(newest == 0 ? first : "train --resume " + out + " --trace " + trace,
                 dir_.file("out"), dir_.file("err"));
    const int before = newest;
    wait_for([&] { return newest_step(out) > before || !b.running(); }, 300);
    std::this_thread::sleep_for(std::chrono::microseconds(delays.below(15000)));
    b.kill();
    const int code = b.wait();
    ASSERT_TRUE(code == 128 + SIGKILL || code == 0) << code << " " << read_file(dir_.file("err"));
    kills += code != 0;
    for (const auto& [step, path] : list_checkpoints(out)) {
      EXPECT_NO_THROW(read_checkpoint(path)) << path;
      newest = int(step);
    }
  }
  EXPECT_GE(kills, 4);
  if (newest < steps) {
    expect_resumes_exactly(out, trace, reference);
  } else {
    expect_same_trace(reference, trace);  // a run that ended before its kill
  }
}

// --- a loss that is not finite -----------------------------------------------------------------

// --lr 1e30 blows the weights up in the first update, so step 2's loss is NaN. The run stops
// there with one line naming the step and the intact checkpoint; nothing is saved after it; the
// trace records the step (loss null). Resuming from the checkpoint reproduces the failure exactly.
TEST_F(FaultTest, NonFiniteLossStopsTheRun) {
  const std::string out = dir_.file("ckpt"), trace = dir_.file("t.jsonl");
  const std::string args = run(5) + " --lr 1e30 --save-every 1 --out " + out + " --trace " + trace;
  const std::string msg = "loss is NaN at step 2, so its update was not applied";
  expect_user_error(args, 1, msg);
  expect_user_error("train --resume " + out, 1, msg);
  expect_user_error("train --resume " + out, 1,
                    "the last checkpoint " + out + "/" + checkpoint_file_name(1) + " is intact");
  EXPECT_EQ(files_in(out), (std::vector<std::string>{checkpoint_file_name(1)}));
  const json last = read_trace(trace).back();
  EXPECT_EQ(last["step"], 2);
  EXPECT_TRUE(last["loss"].is_null()) << last.dump();
  EXPECT_EQ(last["skipped"], true);
}

// --skip-nonfinite: steps 2..5 are skipped (no update: weights, m, v and the AdamW step count
// stay as after step 1) and traced with "skipped": true; the data and the schedule move on.
TEST_F(FaultTest, SkipNonfiniteSkipsTheUpdate) {
  const std::string out = dir_.file("ckpt"), trace = dir_.file("t.jsonl");
  const CommandResult r = run_reftrain(
      run(5) + " --lr 1e30 --skip-nonfinite --save-every 1 --out " + out + " --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("loss is NaN at step 3: its update was skipped"), std::string::npos);
  EXPECT_NE(r.output.find("4 skipped"), std::string::npos) << r.output;
  int skipped = 0;
  for (const json& j : read_trace(trace)) {
    if (j["type"] != "step") continue;
    const bool skip = j.value("skipped", false);
    EXPECT_EQ(skip, j["step"] != 1) << j.dump();
    EXPECT_EQ(j["loss"].is_null(), skip) << j.dump();
    EXPECT_EQ(j["grad_norm"].is_null(), skip) << j.dump();
    skipped += skip;
  }
  EXPECT_EQ(skipped, 4);
  const Checkpoint after1 = read_checkpoint(out + "/" + checkpoint_file_name(1));
  const Checkpoint after5 = read_checkpoint(out + "/" + checkpoint_file_name(5));
  EXPECT_EQ(after5.meta.step, 5);
  EXPECT_EQ(after5.meta.updates, 1);
  ASSERT_EQ(after1.file.tensors.size(), after5.file.tensors.size());
  for (const auto& [name, t] : after1.file.tensors) {
    EXPECT_TRUE(t.bytes == after5.file.tensors.at(name).bytes) << name << " changed";
  }
}

}  // namespace
}  // namespace reftrain::testing
