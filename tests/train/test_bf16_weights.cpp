// --precision bf16-pure and bf16-kahan from the command line: the weights a run leaves are bf16
// values (no fp32 master survives a step), a run gives the same bytes at any thread count,
// bf16-kahan's checkpoint holds its compensation, and the options they cannot honour are refused
// in one line. (Resuming and data parallel: their cases in test_checkpoint.cpp's ExactResume and
// test_data_parallel.cpp's DataParallelCases.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "core/formats/safetensors.h"
#include "core/train/checkpoint.h"
#include "ops/bf16.h"
#include "ops/cast.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::expect_user_error;
using testing::read_file;
using testing::run_reftrain;

class Bf16OnlyWeights : public testing::LearnableTextTest {};

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

// bf16-kahan's compensation tensors in a checkpoint: how many, and how many of their elements are
// not zero.
std::pair<size_t, size_t> compensation_in(const std::string& path) {
  size_t tensors = 0, nonzero = 0;
  for (const auto& [name, t] : read_safetensors(path).tensors) {
    if (name.rfind("optimizer.kahan.", 0) != 0) continue;
    EXPECT_EQ(t.dtype, DType::kBF16) << name;
    ++tensors;
    for (size_t i = 0; i < t.bytes.size(); i += 2) nonzero += (t.bytes[i] | t.bytes[i + 1]) != 0;
  }
  return {tensors, nonzero};
}

TEST_F(Bf16OnlyWeights, WeightsAreBf16ValuesAndThreadCountsAgree) {
  for (const std::string precision : {"bf16-pure", "bf16-kahan"}) {
    for (const std::string preset : {"tiny", "llama-tiny"}) {
      SCOPED_TRACE(precision + " " + preset);
      const std::string run = "train --preset " + preset + " --precision " + precision +
                              " --steps 6 --val-every 0 --data " + text_;
      const std::string out = dir_.file(precision + preset);
      for (const char* threads : {"1", "3"}) {
        const testing::CommandResult r =
            run_reftrain(run + " --threads " + threads + " --out " + out + threads);
        ASSERT_EQ(r.exit_code, 0) << r.output;
      }
      const std::string one = out + "1/" + checkpoint_file_name(6);
      EXPECT_EQ(weights_that_are_not_bf16(one), 0u);
      EXPECT_TRUE(read_file(one) == read_file(out + "3/" + checkpoint_file_name(6)))
          << "1 and 3 threads wrote different checkpoints";
      const auto [tensors, nonzero] = compensation_in(one);
      if (precision == "bf16-pure") {
        EXPECT_EQ(tensors, 0u);
      } else {
        EXPECT_GT(tensors, 10u);
        EXPECT_GT(nonzero, 10000u);  // the steps' roundings left something to carry
      }
    }
  }
  // The control: bf16's fp32 master weights are not bf16 values.
  const testing::CommandResult r =
      run_reftrain("train --preset tiny --precision bf16 --steps 6 --val-every 0 --data " + text_ +
                   " --out " + dir_.file("master"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GT(weights_that_are_not_bf16(dir_.file("master/" + checkpoint_file_name(6))), 10000u);
}

// bf16-kahan's weights start as the drawn ones rounded to bf16, and the compensation as what that
// rounding lost, so that w + comp is the draw (to comp's own rounding, 2^-8 of it): the same
// weights a bf16 run with fp32 master weights starts from. Left at zero, every weight would sit on
// a bf16 grid point, and the first half ulp of each one's travel would not show (measured: 1.6 %
// higher loss after 2000 steps of baby).
TEST_F(Bf16OnlyWeights, KahanStartsFromWhatRoundingTheDrawLost) {
  for (const char* precision : {"bf16", "bf16-kahan"}) {
    const testing::CommandResult r =
        run_reftrain(std::string("golden run --preset tiny --steps 1 --precision ") + precision +
                     " --data " + text_ + " --out " + dir_.file(precision));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const SafetensorsFile master = read_safetensors(dir_.file("bf16/init.safetensors"));
  const SafetensorsFile kahan = read_safetensors(dir_.file("bf16-kahan/init.safetensors"));
  size_t weights = 0, carried = 0;
  for (const auto& [name, t] : master.tensors) {
    const std::vector<float> drawn = t.as<float>(), w = kahan.get(name, t.shape).as<float>();
    const SafeTensor& comp = kahan.get("optimizer.kahan." + name, t.shape);
    ASSERT_EQ(comp.dtype, DType::kBF16) << name;
    const std::vector<uint16_t> comp_bits = comp.bf16_bits();
    for (size_t i = 0; i < drawn.size(); ++i) {
      const float lost = bf16_to_f32(bf16{comp_bits[i]});
      ASSERT_EQ(bits_of(w[i]), bits_of(bf16_to_f32(f32_to_bf16(drawn[i])))) << name << " " << i;
      ASSERT_NEAR(w[i] + lost, drawn[i], std::ldexp(std::fabs(lost), -8)) << name << " " << i;
      carried += lost != 0.0f;
      ++weights;
    }
  }
  EXPECT_GT(carried, weights / 2);  // the drawn weights are seldom bf16 values already
}

TEST_F(Bf16OnlyWeights, RefusesWhatTheyCannotRun) {
  for (const std::string precision : {"bf16-pure", "bf16-kahan"}) {
    const std::string run =
        "train --preset tiny --precision " + precision + " --steps 2 --data " + text_;
    expect_user_error(run + " --optimizer adamw8bit", 2,
                      "--precision " + precision +
                          " runs --optimizer adamw (its update rounds each new weight to bf16), "
                          "not --optimizer adamw8bit");
    expect_user_error(run + " --attention fused", 2,
                      "--attention fused conflicts with --precision " + precision);
  }
}

}  // namespace
}  // namespace reftrain
