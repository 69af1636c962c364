// Golden artifacts (docs/golden-format.md): a golden run directory holds what it claims and is
// the same bytes for any thread count; every kernel fixture, recomputed by reftrain's scalar
// reference, matches its own file bit for bit, and the float64 recomputation stays within the
// fixture's tolerance; the files load with json and numpy alone; and PyTorch, replaying a run
// from the files only (tests/torch/replay.py), passes `reftrain compare`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/formats/trace.h"
#include "core/golden/compare.h"
#include "core/golden/golden_kernels.h"
#include "core/model/model.h"
#include "core/train/config.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::TempDir;

const std::string kText = REFTRAIN_SOURCE_DIR "/README.md";  // any text; both runs read the same

// `data` is a --data file, or "" for the default corpus.
std::string golden_run(const TempDir& dir, const std::string& name, const std::string& args,
                       const std::string& env = "", const std::string& data = kText) {
  const std::string out = dir.file(name);
  const std::string data_arg = data.empty() ? "" : " --data " + data;
  const testing::CommandResult r = testing::run_command(env + " " REFTRAIN_BIN " golden run" +
                                                        data_arg + " --out " + out + " " + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return out;
}

std::string torch_python(const std::string& script_and_args) {
  return std::string(REFTRAIN_TORCH_PYTHON) + " " REFTRAIN_SOURCE_DIR "/tests/torch/" +
         script_and_args;
}

TEST(GoldenRun, WritesEveryFileAndATraceWithoutWallTimeOrBuild) {
  TempDir dir;
  const std::string out = golden_run(dir, "run", "--preset llama-tiny --steps 4");
  for (const char* f : {"config.json", "init.safetensors", "batches.safetensors", "trace.jsonl",
                        "debug_state.safetensors", "build.json"}) {
    EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
  }
  const Trace t = reftrain::read_trace(out + "/trace.jsonl");
  ASSERT_EQ(t.steps.size(), 4u);
  const Json config = Json::parse(testing::read_file(out + "/config.json"));
  EXPECT_FALSE(config.contains("build"));
  EXPECT_FALSE(t.run.contains("build"));
  EXPECT_TRUE(Json::parse(testing::read_file(out + "/build.json")).contains("build"));
  for (size_t k = 0; k < t.steps.size(); ++k) {
    std::vector<std::string> keys;
    for (const auto& kv : t.steps[k].items()) keys.push_back(kv.key());
    EXPECT_EQ(keys, (std::vector<std::string>{"type", "step", "loss", "z_loss", "grad_norm", "clip",
                                              "lr"}));
    EXPECT_EQ(t.steps[k].at("lr"), config.at("schedule").at("lrs").at(k));
    // llama-tiny has z-loss 1e-4: a positive part, far below the loss.
    const double z = t.steps[k].at("z_loss"), loss = t.steps[k].at("loss");
    EXPECT_GT(z, 0.0);
    EXPECT_LT(z, 1e-2 * loss);
  }
  EXPECT_EQ(config.at("model").at("rope").at("convention"), "rotate_half");
}

// Everything but build.json is a function of the command line: 1 and 2 threads give the same
// bytes (the cross-build test extends this to the portable build).
TEST(GoldenRun, SameBytesForAnyThreadCount) {
  TempDir dir;
  for (const char* precision : {"fp32", "mixed"}) {
    const std::string args = std::string("--preset tiny --steps 3 --precision ") + precision;
    const std::string a = golden_run(dir, std::string("a-") + precision, args, "OMP_NUM_THREADS=1");
    const std::string b = golden_run(dir, std::string("b-") + precision, args, "OMP_NUM_THREADS=2");
    for (const char* f : {"config.json", "init.safetensors", "batches.safetensors", "trace.jsonl",
                          "debug_state.safetensors"}) {
      EXPECT_EQ(testing::read_file(a + "/" + f), testing::read_file(b + "/" + f))
          << precision << " " << f;
    }
  }
}

// init.safetensors is the model's initial weights by name, with the layout a GPU needs to lay
// them out in one buffer; debug_state's gradients are those of step 1's batch at those weights.
TEST(GoldenRun, InitLayoutAndDebugStateAreTheModels) {
  TempDir dir;
  const std::string out = golden_run(dir, "run", "--preset tiny --steps 2 --seed 5");
  const SafetensorsFile init = read_safetensors(out + "/init.safetensors");
  const Preset& p = find_preset("tiny");
  std::unique_ptr<Model> model = make_model(p.model, ModelOptions{p.train.batch, p.train.seq});
  model->init_weights(5);
  const Json layout = Json::parse(init.metadata.at("layout"));
  ASSERT_EQ(layout.size(), model->layout().tensors().size());
  for (size_t i = 0; i < layout.size(); ++i) {
    const ParamTensor& t = model->layout().tensors()[i];
    EXPECT_EQ(layout[i].at("name"), t.name);
    EXPECT_EQ(layout[i].at("offset"), t.offset);
    EXPECT_EQ(layout[i].at("decay"), t.decay);
    const std::vector<float> w = init.get(t.name).as<float>();
    EXPECT_TRUE(std::equal(w.begin(), w.end(), model->weights() + t.offset)) << t.name;
  }
  const SafetensorsFile batches = read_safetensors(out + "/batches.safetensors");
  const std::vector<int32_t> x = batches.get("inputs").as<int32_t>();
  const std::vector<int32_t> y = batches.get("targets").as<int32_t>();
  const float loss = model->forward(x.data(), y.data(), p.train.batch, p.train.seq);
  model->backward();
  const SafetensorsFile debug = read_safetensors(out + "/debug_state.safetensors");
  EXPECT_EQ(debug.get("loss").as<float>()[0], loss);
  EXPECT_EQ(reftrain::read_trace(out + "/trace.jsonl").steps[0].at("loss").get<float>(), loss);
  for (const ParamTensor& t : model->layout().tensors()) {
    const std::vector<float> g = debug.get("grad." + t.name).as<float>();
    EXPECT_TRUE(std::equal(g.begin(), g.end(), model->grads() + t.offset)) << t.name;
  }
}

TEST(GoldenCli, BadArgumentsAreUsageErrorsAndAdamW8bitRuns) {
  TempDir dir;
  const std::string out = " --out " + dir.file("x");
  EXPECT_EQ(testing::run_reftrain("golden run --preset nope" + out).exit_code, 2);
  EXPECT_EQ(testing::run_reftrain("golden run --preset tiny").exit_code, 2);  // no --out
  EXPECT_EQ(testing::run_reftrain("golden run --preset tiny --steps 0" + out).exit_code, 2);
  EXPECT_EQ(testing::run_reftrain("golden run --preset tiny --seed -1" + out).exit_code, 2);
  EXPECT_EQ(
      testing::run_reftrain("golden run --preset tiny --data " + dir.file("none") + out).exit_code,
      1);
  EXPECT_EQ(testing::run_reftrain("golden").exit_code, 2);
  const std::string eight =
      golden_run(dir, "eight", "--preset tiny --steps 2 --optimizer adamw8bit");
  EXPECT_EQ(reftrain::read_trace(eight + "/trace.jsonl").steps.size(), 2u);
  // The replay covers adamw only, and says so.
  const testing::CommandResult r =
      testing::run_command(torch_python("replay.py " + eight + " --out " + dir.file("r")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("adamw runs only"), std::string::npos) << r.output;
}

class GoldenKernels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const testing::CommandResult r =
        testing::run_reftrain("golden kernels --out " + dir_->file("k"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static SafetensorsFile fixture(const KernelSpec& k) {
    return read_safetensors(dir_->file("k/" + k.name + ".safetensors"));
  }
  static TempDir* dir_;
};
TempDir* GoldenKernels::dir_ = nullptr;

TEST_F(GoldenKernels, AwkwardSizesAreNotMultiplesOfFour) {
  const KernelDims d = kernel_dims("awkward");
  for (int v : {d.B, d.T, d.C, d.C / d.NH, 3 * d.C, d.F, d.Vp, d.N(), d.n})
    EXPECT_NE(v % 4, 0) << v;
  EXPECT_EQ((d.C / d.NH) % 2, 0);  // RoPE needs an even head size
}

TEST_F(GoldenKernels, EveryFixtureRecomputesBitExactly) {
  size_t outputs = 0;
  for (const KernelSpec& k : golden_kernels()) {
    const SafetensorsFile f = fixture(k);
    for (const std::string& c : k.cases) {
      const SafetensorsFile again = recompute_f32(k, f, c);
      ASSERT_FALSE(again.tensors.empty()) << k.name;
      for (const auto& [name, t] : again.tensors) {
        EXPECT_EQ(f.get(name).bytes, t.bytes) << k.name << " " << name;
        ++outputs;
      }
    }
  }
  EXPECT_GE(outputs, 100u);
}

// The fixture's tolerance must admit an exact evaluation: float64 on the same inputs, compared
// with the manifest's own tolerance (docs/golden-format.md prints the share used).
TEST_F(GoldenKernels, Float64ReferenceIsWithinTheStatedTolerance) {
  double worst = 0;
  std::string worst_name;
  for (const KernelSpec& k : golden_kernels()) {
    if (!k.run_f64) continue;
    const SafetensorsFile f = fixture(k);
    for (const std::string& c : k.cases) {
      for (const auto& [name, exact] : recompute_f64(k, f, c).tensors) {
        const Tolerance& tol = k.tolerances.at(name.substr(c.size() + 1));
        const TensorDiff d = compare_tensor(name, exact, f.get(name), tol);
        EXPECT_TRUE(d.pass) << k.name << " " << name << " uses " << 100 * d.used << "%";
        if (d.used > worst) worst = d.used, worst_name = k.name + " " + name;
      }
    }
  }
  std::printf("float64 vs the f32 fixtures: worst %s uses %.2g%% of its tolerance\n",
              worst_name.c_str(), 100 * worst);
}

TEST_F(GoldenKernels, ManifestNamesEveryKernelWithTwinBindingsAndTolerances) {
  const Json m = Json::parse(testing::read_file(dir_->file("k/manifest.json")));
  ASSERT_EQ(m.at("kernels").size(), golden_kernels().size());
  for (const Json& k : m.at("kernels")) {
    SCOPED_TRACE(k.at("name").get<std::string>());
    EXPECT_TRUE(std::filesystem::exists(dir_->file("k/" + k.at("file").get<std::string>())));
    // A kernel no GPU study has (gelu_erf) names no study file; it still has our WGSL twin.
    const std::string name = k.at("name");
    EXPECT_TRUE(!k.at("twin").at("file").get<std::string>().empty() ||
                !kernel_record(name).wgsl.empty());
    EXPECT_FALSE(k.at("twin").at("entry").get<std::string>().empty());
    for (const Json& b : k.at("bindings")) {
      const std::string role = b.at("role");
      if (role == "out" || role == "inout") {
        EXPECT_TRUE(k.at("tolerances").contains(b.at("name"))) << b.dump();
      }
    }
    EXPECT_TRUE(k.at("cases").contains("small"));
    EXPECT_TRUE(k.at("cases").contains("awkward"));
  }
}

TEST(GoldenKernelsArch, OneFamilyLeavesTheOtherOut) {
  TempDir dir;
  ASSERT_EQ(testing::run_reftrain("golden kernels --arch gpt2 --out " + dir.file("g")).exit_code,
            0);
  EXPECT_TRUE(std::filesystem::exists(dir.file("g/layernorm_forward.safetensors")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("g/linear_forward.safetensors")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("g/rope_forward.safetensors")));
  EXPECT_EQ(testing::run_reftrain("golden kernels --arch bert --out " + dir.file("b")).exit_code,
            2);
}

const KernelSpec& golden_kernel(const std::string& name) {
  const std::vector<KernelSpec>& all = golden_kernels();
  const auto it =
      std::find_if(all.begin(), all.end(), [&](const KernelSpec& k) { return k.name == name; });
  if (it == all.end()) throw std::invalid_argument("no golden kernel " + name);
  return *it;
}

// `golden kernels --scale large`: one case, "large", at C = 768 and T = 1024, and a manifest
// that says so. Through the library for two kernels: the whole directory is ~0.5 GB and ~12 s.
TEST(GoldenKernelsLarge, ManifestStatesTheScaleAndTheTensorsHaveItsShapes) {
  Json entries = Json::array();
  for (const char* name : {"embed_forward", "attention_forward"}) {
    const KernelSpec& k = golden_kernel(name);
    SafetensorsFile f = make_kernel_fixture(k, kGoldenKernelSeed, FixtureScale::kLarge);
    entries.push_back(kernel_manifest(k, f, kGoldenKernelSeed, FixtureScale::kLarge));
  }
  const Json m = kernels_manifest("all", kGoldenKernelSeed, FixtureScale::kLarge, entries);
  EXPECT_EQ(m.at("scale"), "large");
  ASSERT_EQ(m.at("dims").size(), 1u);
  const Json& d = m.at("dims").at("large");
  EXPECT_EQ(d.at("C"), 768);
  EXPECT_EQ(d.at("T"), 1024);
  EXPECT_EQ(d.at("hs"), 64);
  EXPECT_NE(d.at("note").get<std::string>().find("50257"), std::string::npos);  // the vocab
  const int64_t B = d.at("B"), T = d.at("T"), C = d.at("C"), NH = d.at("NH"), Vp = d.at("Vp"),
                maxT = d.at("maxT");
  using Shape = std::vector<int64_t>;
  const std::vector<std::pair<std::string, std::map<std::string, Shape>>> want = {
      {"embed_forward",
       {{"tokens", {B, T}}, {"wte", {Vp, C}}, {"wpe", {maxT, C}}, {"out", {B, T, C}}}},
      {"attention_forward", {{"qkv", {B, T, 3 * C}}, {"out", {B, T, C}}, {"att", {B, NH, T, T}}}}};
  for (size_t i = 0; i < want.size(); ++i) {
    const Json& entry = m.at("kernels").at(i);
    SCOPED_TRACE(entry.at("name").get<std::string>());
    EXPECT_EQ(entry.at("name"), want[i].first);
    ASSERT_EQ(entry.at("cases").size(), 1u);
    const Json& c = entry.at("cases").at("large");
    EXPECT_EQ(c.at("params").at("C"), 768);
    EXPECT_EQ(c.at("params").at("T"), 1024);
    ASSERT_EQ(c.at("tensors").size(), want[i].second.size());
    for (const auto& [tensor, shape] : want[i].second) {
      EXPECT_EQ(c.at("tensors").at(tensor).at("shape").get<Shape>(), shape) << tensor;
    }
    for (const auto& [output, error] : c.at("f32_vs_f64").items()) {
      EXPECT_LT(error.at("used").get<double>(), 1e-2) << output;
    }
  }
}

// The small scale is the default and its manifest names no scale: its bytes are pinned
// (GoldenBytes).
TEST(GoldenKernelsLarge, SmallScaleNamesNoScaleAndOthersAreUsageErrors) {
  const Json small =
      kernels_manifest("all", kGoldenKernelSeed, FixtureScale::kSmall, Json::array());
  EXPECT_FALSE(small.contains("scale"));
  EXPECT_EQ(small.at("dims").size(), 2u);
  EXPECT_TRUE(small.at("dims").contains("small") && small.at("dims").contains("awkward"));
  EXPECT_EQ(fixture_cases(golden_kernel("adamw_update"), FixtureScale::kSmall),
            (std::vector<std::string>{"small", "awkward", "nonfinite"}));
  TempDir dir;
  EXPECT_EQ(testing::run_reftrain("golden kernels --scale huge --out " + dir.file("h")).exit_code,
            2);
}

// The json + numpy reader (no safetensors package, no torch): manifest and files agree, the
// layout is consistent, and numpy float32 recomputes 30 kernels within the manifest's tolerances.
TEST(GoldenFiles, LoadWithJsonAndNumpyOnly) {
  TempDir dir;
  ASSERT_EQ(testing::run_reftrain("golden kernels --out " + dir.file("k")).exit_code, 0);
  const std::string g = golden_run(dir, "g", "--preset tiny --steps 3");
  const std::string l = golden_run(dir, "l", "--preset llama-tiny --steps 3 --precision mixed");
  // torch and the project's safetensors_io are made unimportable: the reader must not need them.
  const std::string cmd = std::string(REFTRAIN_TORCH_PYTHON) +
                          " -c \"import sys, runpy; sys.modules['torch'] = None; "
                          "sys.modules['safetensors_io'] = None; sys.argv = ['golden_fixtures.py', "
                          "'--kernels', '" +
                          dir.file("k") + "', '--run', '" + g + "', '--run', '" + l +
                          "']; runpy.run_path('" REFTRAIN_SOURCE_DIR
                          "/tests/torch/golden_fixtures.py', run_name='__main__')\"";
  const testing::CommandResult r = testing::run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  EXPECT_NE(r.output.find("GOLDEN FIXTURES PASSED"), std::string::npos) << r.output;
}

// --- the PyTorch replay -----------------------------------------------------------------------

struct ReplayCase {
  const char* preset;
  const char* precision;
};

void PrintTo(const ReplayCase& c, std::ostream* os) {
  *os << c.preset << "/" << c.precision;
}

class GoldenReplay : public ::testing::TestWithParam<ReplayCase> {};

// 50 steps (the parity gate) replayed in float32 PyTorch on the CPU from the golden files alone,
// on the default corpus (Debian's fortunes, fixed content) as in docs/parity.md. Not on README.md:
// `tiny` at lr 3e-3 amplifies rounding at its loss spikes, and where a spike falls depends on the
// text: after README edits a spike at step 50 took the drift to 1.8e-4.
// Gate 1e-5 relative loss drift per step: the replay measures at most 2.1e-6 here (llama-tiny
// mixed; 1.7e-7 in fp32; docs/parity.md), so 5x headroom, 5000x tighter than the 5 % gate. The
// debug state is held to its own NMSE 1e-9 (the replay measures <= 3e-13).
TEST_P(GoldenReplay, PassesCompare) {
  TempDir dir;
  const std::string golden = golden_run(dir, "golden",
                                        std::string("--preset ") + GetParam().preset +
                                            " --steps 50 --precision " + GetParam().precision,
                                        "", "");
  const std::string cmd = torch_python("replay.py " + golden + " --out " + dir.file("replay"));
  const testing::CommandResult r = testing::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  const testing::CommandResult c =
      testing::run_reftrain("compare " + golden + " " + dir.file("replay") + " --max-drift 1e-5");
  EXPECT_EQ(c.exit_code, 0) << c.output;
  const size_t at = c.output.find("max drift");
  std::printf("%s %s: %s", GetParam().preset, GetParam().precision,
              c.output.substr(at, c.output.find('\n', at) - at + 1).c_str());
}

INSTANTIATE_TEST_SUITE_P(Families, GoldenReplay,
                         ::testing::Values(ReplayCase{"tiny", "fp32"}, ReplayCase{"tiny", "mixed"},
                                           ReplayCase{"llama-tiny", "fp32"},
                                           ReplayCase{"llama-tiny", "mixed"}),
                         [](const ::testing::TestParamInfo<ReplayCase>& info) {
                           std::string name =
                               std::string(info.param.preset) + "_" + info.param.precision;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The gate can fail: step 1 of the fp32 golden run against the replay of the mixed-precision
// one (fp16-rounded matmul weights move the gradients by NMSE ~1e-7, 100x the gate).
TEST(GoldenReplayGate, TellsFp32FromMixedPrecision) {
  TempDir dir;
  const std::string fp32 = golden_run(dir, "fp32", "--preset llama-tiny --steps 2");
  const std::string mixed =
      golden_run(dir, "mixed", "--preset llama-tiny --steps 2 --precision mixed");
  const std::string replay = dir.file("r");
  ASSERT_EQ(testing::run_command(torch_python("replay.py " + mixed + " --out " + replay)).exit_code,
            0);
  EXPECT_EQ(testing::run_reftrain("compare " + mixed + " " + replay).exit_code, 0);
  const testing::CommandResult c = testing::run_reftrain(
      "compare " + fp32 + "/debug_state.safetensors " + replay + "/debug_state.safetensors");
  EXPECT_EQ(c.exit_code, 1) << c.output;
}

}  // namespace
}  // namespace reftrain
