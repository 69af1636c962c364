// `reftrain compare`: the metrics against hand-computed values, and the exit codes a CI job
// relies on — 0 within tolerance, 1 past it, 2 when an input cannot be read or does not match up
// — on identical files, a 1-ulp perturbation (within and past a tolerance), a perturbation past
// the default tolerance, truncated and missing files, other shapes and names, traces that
// drift and traces that stop early.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/formats/trace.h"
#include "core/golden/compare.h"
#include "ops/cast.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::TempDir;

SafeTensor f32_tensor(const std::vector<float>& v, std::vector<int64_t> shape) {
  SafetensorsFile f;
  f.add("x", DType::kF32, std::move(shape), v.data());
  return f.tensors.at("x");
}

TEST(CompareMetrics, MatchHandComputedValues) {
  const SafeTensor ref = f32_tensor({1.0f, -2.0f, 0.0f, 4.0f}, {4});
  const SafeTensor got = f32_tensor({1.0f, -2.5f, 0.0f, 4.0f + 0x1p-21f}, {4});
  const TensorDiff d = compare_tensor("x", ref, got, Tolerance());
  EXPECT_DOUBLE_EQ(d.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(d.max_rel, 0.25);  // 0.5/2; the zero element takes no part
  // Σ(x − r)² / Σr² = (0.25 + 2^-42) / 21
  EXPECT_DOUBLE_EQ(d.nmse, (0.25 + 0x1p-42) / 21.0);
  // −2 → −2.5 is 2^21 ulps of 2^-22 (binade [2, 4)); 4 + 2^-21 is 1 ulp of 4 (2^-21).
  EXPECT_EQ(d.ulp, double(1 << 21));
  EXPECT_EQ(d.worst, 1u);
  EXPECT_FALSE(d.pass);
}

TEST(CompareMetrics, UlpCountsAcrossZeroAndNaNEqualsNaN) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  const TensorDiff across =
      compare_tensor("x", f32_tensor({tiny}, {1}), f32_tensor({-tiny}, {1}), Tolerance::exact());
  EXPECT_EQ(across.ulp, 2.0);  // +min subnormal → 0 → −min subnormal
  const TensorDiff nan =
      compare_tensor("x", f32_tensor({testing::kNaN, testing::kInf}, {2}),
                     f32_tensor({testing::kNaN, testing::kInf}, {2}), Tolerance::exact());
  EXPECT_TRUE(nan.pass);
  const TensorDiff one_nan =
      compare_tensor("x", f32_tensor({1.0f}, {1}), f32_tensor({testing::kNaN}, {1}), Tolerance());
  EXPECT_FALSE(one_nan.pass);
}

TEST(CompareMetrics, F16UlpsAreCountedInHalves) {
  SafetensorsFile a, b;
  const uint16_t ha[] = {0x3C00, 0x0001}, hb[] = {0x3C01, 0x8001};  // 1 → next; +sub → −sub
  a.add("h", DType::kF16, {2}, ha);
  b.add("h", DType::kF16, {2}, hb);
  Tolerance t = Tolerance::exact();
  t.allclose = false, t.max_ulp = 2;
  const TensorDiff d = compare_tensor("h", a.tensors.at("h"), b.tensors.at("h"), t);
  EXPECT_EQ(d.ulp, 2.0);
  EXPECT_TRUE(d.pass);
  EXPECT_DOUBLE_EQ(d.used, 1.0);
}

TEST(CompareMetrics, ShapeOrKindMismatchIsInputError) {
  EXPECT_NE(testing::user_error_of([] {
              compare_tensor("x", f32_tensor({1, 2}, {2}), f32_tensor({1, 2}, {1, 2}), Tolerance());
            }),
            "");
  SafetensorsFile f;
  const int32_t i[] = {1, 2};
  f.add("i", DType::kI32, {2}, i);
  EXPECT_NE(testing::user_error_of([&] {
              compare_tensor("x", f32_tensor({1, 2}, {2}), f.tensors.at("i"), Tolerance());
            }),
            "");
}

