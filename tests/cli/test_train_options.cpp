// Every training value has one row in core/train/run_config.cpp's table, and the command line,
// the trace's run line and the checkpoint's config all read it. Here, for every row with a flag:
// `train --<flag> VALUE` puts VALUE into the run line at the row's group and key, and into the
// checkpoint's "config"."train" at the row's key; and the table's JSON round-trips exactly.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

#include "core/formats/safetensors.h"
#include "core/train/run_config.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

using TrainOptions = LearnableTextTest;

// A value other than the tiny preset's for every flag, and its JSON as the run line writes it.
const std::map<std::string, std::pair<std::string, Json>>& other_values() {
  static const std::map<std::string, std::pair<std::string, Json>> values = {
      {"batch", {"2", 2}},
      {"seq", {"16", 16}},
      {"grad_accum", {"3", 3}},
      {"steps", {"3", 3}},
      {"warmup", {"1", 1}},
      {"schedule", {"constant", "constant"}},
      {"lr", {"0.002", 0.002}},
      {"min_lr", {"0.0001", 0.0001}},
      {"val_every", {"2", 2}},
      {"val_batches", {"3", 3}},
      {"z_loss", {"0.001", 0.001}},
      {"precision", {"mixed", "mixed"}},
      {"attention", {"materialised", "materialised"}},
      {"matmul", {"tiled", "tiled"}},
      {"kernels", {"reference", "reference"}},
      {"optimizer", {"adamw8bit", "adamw8bit"}},
      {"beta1", {"0.8", 0.8}},
      {"beta2", {"0.95", 0.95}},
      {"eps", {"1e-07", 1e-07}},
      {"wd", {"0.05", 0.05}},
      {"clip", {"0.5", 0.5}},
      {"seed", {"18446744073709551615", 18446744073709551615ull}},
  };
  return values;
}

const Json& run_line_value(const Json& run, const TrainField& f) {
  if (f.group == RunLineGroup::kTop) return run.at(f.run_key);
  return run.at(f.group == RunLineGroup::kTrain ? "train" : "optimizer").at(f.run_key);
}

TEST_F(TrainOptions, EveryFlagReachesTheRunLineAndTheCheckpoint) {
  int flags = 0;
  for (const TrainField& f : train_fields()) {
    if (!f.help) continue;
    ++flags;
    SCOPED_TRACE(f.key);
    ASSERT_EQ(other_values().count(f.key), 1u) << "no test value for " << field_flag(f);
    const auto& [text, want] = other_values().at(f.key);
    const std::string out = dir_.file(std::string("ckpt-") + f.key);
    const std::string trace = dir_.file(std::string(f.key) + ".jsonl");
    const std::string steps = std::string(f.key) == "steps" ? "" : " --steps 2";
    const CommandResult r =
        run_reftrain("train --preset tiny --data " + text_ + steps + " " + field_flag(f) + " " +
                     text + " --trace " + trace + " --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(run_line_value(read_trace(trace).at(0), f), want);
    const std::vector<std::string> ckpts = files_in(out);
    ASSERT_FALSE(ckpts.empty());
    const SafetensorsFile c = read_safetensors(out + "/" + ckpts.back());
    EXPECT_EQ(Json::parse(c.metadata.at("config")).at("train").at(f.key), want);
  }
  EXPECT_EQ(flags, int(other_values().size()));
}

TEST(TrainConfigJson, RoundTripsEveryValueExactly) {
  TrainConfig t;
  t.batch = 3, t.seq = 7, t.grad_accum = 5, t.steps = 11, t.warmup = 2,
  t.schedule = Schedule::kConstant;
  t.lr = 3e-3f, t.min_lr = 1.7e-5f, t.val_every = 5, t.val_batches = 4, t.z_loss = 1e-4f;
  t.precision = Precision::kMixed, t.attention = AttentionKind::kMaterialised;
  t.matmul = MatmulKind::kNaive, t.kernels = Kernels::kReference;
  t.optimizer = Optimizer::kAdamW8bit, t.beta1 = 0.85f, t.beta2 = 0.9995f, t.eps = 1e-7f;
  t.wd = 0.123f, t.clip = 0.7f, t.seed = 18446744073709551615ull;
  const Json j = train_config_json(t);
  EXPECT_EQ(j.size(), train_fields().size());
  EXPECT_EQ(train_config_json(parse_train_config(j)), j);
  // A checkpoint written before `kernels` existed reads as the fast kernels.
  Json old = j;
  old.erase("kernels");
  EXPECT_EQ(parse_train_config(old).kernels, Kernels::kFast);
  // One written before `grad_accum` existed trained one micro-batch per step.
  old.erase("grad_accum");
  EXPECT_EQ(parse_train_config(old).grad_accum, 1);
  // Every other value is required, and bounded.
  Json missing = j;
  missing.erase("beta2");
  EXPECT_THROW(parse_train_config(missing), std::runtime_error);
  Json huge = j;
  huge["batch"] = 1 << 21;
  EXPECT_THROW(parse_train_config(huge), std::runtime_error);
  Json unknown = j;
  unknown["matmul"] = "blas";
  EXPECT_THROW(parse_train_config(unknown), std::runtime_error);
}

}  // namespace
}  // namespace reftrain::testing
