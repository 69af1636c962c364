// `reftrain compare` against inputs that used to make it report "within tolerance" for
// comparisons that compared nothing meaningful (docs/hardening.md): NaN or negative tolerances,
// runs of different kinds, a result directory missing most files, --steps past the trace.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/formats/trace.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

class CompareHardening : public ::testing::Test {
 protected:
  int compare(const std::string& args) {
    const SplitResult r = run_split("compare " + args);
    out_ = r.out, err_ = r.err;
    return r.exit_code;
  }
  // A trace whose run line names `arch`, `precision` and `optimizer`; steps 1..n.
  std::string trace(const std::string& name, const std::string& arch = "gpt2",
                    const std::string& precision = "fp32", const std::string& optimizer = "adamw",
                    int n = 3) {
    const std::string path = dir_.file(name);
    TraceWriter w(path);
    w.write({{"type", "run"},
             {"model", {{"arch", arch}}},
             {"train", {{"precision", precision}}},
             {"optimizer", {{"name", optimizer}}}});
    for (int k = 1; k <= n; ++k) {
      w.write({{"type", "step"}, {"step", k}, {"loss", 5.0 - k}, {"grad_norm", 1.0}, {"lr", 1e-3}});
    }
    return path;
  }
  TempDir dir_;
  std::string out_, err_;
};

// A NaN gate passed everything (NaN > x is false) or failed everything; a negative one too.
TEST_F(CompareHardening, NonFiniteOrNegativeTolerancesAreUsageErrors) {
  const std::string a = trace("a.jsonl");
  for (const char* flag : {"--max-nmse nan", "--max-ulp nan", "--max-drift nan", "--rtol inf",
                           "--atol -1", "--max-drift -0.5", "--max-ulp 1e400"}) {
    SCOPED_TRACE(flag);
    EXPECT_EQ(compare(a + " " + a + " " + flag), 2) << out_ << err_;
    EXPECT_EQ(non_empty_lines(err_).size(), 1u) << err_;
  }
  EXPECT_EQ(compare(a + " " + a + " --max-drift 0"), 0) << out_ << err_;
}

TEST_F(CompareHardening, RunsOfDifferentKindsAreNotCompared) {
  const std::string a = trace("a.jsonl");
  for (const auto& [b, what] :
       {std::pair{trace("llama.jsonl", "llama"), "model.arch \"gpt2\" vs \"llama\""},
        std::pair{trace("mixed.jsonl", "gpt2", "mixed"), "train.precision"},
        std::pair{trace("8bit.jsonl", "gpt2", "fp32", "adamw8bit"), "optimizer.name"}}) {
    EXPECT_EQ(compare(a + " " + b), 2) << out_ << err_;
    EXPECT_NE(err_.find(what), std::string::npos) << err_;
    EXPECT_EQ(out_.find("within tolerance"), std::string::npos) << out_;
  }
}

TEST_F(CompareHardening, StepsPastTheTraceSaySo) {
  const std::string a = trace("a.jsonl");
  EXPECT_EQ(compare(a + " " + a + " --steps 50"), 2) << out_ << err_;
  EXPECT_NE(err_.find("--steps 50 is past the end of " + a + ", whose last step is 3"),
            std::string::npos)
      << err_;
  EXPECT_EQ(compare(a + " " + a + " --steps 3"), 0) << out_ << err_;
}

// A directory of 5 results against one holding a single of them reported "all 1 files within
// tolerance", exit 0. Now the missing results fail (exit 1) unless --subset; a golden run's
// inputs (init and batches, named by its config.json) may be missing.
TEST_F(CompareHardening, DirectoryMissingMostFilesIsNotWithinTolerance) {
  const std::string ga = dir_.file("golden"), gb = dir_.file("result");
  fs::create_directories(ga), fs::create_directories(gb);
  const std::vector<float> v = {1.0f, 2.0f, 3.0f};
  for (const char* name : {"a", "b", "c", "d", "init", "batches"}) {
    SafetensorsFile f;
    f.add("w", DType::kF32, {3}, v.data());
    write_safetensors((fs::path(ga) / (std::string(name) + ".safetensors")).string(), f);
    if (std::string(name) == "a") {
      write_safetensors((fs::path(gb) / "a.safetensors").string(), f);
    }
  }
  write_file((fs::path(ga) / "config.json").string(),
             R"({"files": {"init": "init.safetensors", "batches": "batches.safetensors"}})");
  EXPECT_EQ(compare(ga + " " + gb), 1) << out_ << err_;
  EXPECT_EQ(out_.find("all 1"), std::string::npos) << out_;
  EXPECT_NE(out_.find("3 of 6 files of A missing from B, the first b.safetensors"),
            std::string::npos)
      << out_;
  EXPECT_EQ(compare(ga + " " + gb + " --subset"), 0) << out_ << err_;
  EXPECT_NE(out_.find("all 1 compared files within tolerance (of A's 6)"), std::string::npos)
      << out_;
  // Only the inputs missing: within tolerance.
  for (const char* name : {"b", "c", "d"}) {
    fs::copy_file(fs::path(ga) / (std::string(name) + ".safetensors"),
                  fs::path(gb) / (std::string(name) + ".safetensors"));
  }
  EXPECT_EQ(compare(ga + " " + gb), 0) << out_ << err_;
}

