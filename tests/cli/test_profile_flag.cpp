// `train --profile`: the per-kernel table (core/model/kernel_profile.h). The table's arithmetic
// on known times; and, as a user sees it, every kernel of both families listed with the rest of
// the step, while the run itself (its trace's losses and norms) stays bit-identical to the same
// run without the flag.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/model/kernel_profile.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

std::string printed(const KernelProfile& p, int steps, double step_ms) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  p.print(out, steps, step_ms);
  std::fclose(out);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

TEST(KernelProfile, SumsCallsPerNameAndSortsSlowestFirst) {
  KernelProfile p;
  p.add("gelu_forward", 1.0);
  p.add("linear_forward 8x4->16", 3.0);
  p.add("gelu_forward", 1.5);
  const std::vector<KernelProfile::Entry> e = p.sorted();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].name, "linear_forward 8x4->16");
  EXPECT_EQ(e[1].name, "gelu_forward");
  EXPECT_EQ(e[1].calls, 2);
  EXPECT_DOUBLE_EQ(e[1].ms, 2.5);
  EXPECT_DOUBLE_EQ(p.total_ms(), 5.5);
  // Two steps of 5 ms: per step, linear 1.5 ms (30 %), gelu 1.25 ms in 1 call (25 %), the
  // kernels 2.75 ms, the rest 2.25 ms (45 %).
  const std::string t = printed(p, 2, 10.0);
  EXPECT_NE(t.find("profile: 2 steps"), std::string::npos) << t;
  EXPECT_NE(t.find("5.000 ms/step"), std::string::npos) << t;
  EXPECT_NE(t.find("linear_forward 8x4->16"), std::string::npos) << t;
  EXPECT_NE(t.find("     1.500   30.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("1.0      1.250   25.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("2.250   45.0%"), std::string::npos) << t;
  EXPECT_LT(t.find("linear_forward"), t.find("gelu_forward")) << t;
}

using ProfileFlag = LearnableTextTest;

// The trace's step lines without their wall time.
std::vector<json> steps_without_time(const std::string& trace) {
  std::vector<json> out;
  for (json j : read_trace(trace)) {
    if (j.value("type", "") != "step") continue;
    j.erase("ms");
    out.push_back(j);
  }
  return out;
}

TEST_F(ProfileFlag, ListsEveryKernelAndChangesNoBit) {
  const std::vector<std::pair<const char*, std::vector<const char*>>> families = {
      {"tiny", {"layernorm_forward", "gelu_backward", "embed_backward"}},
      {"llama-tiny", {"rmsnorm_backward", "rope_forward", "swiglu_backward"}}};
  for (const auto& [preset, own] : families) {
    SCOPED_TRACE(preset);
    const std::string base = std::string("train --preset ") + preset + " --steps 3 --threads 2 " +
                             "--val-every 0 --data " + text_ + " --trace ";
    const std::string plain = dir_.file(std::string(preset) + "-plain.jsonl");
    const std::string profiled = dir_.file(std::string(preset) + "-profiled.jsonl");
    ASSERT_EQ(run_reftrain(base + plain).exit_code, 0);
    const CommandResult r = run_reftrain(base + profiled + " --profile");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(steps_without_time(plain), steps_without_time(profiled));
    std::vector<const char*> wanted = {"profile: 2 steps",
                                       "linear_forward ",
                                       "linear_backward_data ",
                                       "linear_backward_weight ",
                                       "attention_forward",
                                       "attention_backward",
                                       "crossentropy_forward_backward",
                                       "zero (backward scratch)",
                                       "all kernels above",
                                       "rest of the step"};
    wanted.insert(wanted.end(), own.begin(), own.end());
    for (const char* name : wanted) EXPECT_NE(r.output.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace reftrain::testing
