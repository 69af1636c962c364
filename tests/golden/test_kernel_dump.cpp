// The kernel-call dump (`reftrain golden run --dump-step K`, docs/golden-format.md): it records
// every call of step K by name in execution order, with its inputs and outputs, and changes no
// other file of the run; `reftrain compare --first-divergence` names the first call whose
// outputs are past tolerance, and says whether its inputs were within it. Plain `compare` of
// two dumps from the two attention forms (fused: no `att`; materialised: `att` at every
// attention call) compares what both hold and lists the rest; any other one-sided tensor is
// still a mismatch.
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
#include "core/golden/golden_run.h"
#include "core/train/config.h"
#include "core/train/data.h"
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

// `golden run` has no --attention: the materialised form's run, through the library, as the
// command would write it with --steps 2 --dump-step 1.
std::string materialised_run(const TempDir& dir, const std::string& preset) {
  const Preset& p = find_preset(preset);
  TrainConfig train = p.train;
  train.steps = 2;
  train.attention = AttentionKind::kMaterialised;
  write_golden_run(p, train, load_fortunes(), dir.file("mat-" + preset), 1);
  return dir.file("mat-" + preset);
}

std::vector<std::string> att_tensors(const SafetensorsFile& f) {
  std::vector<std::string> v;
  for (const auto& kv : f.tensors) {
    if (kv.first.size() > 4 && kv.first.substr(kv.first.size() - 4) == ".att")
      v.push_back(kv.first);
  }
  return v;
}

TEST(KernelDump, AttentionFormsCompareWhatBothHoldAndListTheProbabilities) {
  TempDir dir;
  const std::string fused = run_golden(dir, "fused", "--preset tiny --dump-step 1");
  const std::string mat = materialised_run(dir, "tiny");
  const SafetensorsFile f = read_safetensors(fused + "/step-1.safetensors");
  const SafetensorsFile m = read_safetensors(mat + "/step-1.safetensors");
  // What the two forms record: the same calls; `att` (forward and backward, both layers of
  // tiny) only where the probabilities exist, and no log-sum-exp either way.
  EXPECT_EQ(calls_of(f), calls_of(m));
  EXPECT_TRUE(att_tensors(f).empty());
  const std::vector<std::string> att = att_tensors(m);
  ASSERT_EQ(att.size(), 4u);
  EXPECT_EQ(att[0], call_of(m, "h0.attention_forward") + ".att");
  for (const auto& kv : f.tensors) EXPECT_TRUE(m.tensors.count(kv.first)) << kv.first;
  for (const SafetensorsFile* d : {&f, &m}) {
    for (const auto& kv : d->tensors) EXPECT_EQ(kv.first.find(".lse"), std::string::npos);
  }
  for (const auto& [a, b] : {std::pair{fused, mat}, std::pair{mat, fused}}) {
    const testing::CommandResult r = testing::run_reftrain(
        "compare --quiet " + a + "/step-1.safetensors " + b + "/step-1.safetensors");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::string side = a == fused ? " (only in B)" : " (only in A)";
    for (const std::string& n : att) {
      EXPECT_NE(r.output.find("not compared: " + n + side), std::string::npos) << r.output;
    }
    EXPECT_NE(r.output.find(std::to_string(f.tensors.size()) + " of " +
                            std::to_string(f.tensors.size()) + " tensors within tolerance"),
              std::string::npos)
        << r.output;
  }
  // Two run directories holding the dumps, and --json.
  const testing::CommandResult r = testing::run_reftrain("compare --json " + fused + " " + mat);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json j = Json::parse(r.output);
  bool listed = false;
  for (const Json& file : j.at("files")) {
    if (!file.contains("attention")) continue;
    listed = true;
    EXPECT_EQ(file.at("attention").at("b"), "materialised");
    EXPECT_EQ(file.at("not_compared").size(), att.size());
  }
  EXPECT_TRUE(listed) << r.output;
}

// Only a whole form's difference is forgiven: a dump that lacks another tensor, or the
// probabilities of one attention call but not the others, still does not match (exit 2).
TEST(KernelDump, AnyOtherOneSidedTensorIsStillAMismatch) {
  TempDir dir;
  const std::string fused =
      run_golden(dir, "fused", "--preset tiny --dump-step 1") + "/step-1.safetensors";
  const std::string mat = materialised_run(dir, "tiny") + "/step-1.safetensors";
  const auto compare = [](const std::string& a, const std::string& b) {
    return testing::run_reftrain("compare --quiet " + a + " " + b);
  };
  SafetensorsFile f = read_safetensors(fused);
  const std::string ln = call_of(f, "h0.layernorm_forward") + ".out";
  ASSERT_EQ(f.tensors.erase(ln), 1u);
  write_safetensors(dir.file("no-ln.safetensors"), f);
  testing::CommandResult r = compare(mat, dir.file("no-ln.safetensors"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("lacks tensor '" + ln + "'"), std::string::npos) << r.output;
  EXPECT_EQ(compare(dir.file("no-ln.safetensors"), mat).exit_code, 2);
  SafetensorsFile m = read_safetensors(mat);
  const std::string att = call_of(m, "h1.attention_forward") + ".att";
  ASSERT_EQ(m.tensors.erase(att), 1u);
  write_safetensors(dir.file("no-att.safetensors"), m);
  for (const std::string& other : {fused, mat}) {
    r = compare(other, dir.file("no-att.safetensors"));
    EXPECT_EQ(r.exit_code, 2) << other << "\n" << r.output;
  }
  EXPECT_EQ(compare(fused, mat).exit_code, 0);
}

}  // namespace
}  // namespace reftrain
