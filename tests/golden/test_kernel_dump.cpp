// The kernel-call dump (`reftrain golden run --dump-step K`, docs/golden-format.md): it records
// every call of step K by name in execution order, with its inputs and outputs, and changes no
// other file of the run; `reftrain compare --first-divergence` names the first call whose
// outputs are past tolerance, and says whether its inputs were within it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/formats/trace.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::TempDir;

std::string run_golden(const TempDir& dir, const std::string& name, const std::string& args) {
  const testing::CommandResult r =
      testing::run_reftrain("golden run --steps 2 --out " + dir.file(name) + " " + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir.file(name);
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> calls_of(const SafetensorsFile& f) {
  return Json::parse(f.metadata.at("calls")).get<std::vector<std::string>>();
}

// The first call of `kernel` in `layer`.
std::string call_of(const SafetensorsFile& f, const std::string& layer_kernel) {
  const std::vector<std::string> calls = calls_of(f);
  const auto it = std::find_if(calls.begin(), calls.end(), [&](const std::string& c) {
    return c.size() > layer_kernel.size() && c.substr(5) == layer_kernel;
  });
  return it == calls.end() ? "" : *it;
}

TEST(KernelDump, RecordsEveryCallOfTheStepAndChangesNoOtherFile) {
  TempDir dir;
  const std::string args = "--preset llama-tiny --precision mixed --optimizer adamw8bit";
  const std::string plain = run_golden(dir, "plain", args);
  const std::string dumped = run_golden(dir, "dumped", args + " --dump-step 2");
  for (const char* f : {"config.json", "init.safetensors", "batches.safetensors", "trace.jsonl",
                        "debug_state.safetensors"}) {
    EXPECT_EQ(bytes_of(plain + "/" + f), bytes_of(dumped + "/" + f)) << f;
  }
  const SafetensorsFile d = read_safetensors(dumped + "/step-2.safetensors");
  EXPECT_EQ(d.metadata.at("format"), "reftrain-kernel-dump");
  const std::vector<std::string> calls = calls_of(d);
  ASSERT_GT(calls.size(), 80u);
  EXPECT_EQ(calls.front(), "0000.embed.token_embed_forward");
  EXPECT_EQ(calls.back().substr(4), ".optim.cast_f32_to_f16");
  // An accumulating call has its before- and after-values; the 8-bit codes are bytes.
  const std::string rms = "0001.h0.rmsnorm_forward.";
  EXPECT_TRUE(d.tensors.count(rms + "x") && d.tensors.count(rms + "out"));
  const std::string head = call_of(d, "head.linear_backward_data_f16") + ".";
  EXPECT_TRUE(d.tensors.count(head + "dinp_in") && d.tensors.count(head + "dinp")) << head;
  bool codes = false;
  for (const auto& [name, t] : d.tensors) codes |= name.find(".m_packed") != std::string::npos;
  EXPECT_TRUE(codes);
  EXPECT_EQ(testing::run_reftrain("golden run --preset tiny --steps 2 --dump-step 3 --out " +
                                  dir.file("x"))
                .exit_code,
            2);
}

// Adds `delta` to every element of an F32 tensor.
void shift(SafetensorsFile& f, const std::string& name, float delta) {
  SafeTensor& t = f.tensors.at(name);
  for (size_t i = 0; i < t.numel(); ++i) {
    float v;
    std::memcpy(&v, t.bytes.data() + 4 * i, 4);
    v += delta;
    std::memcpy(t.bytes.data() + 4 * i, &v, 4);
  }
}

TEST(KernelDump, FirstDivergenceNamesTheCallWhoseOutputsDiverged) {
  TempDir dir;
  const std::string a = run_golden(dir, "g", "--preset tiny --dump-step 1") + "/step-1.safetensors";
  SafetensorsFile f = read_safetensors(a);
  const std::string gelu = call_of(f, "h0.gelu_forward");
  ASSERT_FALSE(gelu.empty());
  const auto first = [&](const std::string& b) {
    const testing::CommandResult r =
        testing::run_reftrain("compare --first-divergence --json " + a + " " + b);
    return std::make_pair(r.exit_code, r.exit_code == 2 ? Json() : Json::parse(r.output));
  };
  EXPECT_EQ(first(a).first, 0);
  shift(f, gelu + ".out", 0.01f);  // a wrong gelu: its input as given, its output off
  write_safetensors(dir.file("bug.safetensors"), f);
  const auto [code, j] = first(dir.file("bug.safetensors"));
  EXPECT_EQ(code, 1);
  EXPECT_EQ(j.at("call"), gelu);
  EXPECT_EQ(j.at("inputs_within"), true);
  shift(f, gelu + ".x", 0.01f);  // now its input was off already: an earlier divergence
  write_safetensors(dir.file("late.safetensors"), f);
  EXPECT_EQ(first(dir.file("late.safetensors")).second.at("inputs_within"), false);
  EXPECT_EQ(
      testing::run_reftrain("compare --first-divergence " + a + " " + dir.file("g/trace.jsonl"))
          .exit_code,
      2);
}

}  // namespace
}  // namespace reftrain