TEST(CompareMetrics, ToleranceJsonRoundTripsAndRejectsUnknownKeys) {
  Tolerance t;
  t.rtol = 1e-3, t.atol = 0, t.max_nmse = 1e-7, t.why = "because";
  const Tolerance back = Tolerance::from_json(t.to_json(), "here");
  EXPECT_TRUE(back.allclose);
  EXPECT_EQ(back.rtol, 1e-3);
  EXPECT_EQ(back.max_nmse, 1e-7);
  EXPECT_LT(back.max_ulp, 0);
  EXPECT_EQ(back.why, "because");
  EXPECT_NE(testing::user_error_of([] { Tolerance::from_json(Json{{"rtoll", 1}}, "x"); }), "");
  EXPECT_NE(testing::user_error_of([] {
              Tolerance::from_json(Json{{"why", "no limit"}}, "x");
            }),
            "");
}

// --- the command ----------------------------------------------------------------------------

class CompareCli : public ::testing::Test {
 protected:
  // A reference file of 1000 spread values and copies of it.
  void SetUp() override {
    testing::TestData data(11);
    for (int i = 0; i < 1000; ++i) values_.push_back(float(data.spread(-8, 8)));
    ref_ = dir_.file("ref.safetensors");
    write(ref_, values_);
  }
  void write(const std::string& path, const std::vector<float>& v, const char* name = "w") {
    SafetensorsFile f;
    f.add(name, DType::kF32, {int64_t(v.size())}, v.data());
    write_safetensors(path, f);
  }
  int compare(const std::string& args) {
    const testing::CommandResult r = testing::run_reftrain("compare " + args);
    last_output_ = r.output;
    return r.exit_code;
  }
  TempDir dir_;
  std::vector<float> values_;
  std::string ref_, last_output_;
};

TEST_F(CompareCli, IdenticalFilesExitZero) {
  const std::string copy = dir_.file("copy.safetensors");
  write(copy, values_);
  EXPECT_EQ(compare(ref_ + " " + copy + " --rtol 0 --atol 0"), 0) << last_output_;
}

TEST_F(CompareCli, OneUlpPassesWithAnUlpToleranceAndFailsExact) {
  std::vector<float> v = values_;
  v[417] = std::nextafter(v[417], INFINITY);
  const std::string got = dir_.file("ulp.safetensors");
  write(got, v);
  EXPECT_EQ(compare(ref_ + " " + got + " --max-ulp 1"), 0) << last_output_;
  EXPECT_EQ(compare(ref_ + " " + got + " --rtol 1.2e-7"), 0) << last_output_;  // 1 ulp ≤ 2^-23
  EXPECT_EQ(compare(ref_ + " " + got + " --rtol 0 --atol 0"), 1) << last_output_;
  EXPECT_EQ(compare(ref_ + " " + got + " --max-ulp 0"), 1) << last_output_;
}

TEST_F(CompareCli, PerturbationPastToleranceExitsOneAndNamesTheTensor) {
  std::vector<float> v = values_;
  v[3] *= 1.001f;  // 1e-3 relative, past the default rtol 1e-5
  const std::string got = dir_.file("bad.safetensors");
  write(got, v);
  EXPECT_EQ(compare(ref_ + " " + got), 1);
  EXPECT_NE(last_output_.find("first tensor past tolerance: w"), std::string::npos) << last_output_;
  EXPECT_EQ(compare(ref_ + " " + got + " --rtol 2e-3"), 0) << last_output_;
  EXPECT_EQ(compare(ref_ + " " + got + " --json"), 1);
  const Json j = Json::parse(last_output_);
  EXPECT_EQ(j.at("first_fail"), "w");
  EXPECT_EQ(j.at("rows").at(0).at("worst"), 3);
}