// --- kernel-call dumps (issue 33, item 4) --------------------------------------------------------

// Kernel-call dumps of step `step` of a 2-step tiny golden run in `precision`, by path.
class CompareDumps : public CompareHardening {
 protected:
  std::string dump(const std::string& name, const std::string& precision = "fp32", int step = 1) {
    const std::string out = dir_.file(name);
    const CommandResult r =
        run_reftrain("golden run --preset tiny --steps 2 --precision " + precision +
                     " --dump-step " + std::to_string(step) + " --out " + out);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return out + "/step-" + std::to_string(step) + ".safetensors";
  }
  // A copy of `from` without the tensors whose names `drop` accepts.
  std::string without(const std::string& from, const std::string& to,
                      const std::function<bool(const std::string&)>& drop) {
    SafetensorsFile f = read_safetensors(from);
    for (auto it = f.tensors.begin(); it != f.tensors.end();) {
      it = drop(it->first) ? f.tensors.erase(it) : std::next(it);
    }
    write_safetensors(dir_.file(to), f);
    return dir_.file(to);
  }
};

// A dump with no tensors was "no call diverged: 60 calls within tolerance", exit 0; --subset
// with no tensor in common "0 of 0 tensors within tolerance", exit 0.
TEST_F(CompareDumps, NothingComparedIsNeverAPass) {
  const std::string a = dump("a");
  const std::string empty =
      without(a, "empty.safetensors", [](const std::string&) { return true; });
  EXPECT_EQ(compare("--first-divergence " + a + " " + empty), 2) << out_;
  EXPECT_NE(err_.find("nothing was compared"), std::string::npos) << err_;
  EXPECT_EQ(compare("--subset " + a + " " + empty), 2) << out_;
  EXPECT_NE(err_.find("have no tensor in common: nothing was compared"), std::string::npos) << err_;
}

// A call missing from B was skipped silently: the next call diverged (its inputs came from the
// skipped one) and the advice blamed an earlier step.
TEST_F(CompareDumps, SkippedCallsAreNamed) {
  const std::string a = dump("a");
  const SafetensorsFile f = read_safetensors(a);
  const std::string first = Json::parse(f.metadata.at("calls")).at(0).get<std::string>();
  const std::string b = without(a, "b.safetensors",
                                [&](const std::string& n) { return n.rfind(first + ".", 0) == 0; });
  EXPECT_EQ(compare("--first-divergence " + a + " " + b), 1) << out_ << err_;
  EXPECT_NE(out_.find("not compared: call " + first + " (B lacks its tensors)"), std::string::npos)
      << out_;
  EXPECT_NE(out_.find("calls were not compared (B lacks their tensors; the first " + first + ")"),
            std::string::npos)
      << out_;
}

// B's step and kind were not checked: an fp32 dump against a mixed one gave exit 1 and advice.
TEST_F(CompareDumps, DumpsOfAnotherStepOrKindAreNotCompared) {
  const std::string a = dump("a"), mixed = dump("m", "mixed"), step2 = dump("s", "fp32", 2);
  EXPECT_EQ(compare("--first-divergence " + a + " " + mixed), 2) << out_;
  EXPECT_NE(err_.find("the dumps ran other calls"), std::string::npos) << err_;
  EXPECT_EQ(compare("--first-divergence " + a + " " + step2), 2) << out_;
  EXPECT_NE(err_.find("is step 1's dump but"), std::string::npos) << err_;
  // A trace given to --first-divergence was a "corrupt safetensors header".
  const std::string t = trace("t.jsonl");
  EXPECT_EQ(compare("--first-divergence " + t + " " + t), 2) << out_;
  EXPECT_NE(err_.find(t + " is a trace; --first-divergence compares two kernel-call dumps"),
            std::string::npos)
      << err_;
  EXPECT_EQ(compare("--first-divergence " + a + " " + a), 0) << out_ << err_;
}

}  // namespace
}  // namespace reftrain::testing
