// `reftrain compare` against inputs that used to make it report "within tolerance" for
// comparisons that compared nothing meaningful (docs/hardening.md): NaN or negative tolerances,
// runs of different kinds, a result directory missing most files, --steps past the trace.
#include <gtest/gtest.h>

#include <filesystem>
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

}  // namespace
}  // namespace reftrain::testing
