// Checkpoints and exact resume, run as a user runs them: 40 steps straight against 20 steps, a
// stop, and 20 resumed (byte-identical traces and final checkpoints, for every family, precision
// and optimizer); the saving policy (--save-every, --keep, the save at the end); what a resumed
// run may and may not change; corrupt checkpoints; and the format as PyTorch reads it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/model/model.h"
#include "core/train/checkpoint.h"
#include "core/train/config.h"
#include "optim/adamw8bit.h"
#include "optim/optimizer.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

// The files of a run's --out directory: the best checkpoint's directory and the checkpoints of
// `steps`.
std::vector<std::string> ckpt_names(std::initializer_list<int> steps) {
  std::vector<std::string> names = {kBestDir};
  for (int s : steps) names.push_back(checkpoint_file_name(s));
  return names;
}

class CheckpointTest : public LearnableTextTest {
 protected:
  // `reftrain train --preset tiny --data TEXT ARGS`, which must succeed.
  void train(const std::string& args) {
    const CommandResult r = run_reftrain("train --preset tiny --data " + text_ + " " + args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  }
};

// --- exact resume ------------------------------------------------------------------------------

struct ResumeCase {
  const char* preset;
  const char* precision;
  const char* optimizer;
  int grad_accum = 1;  // --grad-accum: a step of K micro-batches, the data position K per step
};

void PrintTo(const ResumeCase& c, std::ostream* os) {
  *os << c.preset << "/" << c.precision << "/" << c.optimizer << "/K" << c.grad_accum;
}

class ExactResume : public CheckpointTest, public ::testing::WithParamInterface<ResumeCase> {};

// The run straight, and the same run stopped after step 20 (a checkpoint off the --save-every 7
// grid) and resumed for 20 more from the directory alone (the config and the data path come
// from the checkpoint) on another thread count: the traces are the same lines (wall time,
// memory and the resume marker aside) and the final checkpoints the same bytes — weights,
// optimizer state and metadata. Validation every 5 steps puts val lines on both sides of the stop.
TEST_P(ExactResume, FortyStraightEqualsTwentyThenTwentyResumed) {
  const ResumeCase c = GetParam();
  const std::string run = std::string("train --preset ") + c.preset + " --precision " +
                          c.precision + " --optimizer " + c.optimizer + " --grad-accum " +
                          std::to_string(c.grad_accum) +
                          " --steps 40 --val-every 5 --save-every 7 --data " + text_;
  const std::string straight = dir_.file("straight"), split = dir_.file("split");
  const std::string s_trace = dir_.file("s.jsonl"), r_trace = dir_.file("r.jsonl");
  ASSERT_EQ(run_reftrain(run + " --out " + straight + " --trace " + s_trace).exit_code, 0);
  const CommandResult first = run_reftrain(run + " --out " + split + " --trace " + r_trace +
                                           " --stop-after 20 --threads 2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("stopped after step 20 of 40"), std::string::npos) << first.output;
  EXPECT_EQ(files_in(split), ckpt_names({7, 14, 20}));
  const CommandResult second =
      run_reftrain("train --resume " + split + " --trace " + r_trace + " --threads 1");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(files_in(split), ckpt_names({7, 14, 20, 21, 28, 35, 40}));

  expect_same_trace(s_trace, r_trace);
  int resumes = 0, steps = 0;
  for (const json& j : read_trace(r_trace)) {
    resumes += j["type"] == "resume" && j["step"] == 20;
    steps += j["type"] == "step";
  }
  EXPECT_EQ(resumes, 1);
  EXPECT_EQ(steps, 40);  // not vacuous: the trace covers the whole run
  const std::string last = checkpoint_file_name(40);
  EXPECT_TRUE(read_file(fs::path(straight) / last) == read_file(fs::path(split) / last))
      << "the final checkpoints differ";
}

INSTANTIATE_TEST_SUITE_P(
    FamiliesPrecisionsOptimizers, ExactResume,
    ::testing::Values(
        ResumeCase{"tiny", "fp32", "adamw"}, ResumeCase{"tiny", "fp32", "adamw8bit"},
        ResumeCase{"tiny", "mixed", "adamw"}, ResumeCase{"tiny", "mixed", "adamw8bit"},
        ResumeCase{"llama-tiny", "fp32", "adamw"}, ResumeCase{"llama-tiny", "fp32", "adamw8bit"},
        ResumeCase{"llama-tiny", "mixed", "adamw"}, ResumeCase{"llama-tiny", "mixed", "adamw8bit"},
        ResumeCase{"tiny", "mixed", "adamw", 3}, ResumeCase{"llama-tiny", "fp32", "adamw8bit", 3},
        ResumeCase{"tiny", "bf16-pure", "adamw"}, ResumeCase{"llama-tiny", "bf16-pure", "adamw", 3},
        ResumeCase{"tiny", "bf16-kahan", "adamw"},
        ResumeCase{"llama-tiny", "bf16-kahan", "adamw", 3}));

// --- the saving policy -------------------------------------------------------------------------

TEST_F(CheckpointTest, SavesEveryNKeepsTheNewestK) {
  const std::string out = dir_.file("keep");
  train("--steps 12 --save-every 3 --keep 2 --out " + out);
  // No temporary or probe file is left behind either.
  EXPECT_EQ(files_in(out), ckpt_names({9, 12}));
}

TEST_F(CheckpointTest, SavesAtTheEndWithoutSaveEvery) {
  const std::string out = dir_.file("end");
  train("--steps 5 --out " + out);
  EXPECT_EQ(files_in(out), ckpt_names({5}));
  const Checkpoint c = read_checkpoint(out);
  EXPECT_EQ(c.meta.step, 5);
  EXPECT_EQ(c.meta.updates, 5);
  EXPECT_EQ(c.meta.preset, "tiny");
  EXPECT_EQ(c.meta.train.steps, 5);
  EXPECT_EQ(c.meta.train.lr, 3e-3f);  // bit-exact from the JSON config
  EXPECT_EQ(c.meta.data.kind, "text");
  EXPECT_EQ(c.meta.data.source, text_);
}

TEST_F(CheckpointTest, SavingFlagsNeedOut) {
  for (const char* flag : {"--save-every 2", "--keep 1", "--stop-after 2"}) {
    expect_user_error("train --preset tiny --steps 4 --data " + text_ + " " + flag, 2,
                      "needs --out DIR");
  }
  expect_user_error("train --preset tiny --data " + text_ + " --out ''", 2, "--out needs a path");
}

TEST_F(CheckpointTest, FreshRunRefusesADirectoryWithCheckpoints) {
  const std::string out = dir_.file("used");
  train("--steps 3 --out " + out);
  expect_user_error("train --preset tiny --steps 3 --data " + text_ + " --out " + out, 2,
                    "already holds checkpoints");
  EXPECT_EQ(files_in(out), ckpt_names({3}));  // untouched
}

// --- what a resumed run may change ---------------------------------------------------------------

TEST_F(CheckpointTest, ResumedRunKeepsItsConfiguration) {
  const std::string out = dir_.file("run");
  train("--steps 6 --stop-after 3 --out " + out);
  const std::string resume = "train --resume " + out;
  expect_user_error(resume + " --lr 0.1", 2, "--lr 0.1 conflicts with the checkpoint's 0.003");
  expect_user_error(resume + " --precision mixed", 2, "--precision \"mixed\" conflicts");
  expect_user_error(resume + " --optimizer adamw8bit", 2, "--optimizer");
  expect_user_error(resume + " --seed 7", 2, "--seed 7 conflicts");
  expect_user_error(resume + " --preset llama-tiny", 2, "--preset llama-tiny conflicts");
  expect_user_error(resume + " --init-from x.bin", 2, "--init-from conflicts with --resume");
  expect_user_error(resume + " --steps 3", 2, "not past the checkpoint's step 3");
  expect_user_error(resume + " --stop-after 2", 2, "--stop-after 2 is not past");
  // The same values are no conflict (the control), and the run finishes.
  const CommandResult r = run_reftrain(resume + " --lr 0.003 --precision fp32 --preset tiny");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_user_error(resume, 2, "at step 6, the end of its run; pass --steps N");
  // --steps extends the run: three more steps, saved at its new end.
  const CommandResult more = run_reftrain(resume + " --steps 9");
  ASSERT_EQ(more.exit_code, 0) << more.output;
  const Checkpoint c = read_checkpoint(out);
  EXPECT_EQ(c.meta.step, 9);
  EXPECT_EQ(c.meta.train.steps, 9);
}

TEST_F(CheckpointTest, ResumeChecksTheData) {
  const std::string out = dir_.file("run");
  train("--steps 4 --stop-after 2 --out " + out);
  // Moved, with the same bytes: found again with --data.
  const std::string moved = dir_.file("moved.txt");
  fs::rename(text_, moved);
  expect_user_error("train --resume " + out, 1, "does not exist");
  const CommandResult r = run_reftrain("train --resume " + out + " --data " + moved);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Other bytes: refused.
  write_file(moved, learnable_text() + "x");
  expect_user_error("train --resume " + dir_.file("run/ckpt-00000002.safetensors") + " --out " +
                        dir_.file("other") + " --data " + moved,
                    1, "is not the data the checkpoint was trained on");
}

TEST_F(CheckpointTest, ResumeRefusesAnotherRunsTrace) {
  const std::string out = dir_.file("run"), trace = dir_.file("other.jsonl");
  train("--steps 4 --stop-after 2 --out " + out);
  train("--steps 2 --seed 9 --trace " + trace);
  expect_user_error("train --resume " + out + " --trace " + trace, 1,
                    "is the trace of another run (its run line differs in \"seed\")");
}

TEST_F(CheckpointTest, ResumeRefusesAnOutDirectoryWithLaterCheckpoints) {
  const std::string out = dir_.file("run");
  train("--steps 6 --save-every 2 --out " + out);
  expect_user_error("train --resume " + out + "/" + checkpoint_file_name(2), 2,
                    "holds checkpoints after step 2");
}

// --- corrupt checkpoints -----------------------------------------------------------------------

class CorruptCheckpoint : public CheckpointTest {
 protected:
  void SetUp() override {
    CheckpointTest::SetUp();
    train("--steps 2 --out " + dir_.file("good"));
    good_ = read_safetensors(dir_.file("good/" + checkpoint_file_name(2)));
  }
  // Writes `f` as a checkpoint file and expects resuming it (and sampling it) to fail with
  // one line naming the file and containing `what`.
  void expect_rejected(const SafetensorsFile& f, const std::string& what) {
    const std::string path = dir_.file("bad.safetensors");
    write_safetensors(path, f);
    expect_user_error("train --resume " + path + " --out " + dir_.file("o"), 1, what);
    expect_user_error("train --resume " + path + " --out " + dir_.file("o"), 1, path);
    expect_user_error("sample --ckpt " + path, 1, what);
  }
  SafetensorsFile with_config(const std::string& section, const char* key, const json& value) {
    SafetensorsFile f = good_;
    json config = json::parse(f.metadata["config"]);
    if (value.is_null()) {
      config[section].erase(key);
    } else {
      config[section][key] = value;
    }
    f.metadata["config"] = config.dump();
    return f;
  }
  SafetensorsFile good_;
};

TEST_F(CorruptCheckpoint, GoodOneLoads) {  // the control for the cases below
  const std::string path = dir_.file("same.safetensors");
  write_safetensors(path, good_);
  const CommandResult r = run_reftrain("sample --ckpt " + path + " --tokens 5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(CorruptCheckpoint, MetadataIsValidated) {
  SafetensorsFile f = good_;
  f.metadata.erase("format");
  expect_rejected(f, "not a reftrain checkpoint");
  f = good_, f.metadata["format_version"] = "2";
  expect_rejected(f, "format version 2; this reftrain reads version 1");
  f = good_, f.metadata["step"] = "-1";
  expect_rejected(f, "step metadata must be an integer");
  f = good_, f.metadata["step"] = "9";
  expect_rejected(f, "do not fit a 2-step run");
  f = good_, f.metadata["config"] = "{not json";
  expect_rejected(f, "config metadata is not JSON");
  expect_rejected(with_config("train", "lr", nullptr), "config.train lacks \"lr\"");
  expect_rejected(with_config("train", "lr", "fast"), "config.train.lr must be a finite number");
  expect_rejected(with_config("model", "layers", 100000), "config.model.layers must be at most");
  expect_rejected(with_config("model", "layers", 0), "config.model.layers must be at least 1");
  expect_rejected(with_config("model", "heads", 0), "config.model.heads must be at least 1");
  expect_rejected(with_config("train", "batch", -3), "config.train.batch must be at least 1");
  expect_rejected(with_config("train", "seed", -3), "config.train.seed must be an integer >= 0");
  expect_rejected(with_config("model", "arch", "rnn"), "config.model.arch must be one of");
  // A config that disagrees with the tensors: two layers' weights, three layers claimed.
  expect_rejected(with_config("model", "layers", 3), "no tensor named 'transformer.h.2.");
}

TEST_F(CorruptCheckpoint, TensorsAreValidated) {
  SafetensorsFile f = good_;
  f.tensors.erase("optimizer.v.transformer.wpe.weight");
  expect_rejected(f, "no tensor named 'optimizer.v.transformer.wpe.weight'");
  f = good_;
  const std::vector<float> small(32 * 16, 0.0f);
  f.add("transformer.wpe.weight", DType::kF32, {16, 32}, small.data());
  expect_rejected(f, "tensor 'transformer.wpe.weight' has shape [16,32], expected [32,32]");
  f = good_;
  const std::vector<int32_t> ints(32, 1);
  f.add("transformer.ln_f.bias", DType::kI32, {32}, ints.data());
  expect_rejected(f, "'transformer.ln_f.bias' is I32, expected F32");
  f = good_;
  std::vector<float> w = f.get("transformer.h.1.mlp.c_fc.bias").as<float>();
  w[7] = std::numeric_limits<float>::quiet_NaN();
  f.add("transformer.h.1.mlp.c_fc.bias", DType::kF32, {128}, w.data());
  expect_rejected(f, "weight transformer.h.1.mlp.c_fc.bias element 7 is not finite");
}

TEST_F(CheckpointTest, MissingAndTruncatedCheckpoints) {
  expect_user_error("train --resume " + dir_.file("none"), 1, "does not exist");
  fs::create_directories(dir_.file("empty"));
  expect_user_error("train --resume " + dir_.file("empty"), 1, "holds no checkpoints");
  train("--steps 2 --out " + dir_.file("run"));
  const std::string path = dir_.file("run/" + checkpoint_file_name(2));
  const std::string bytes = read_file(path);
  write_file(path, bytes.substr(0, bytes.size() - 100));
  expect_user_error("train --resume " + dir_.file("run"), 1, "outside the data");
}

// --- the format, read by numpy and PyTorch ------------------------------------------------------

struct MomentSums {
  double m_abs = 0, v = 0;
};

// Σ|m| and Σv over the whole state (padding holds zeros), 8-bit blocks dequantized range by range.
MomentSums moment_sums(OptimizerState& s, const ParamLayout& layout) {
  MomentSums sums;
  if (s.kind() == Optimizer::kAdamW) {
    for (size_t i = 0; i < layout.total(); ++i)
      sums.m_abs += std::abs(s.m()[i]), sums.v += s.v()[i];
    return sums;
  }
  const auto* m_codes = reinterpret_cast<const uint8_t*>(s.m_codes().data());
  const auto* v_codes = reinterpret_cast<const uint8_t*>(s.v_codes().data());
  std::vector<float> m(kQuantBlock), v(kQuantBlock);
  size_t block = 0;
  for (const auto& [begin, end] : {std::pair<size_t, size_t>{0, layout.wd_end()},
                                   std::pair<size_t, size_t>{layout.wd_end(), layout.total()}}) {
    for (size_t b = begin; b < end; b += kQuantBlock, ++block) {
      const size_t n = std::min(kQuantBlock, end - b);
      dequantize_m(m_codes + b, s.m_scales()[block], n, m.data());
      dequantize_v(v_codes + b, s.v_scales()[block], n, v.data());
      for (size_t i = 0; i < n; ++i) sums.m_abs += std::abs(m[i]), sums.v += v[i];
    }
  }
  return sums;
}

// tests/torch/checkpoint_check.py parses the checkpoint with numpy alone, checks names, shapes,
// dtypes and metadata against the documented format, and computes the loss of its weights on a
// batch with the PyTorch mirror in float64. reftrain, reading the same file, must get the same
// loss: relative 1e-5, as in test_torch_parity (fp32 forward against a float64 oracle: ~1e-7
// relative rounding; a misplaced or transposed tensor shows at 1e-2 and more).
TEST_F(CheckpointTest, PyTorchReadsTheCheckpointAsIs) {
  const char* runs[] = {"--preset tiny --optimizer adamw",
                        "--preset llama-tiny --optimizer adamw8bit --precision mixed"};
  for (int i = 0; i < 2; ++i) {
    const std::string run = runs[i];
    SCOPED_TRACE(run);
    const std::string out = dir_.file("pt" + std::to_string(i));
    const CommandResult r =
        run_reftrain("train " + run + " --steps 3 --data " + text_ + " --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const Checkpoint c = read_checkpoint(out);
    const int B = 2, T = 16;
    std::vector<int32_t> inputs(B * T), targets(B * T);
    TestData data(7);
    for (int i = 0; i < B * T; ++i) inputs[i] = int32_t(data.below(256));
    for (int i = 0; i < B * T; ++i) targets[i] = int32_t(data.below(256));
    SafetensorsFile batch;
    batch.add("inputs", DType::kI32, {B, T}, inputs.data());
    batch.add("targets", DType::kI32, {B, T}, targets.data());
    write_safetensors(dir_.file("batch.safetensors"), batch);
    const CommandResult py =
        run_command(std::string(REFTRAIN_TORCH_PYTHON) +
                    " " REFTRAIN_SOURCE_DIR "/tests/torch/checkpoint_check.py " + c.path + " " +
                    dir_.file("batch.safetensors"));
    ASSERT_EQ(py.exit_code, 0) << py.output;
    const json oracle = json::parse(py.output);
    EXPECT_EQ(oracle["step"], 3);
    EXPECT_EQ(oracle["updates"], 3);

    const TrainConfig& t = c.meta.train;
    std::unique_ptr<Model> model = make_model(c.meta.model, model_options(t));
    restore_model(c, *model);
    const float loss = model->forward(inputs.data(), targets.data(), B, T);
    const double want = oracle["loss"].get<double>();
    EXPECT_NEAR(loss, want, 1e-5 * std::abs(want));
    EXPECT_GT(std::abs(want - std::log(256.0)), 1e-3);  // trained weights, not a uniform model

    // The optimizer state as the documented layout gives it, against reftrain's own reading
    // (the 8-bit codes dequantized by optim/adamw8bit.h). Both sum the same float32 values in
    // float64, numpy exactly (math.fsum), reftrain in buffer order: relative error ≤ n·2^-53
    // (n ≈ 10^5 elements, all terms ≥ 0) < 1e-10.
    OptimizerState state(t.optimizer, model->layout().wd_end(), model->layout().total());
    restore_optimizer(c, state);
    const MomentSums sums = moment_sums(state, model->layout());
    EXPECT_GT(sums.m_abs, 0.0);
    EXPECT_NEAR(sums.m_abs, oracle["m_abs_sum"].get<double>(), 1e-10 * sums.m_abs);
    EXPECT_NEAR(sums.v, oracle["v_sum"].get<double>(), 1e-10 * sums.v);
  }
}

}  // namespace
}  // namespace reftrain::testing