// A file name that is not UTF-8 goes into --json's "a"/"b" with U+FFFD for its bad byte; it
// used to end the command with an uncaught json type_error (exit 134).
TEST_F(CompareCli, NonUtf8FileNameInJsonIsReplaced) {
  const std::string copy = dir_.file("caf\xe9.safetensors");
  write(copy, values_);
  EXPECT_EQ(compare(ref_ + " '" + copy + "' --json"), 0) << last_output_;
  const Json j = Json::parse(last_output_);
  EXPECT_EQ(j.at("b"), dir_.file("caf\xef\xbf\xbd.safetensors"));
}

TEST_F(CompareCli, UnreadableOrMismatchedInputExitsTwo) {
  const std::string data = testing::read_file(ref_);
  const std::string truncated = dir_.file("truncated.safetensors");
  testing::write_file(truncated, data.substr(0, data.size() - 5));
  EXPECT_EQ(compare(ref_ + " " + truncated), 2) << last_output_;
  EXPECT_EQ(compare(ref_ + " " + dir_.file("missing.safetensors")), 2) << last_output_;
  const std::string shorter = dir_.file("shorter.safetensors");
  write(shorter, std::vector<float>(values_.begin(), values_.end() - 1));
  EXPECT_EQ(compare(ref_ + " " + shorter), 2) << last_output_;
  const std::string renamed = dir_.file("renamed.safetensors");
  write(renamed, values_, "v");
  EXPECT_EQ(compare(ref_ + " " + renamed), 2) << last_output_;
  EXPECT_NE(last_output_.find("error: "), std::string::npos) << last_output_;
}

TEST_F(CompareCli, SubsetComparesOnlyTheTensorsBHas) {
  SafetensorsFile two;
  two.add("w", DType::kF32, {int64_t(values_.size())}, values_.data());
  two.add("extra", DType::kF32, {1}, values_.data());
  const std::string a = dir_.file("two.safetensors");
  write_safetensors(a, two);
  EXPECT_EQ(compare(a + " " + ref_), 2) << last_output_;  // B lacks "extra"
  EXPECT_EQ(compare(a + " " + ref_ + " --subset"), 0) << last_output_;
}

// Traces: a run line, then steps with loss and grad_norm.
void write_trace(const std::string& path, const std::vector<float>& losses) {
  TraceWriter w(path);
  w.write({{"type", "run"}});
  for (size_t k = 0; k < losses.size(); ++k) {
    w.write({{"type", "step"},
             {"step", k + 1},
             {"loss", json_float(losses[k])},
             {"grad_norm", 1.0},
             {"lr", 1e-3}});
  }
}

TEST_F(CompareCli, TraceDriftAgainstTheGate) {
  const std::string a = dir_.file("a.jsonl"), b = dir_.file("b.jsonl"), c = dir_.file("c.jsonl");
  write_trace(a, {5.0f, 4.0f, 3.0f});
  write_trace(b, {5.0f, 4.04f, 3.0f});  // 1 % at step 2
  EXPECT_EQ(compare(a + " " + a), 0) << last_output_;
  EXPECT_EQ(compare(a + " " + b), 0) << last_output_;  // the parity gate is 5 %
  EXPECT_EQ(compare(a + " " + b + " --max-drift 0.005"), 1) << last_output_;
  EXPECT_NE(last_output_.find("first step past tolerance: 2"), std::string::npos) << last_output_;
  write_trace(c, {5.0f, 4.0f});  // stops early
  EXPECT_EQ(compare(a + " " + c), 1) << last_output_;
  EXPECT_EQ(compare(a + " " + c + " --steps 2"), 0) << last_output_;
}

TEST_F(CompareCli, BrokenTraceExitsTwo) {
  const std::string a = dir_.file("a.jsonl"), cut = dir_.file("cut.jsonl");
  write_trace(a, {5.0f, 4.0f, 3.0f});
  const std::string text = testing::read_file(a);
  testing::write_file(cut, text.substr(0, text.size() - 10));  // the last line cut in half
  EXPECT_EQ(compare(a + " " + cut), 2) << last_output_;
  EXPECT_EQ(compare(a + " " + ref_), 2) << last_output_;  // a trace against a tensor file
}

}  // namespace
}  // namespace reftrain
