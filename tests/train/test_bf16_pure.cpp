// --precision bf16-pure from the command line: the weights a run leaves are bf16 values (no fp32
// master survives a step), a run gives the same bytes at any thread count, and the options it
// cannot honour are refused in one line. (Resuming and data parallel: the bf16-pure cases of
// test_checkpoint.cpp's ExactResume and test_data_parallel.cpp's DataParallelCases.)
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/formats/safetensors.h"
#include "core/train/checkpoint.h"
#include "ops/cast.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::expect_user_error;
using testing::read_file;
using testing::run_reftrain;

class Bf16Pure : public testing::LearnableTextTest {};

// Every f32 element of the model's tensors in a checkpoint, with its low 16 bits set: a weight
// that is not a bf16 value. The optimizer's moments are fp32 state and not counted.
size_t weights_that_are_not_bf16(const std::string& path) {
  size_t bad = 0, weights = 0;
  for (const auto& [name, t] : read_safetensors(path).tensors) {
    if (t.dtype != DType::kF32 || name.rfind("optimizer.", 0) == 0) continue;
    for (const float x : t.as<float>()) {
      bad += (bits_of(x) & 0xFFFFu) != 0;
      ++weights;
    }
  }
  EXPECT_GT(weights, 10000u) << path << ": no weights read";
  return bad;
}

TEST_F(Bf16Pure, WeightsAreBf16ValuesAndThreadCountsAgree) {
  for (const char* preset : {"tiny", "llama-tiny"}) {
    SCOPED_TRACE(preset);
    const std::string run = std::string("train --preset ") + preset +
                            " --precision bf16-pure --steps 6 --val-every 0 --data " + text_;
    for (const char* threads : {"1", "3"}) {
      const testing::CommandResult r = run_reftrain(run + " --threads " + threads + " --out " +
                                                    dir_.file(std::string(preset) + threads));
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    const std::string ckpt = checkpoint_file_name(6);
    const std::string one = dir_.file(std::string(preset) + "1/" + ckpt);
    EXPECT_EQ(weights_that_are_not_bf16(one), 0u);
    EXPECT_TRUE(read_file(one) == read_file(dir_.file(std::string(preset) + "3/" + ckpt)))
        << "1 and 3 threads wrote different checkpoints";
  }
  // The control: bf16's fp32 master weights are not bf16 values.
  const testing::CommandResult r =
      run_reftrain("train --preset tiny --precision bf16 --steps 6 --val-every 0 --data " + text_ +
                   " --out " + dir_.file("master"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GT(weights_that_are_not_bf16(dir_.file("master/" + checkpoint_file_name(6))), 10000u);
}

TEST_F(Bf16Pure, RefusesWhatItCannotRun) {
  const std::string run = "train --preset tiny --precision bf16-pure --steps 2 --data " + text_;
  expect_user_error(run + " --optimizer adamw8bit", 2,
                    "--precision bf16-pure runs --optimizer adamw (its update rounds each new "
                    "weight to bf16 stochastically), not --optimizer adamw8bit");
  expect_user_error(run + " --attention fused", 2,
                    "--attention fused conflicts with --precision bf16-pure");
}

}  // namespace
}  // namespace reftrain
