// What `train` and `plot` write, as a user may point it: a trace torn by a kill resumes, a second
// run cannot share a checkpoint directory, an output never replaces an input or another run's
// trace, devices and symlinks are written through, and every output is checked before step 1.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/train/checkpoint.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

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

// Run A holds its --out (here paused in the middle of its first save, its .tmp file on disk); a
// second run into that directory, fresh or resumed, is refused in one line naming A's pid, and
// leaves A's temporary file alone. Once A is gone (SIGKILL: the kernel drops the lock), the
// directory is free again, and A's orphaned .tmp file is cleaned up.
TEST_F(HardeningOutputs, SecondRunIntoTheSameOutIsRefused) {
  const std::string other = dir_.file("other");
  ASSERT_EQ(run_reftrain(run(8) + " --stop-after 1 --out " + other).exit_code, 0);
  const std::string out = dir_.file("ckpt"), err = dir_.file("a.err");
  Background a(run(100000) + " --out " + out + " --save-every 1", dir_.file("a.out"), err,
               "env REFTRAIN_DEBUG_SAVE_PAUSE=600");
  ASSERT_TRUE(wait_for(
      [&] {
        return read_file(err).find("REFTRAIN_DEBUG_SAVE_PAUSE") != std::string::npos ||
               !a.running();
      },
      300));
  ASSERT_TRUE(a.running()) << read_file(err);
  const std::string tmp = ".ckpt-00000001.safetensors.tmp";
  ASSERT_EQ(files_in(out), std::vector<std::string>{tmp});

  const SplitResult fresh = run_split(run(8) + " --out " + out);
  EXPECT_EQ(fresh.exit_code, 2) << fresh.err;
  const std::string holder = "--out " + out + " is in use by another reftrain run (pid ";
  const size_t at = fresh.err.find(holder);
  ASSERT_NE(at, std::string::npos) << fresh.err;
  const std::string pid =
      fresh.err.substr(at + holder.size(), fresh.err.find(')', at) - at - holder.size());
  const std::string cmdline = read_file("/proc/" + pid + "/cmdline");
  EXPECT_NE(cmdline.find("--save-every"), std::string::npos) << pid << ": " << cmdline;
  expect_user_error(run(8) + " --out " + out, 2, holder + pid + ")");
  expect_user_error("train --resume " + other + " --out " + out, 2, holder + pid + ")");
  EXPECT_EQ(files_in(out), std::vector<std::string>{tmp});  // A's save in progress, untouched

  a.kill();
  a.wait();
  const CommandResult r =
      run_reftrain("train --resume " + other + " --out " + out + " --stop-after 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(files_in(out), std::vector<std::string>{checkpoint_file_name(2)});
}

// An output that is an input (or the other output) would destroy it: refused before anything is
// written, however the path is spelled (a symlink, a hard link), and the input is unchanged.
TEST_F(HardeningOutputs, OutputThatIsAnInputIsRefused) {
  const std::string text = read_file(text_);
  expect_user_error(run(4) + " --trace " + text_, 2,
                    "--trace " + text_ + " is the same file as --data " + text_);
  const std::string symlink = dir_.file("symlink.txt"), hard = dir_.file("hard.txt");
  fs::create_symlink(text_, symlink);
  fs::create_hard_link(text_, hard);
  expect_user_error(run(4) + " --plot " + symlink, 2, "--plot " + symlink + " is the same file");
  expect_user_error(run(4) + " --trace " + hard, 2, "--trace " + hard + " is the same file");
  EXPECT_EQ(read_file(text_), text);
  const std::string both = dir_.file("both");
  write_file(both, "");
  expect_user_error(run(4) + " --trace " + both + " --plot " + both, 2,
                    "--plot " + both + " is the same file as --trace " + both);

  const std::string trace = dir_.file("t.jsonl"), out = dir_.file("ckpt");
  ASSERT_EQ(run_reftrain(run(8) + " --stop-after 2 --out " + out + " --trace " + trace).exit_code,
            0);
  const std::string lines = read_file(trace);
  expect_user_error("plot " + trace + " --out " + trace, 2,
                    "--out " + trace + " is the same file as trace " + trace);
  EXPECT_EQ(read_file(trace), lines);
  const std::string ckpt = out + "/" + checkpoint_file_name(2);
  expect_user_error("train --resume " + out + " --trace " + ckpt, 2,
                    "--trace " + ckpt + " is the same file as the checkpoint resumed, " + ckpt);
  expect_user_error("train --resume " + out + " --plot " + out + "/" + checkpoint_file_name(8), 2,
                    "is in --out " + out + " under a checkpoint's name");
  EXPECT_NO_THROW(read_checkpoint(ckpt));
}

// --resume r1 --trace other.jsonl, where other.jsonl is a finished run of the same preset, seed
// and data but another length (so another schedule): refused, with or without --steps, and
// the other trace is left as it was. r1's own trace continues, also after --steps extended it.
TEST_F(HardeningOutputs, TraceOfAnotherRunIsRefusedOnResume) {
  const std::string r1 = dir_.file("r1"), t1 = dir_.file("t1.jsonl");
  ASSERT_NO_FATAL_FAILURE(first_four_of_twelve(r1, t1));
  const std::string other = dir_.file("other.jsonl");
  ASSERT_EQ(run_reftrain(run(6) + " --trace " + other).exit_code, 0);
  const std::string before = read_file(other);
  const std::string why =
      "trace " + other +
      " is the trace of another run (a 6-step run; the checkpoint's is a 12-step";
  expect_user_error("train --resume " + r1 + " --trace " + other, 1, why);
  expect_user_error("train --resume " + r1 + " --trace " + other + " --steps 6", 1, why);
  EXPECT_EQ(read_file(other), before);

  CommandResult r =
      run_reftrain("train --resume " + r1 + " --trace " + t1 + " --steps 16 " + "--stop-after 8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_reftrain("train --resume " + r1 + " --trace " + t1);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_trace(t1).front()["train"]["steps"], 16);
}

// A device is written through, never replaced: `plot --out` and a resumed run's `--trace` (both
// written atomically to a regular file) on /dev/null, and on a FIFO whose reader gets the bytes.
// As root, a rename over the node would succeed; so the device is a null device made in the
// test's directory where mknod is allowed, so that a regression cannot replace the machine's
// /dev/null (elsewhere /dev/null itself, which a non-root rename cannot replace).
TEST_F(HardeningOutputs, DevicesAndFifosAreWrittenThrough) {
  const std::string trace = dir_.file("t.jsonl"), out = dir_.file("ckpt");
  ASSERT_NO_FATAL_FAILURE(first_four_of_twelve(out, trace));
  const std::string made = dir_.file("null");
  const bool own = run_command("mknod " + made + " c 1 3").exit_code == 0;
  const std::string null = own ? made : "/dev/null";
  const auto is_char_device = [](const std::string& path) {
    struct stat st = {};
    return ::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
  };
  CommandResult r = run_reftrain("plot " + trace + " --out " + null);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(is_char_device(null));
  r = run_reftrain("train --resume " + out + " --trace " + null + " --stop-after 5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(is_char_device(null));
  EXPECT_FALSE(fs::exists(fs::path(null).parent_path() / ".null.tmp"));

  const std::string fifo = dir_.file("fifo"), got = dir_.file("got.svg");
  ASSERT_EQ(run_command("mkfifo " + fifo).exit_code, 0);
  // The reader gives up after 60 s: a writer that replaced the FIFO never opens it.
  r = run_command("timeout 60 cat " + fifo + " >" + got + " & " REFTRAIN_BIN " plot " + trace +
                  " --out " + fifo + "; wait");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_NE(read_file(got).find("<svg"), std::string::npos);
}

// A symlinked output stays a symlink: its target is written (atomically, next to the target),
// also when the target does not exist yet.
TEST_F(HardeningOutputs, SymlinkedOutputWritesItsTarget) {
  const std::string trace = dir_.file("t.jsonl");
  ASSERT_EQ(run_reftrain(run(2) + " --trace " + trace).exit_code, 0);
  fs::create_directories(dir_.file("real"));
  const std::string target = dir_.file("real/plot.svg"), link = dir_.file("plot.svg");
  fs::create_symlink("real/plot.svg", link);  // relative: resolved from the link's directory
  for (const bool exists : {false, true}) {
    SCOPED_TRACE(exists ? "target exists" : "dangling link");
    if (exists) write_file(target, "old");
    const CommandResult r = run_reftrain("plot " + trace + " --out " + link);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(fs::is_symlink(link));
    EXPECT_NE(read_file(target).find("<svg"), std::string::npos);
    EXPECT_EQ(files_in(dir_.file("real")), std::vector<std::string>{"plot.svg"});
    fs::remove(target);
  }
}

// Every output is checked before step 1: a --plot (or --trace) that cannot be written fails at
// once, in one line, instead of after the whole run. A path below a regular file cannot be
// created by anyone, root included; a directory cannot be replaced by a file.
TEST_F(HardeningOutputs, UnwritableOutputsFailBeforeStepOne) {
  const std::string file = dir_.file("a-file");
  write_file(file, "x");
  for (const std::string flag : {"--plot", "--trace"}) {
    for (const std::string& path : {file + "/x", dir_.file("")}) {
      SCOPED_TRACE(flag + " " + path);
      const SplitResult r = run_split(run(20) + " " + flag + " " + path);
      EXPECT_EQ(r.exit_code, 1) << r.err;
      const std::vector<std::string> lines = non_empty_lines(r.err);
      ASSERT_EQ(lines.size(), 1u) << r.err;
      EXPECT_EQ(lines[0].rfind("error: " + flag + " " + path + " cannot be written: ", 0), 0u)
          << lines[0];
      EXPECT_EQ(r.out.find("step"), std::string::npos) << r.out;
    }
  }
}

}  // namespace
}  // namespace reftrain::testing
