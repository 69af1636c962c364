// The bf16 kernels' golden surface (issue 29): their fixtures hold what the kernels compute (run
// here directly on the fixtures' inputs, on the fast path), their manifest entries state the
// canonical order and the subnormal band, `reftrain compare` reads BF16 tensors as floats and
// judges bf16 kernels at rtol 1.6e-2 / atol 1e-5 (passing an error inside it, failing one
// beyond it, by fixture metadata and by the per-dtype default), and the kernel-call dump of a
// bf16 call records its bf16 arguments as BF16 bytes that survive a safetensors round trip.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/golden/compare.h"
#include "core/golden/golden_kernels.h"
#include "ops/attention_bf16.h"
#include "ops/bf16.h"
#include "ops/kernel_dump.h"
#include "ops/linear_bf16.h"
#include "optim/kernel_table.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::TempDir;

const KernelSpec& spec(const std::string& name) {
  for (const KernelSpec& k : golden_kernels()) {
    if (k.name == name) return k;
  }
  throw std::logic_error("no fixture " + name);
}

std::vector<bf16> bf16_of(const SafetensorsFile& f, const std::string& name) {
  const SafeTensor& t = f.get(name);
  EXPECT_EQ(t.dtype, DType::kBF16) << name;
  std::vector<bf16> v(t.numel());
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

std::vector<float> f32_of(const SafetensorsFile& f, const std::string& name) {
  return f.get(name).as<float>();
}

// The bytes of `v` must be those of the fixture's tensor `name`.
template <typename T>
void expect_bytes(const SafetensorsFile& f, const std::string& name, const std::vector<T>& v) {
  const SafeTensor& t = f.get(name);
  ASSERT_EQ(t.bytes.size(), v.size() * sizeof(T)) << name;
  EXPECT_EQ(std::memcmp(t.bytes.data(), v.data(), t.bytes.size()), 0) << name;
}

TEST(GoldenBf16, LinearFixturesAreTheKernelsOnTheFastPath) {
  MatmulBf16 mm(bf16_best_path());
  for (const char* c : {"small", "awkward"}) {
    SCOPED_TRACE(c);
    const std::string p = std::string(c) + ".";
    const KernelDims d = kernel_dims(c);
    const int N = d.N(), K = d.C, O = d.F;
    const SafetensorsFile fw = make_kernel_fixture(spec("linear_forward_bf16"), kGoldenKernelSeed);
    std::vector<float> out(size_t(N) * O);
    linear_forward_bf16(mm, out.data(), bf16_of(fw, p + "inp16").data(),
                        bf16_of(fw, p + "w16").data(), f32_of(fw, p + "b").data(), N, K, O);
    expect_bytes(fw, p + "out", out);
    const SafetensorsFile bd =
        make_kernel_fixture(spec("linear_backward_data_bf16"), kGoldenKernelSeed);
    std::vector<float> dinp = f32_of(bd, p + "dinp_in");
    linear_backward_data_bf16(mm, dinp.data(), bf16_of(bd, p + "dout16").data(),
                              bf16_of(bd, p + "w16").data(), N, K, O, true);
    expect_bytes(bd, p + "dinp", dinp);
    const SafetensorsFile bw =
        make_kernel_fixture(spec("linear_backward_weight_bf16"), kGoldenKernelSeed);
    std::vector<float> dw = f32_of(bw, p + "dw_in"), db = f32_of(bw, p + "db_in");
    const std::vector<float> dout = f32_of(bw, p + "dout");
    std::vector<bf16> dout16(dout.size());
    cast_f32_to_bf16_fast(dout16.data(), dout.data(), dout.size());
    expect_bytes(bw, p + "dout16", dout16);  // the model's rounding of dout
    linear_backward_weight_bf16(mm, dw.data(), db.data(), dout.data(), dout16.data(),
                                bf16_of(bw, p + "inp16").data(), N, K, O);
    expect_bytes(bw, p + "dw", dw);
    expect_bytes(bw, p + "db", db);
  }
}

TEST(GoldenBf16, AttentionAndCastFixturesAreTheKernelsOnTheFastPath) {
  MatmulBf16 mm(bf16_best_path());
  for (const char* c : {"small", "awkward"}) {
    SCOPED_TRACE(c);
    const std::string p = std::string(c) + ".";
    const KernelDims d = kernel_dims(c);
    const size_t TT = size_t(d.T) * d.T, att_n = size_t(d.B) * d.NH * TT;
    const SafetensorsFile fw =
        make_kernel_fixture(spec("attention_forward_bf16"), kGoldenKernelSeed);
    std::vector<float> out(size_t(d.N()) * d.C), att(att_n);
    std::vector<bf16> att16(att_n);
    attention_forward_bf16(mm, out.data(), att.data(), att16.data(),
                           bf16_of(fw, p + "qkv16").data(), d.B, d.T, d.C, d.NH);
    expect_bytes(fw, p + "out", out);
    expect_bytes(fw, p + "att", att);
    expect_bytes(fw, p + "att16", att16);
    const SafetensorsFile bw =
        make_kernel_fixture(spec("attention_backward_bf16"), kGoldenKernelSeed);
    std::vector<float> dqkv = f32_of(bw, p + "dqkv_in"), dp(size_t(mm.threads()) * TT);
    std::vector<bf16> ds16(size_t(mm.threads()) * TT);
    attention_backward_bf16(mm, dqkv.data(), dp.data(), ds16.data(),
                            bf16_of(bw, p + "dout16").data(), bf16_of(bw, p + "qkv16").data(),
                            f32_of(bw, p + "att").data(), bf16_of(bw, p + "att16").data(), d.B, d.T,
                            d.C, d.NH);
    expect_bytes(bw, p + "dqkv", dqkv);
    const SafetensorsFile cast = make_kernel_fixture(spec("cast_f32_to_bf16"), kGoldenKernelSeed);
    const std::vector<float> src = f32_of(cast, p + "src");
    std::vector<bf16> dst(src.size());
    cast_f32_to_bf16_fast(dst.data(), src.data(), src.size());
    expect_bytes(cast, p + "dst", dst);
  }
}

TEST(GoldenBf16, ManifestStatesTheOrderTheBandAndTheBf16Tolerance) {
  for (const char* name :
       {"cast_f32_to_bf16", "linear_forward_bf16", "linear_backward_data_bf16",
        "linear_backward_weight_bf16", "attention_forward_bf16", "attention_backward_bf16"}) {
    SCOPED_TRACE(name);
    const KernelSpec& k = spec(name);
    const SafetensorsFile f = make_kernel_fixture(k, kGoldenKernelSeed);
    const Json m = kernel_manifest(k, f, kGoldenKernelSeed);
    // The bindings are the record's, in order, with their dtypes.
    const std::vector<KernelBinding>& want = kernel_record(name).bindings;
    ASSERT_EQ(m.at("bindings").size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(m.at("bindings")[i].at("name"), want[i].name);
      EXPECT_EQ(m.at("bindings")[i].at("dtype"), want[i].dtype);
    }
    const Json& num = m.at("numerics");
    EXPECT_NE(num.at("bf16").get<std::string>().find("0x7FC0"), std::string::npos);
    if (std::string(name) != "cast_f32_to_bf16") {
      EXPECT_NE(num.at("order").get<std::string>().find("C = C + (E + O)"), std::string::npos);
      EXPECT_NE(num.at("subnormal_band").get<std::string>().find("2^-126"), std::string::npos);
    }
    ASSERT_FALSE(m.at("tolerances").empty());
    for (const auto& [output, tol] : m.at("tolerances").items()) {
      EXPECT_EQ(tol.at("rtol").get<double>(), 1.6e-2) << output;
      EXPECT_EQ(tol.at("atol").get<double>(), 1e-5) << output;
    }
  }
  // An f32 kernel keeps its NMSE bound and states no numerics.
  const Json f32 = kernel_manifest(spec("linear_forward"),
                                   make_kernel_fixture(spec("linear_forward"), kGoldenKernelSeed),
                                   kGoldenKernelSeed);
  EXPECT_FALSE(f32.contains("numerics"));
  EXPECT_EQ(f32.at("tolerances").at("out").at("max_nmse").get<double>(), 1e-9);
}

TEST(CompareBf16, Bf16TensorsAreFloatsWithUlpsInBf16) {
  SafetensorsFile a, b;
  const uint16_t ha[] = {0x3F80, 0x0000, 0x7FC0}, hb[] = {0x3F81, 0x8000, 0x7FC0};  // 1 → next
  a.add("x", DType::kBF16, {3}, ha);
  b.add("x", DType::kBF16, {3}, hb);
  const TensorDiff d = compare_tensor("x", a.tensors.at("x"), b.tensors.at("x"), Tolerance());
  EXPECT_EQ(d.ulp, 1.0);
  EXPECT_DOUBLE_EQ(d.max_abs, 0x1p-7);  // bf16's ulp at 1
  EXPECT_EQ(d.dtype, "BF16");
  // Against f32 values (a float and a float): no ulps, the values compared.
  const float f[] = {1.0f, 0.0f, 0.0f};
  SafetensorsFile c;
  c.add("x", DType::kF32, {3}, f);
  const TensorDiff mixed = compare_tensor("x", a.tensors.at("x"), c.tensors.at("x"), Tolerance());
  EXPECT_EQ(mixed.ulp, -1.0);
  EXPECT_FALSE(mixed.pass);  // NaN against 0
}

// Fixture `kernel`'s tensor `name` with element 0 scaled by 1 + rel, compared by the CLI.
int compare_scaled(const TempDir& dir, const std::string& kernel, const std::string& name,
                   double rel) {
  const SafetensorsFile f = make_kernel_fixture(spec(kernel), kGoldenKernelSeed);
  SafetensorsFile g = f;
  SafeTensor& t = g.tensors.at(name);
  float x;
  std::memcpy(&x, t.bytes.data(), 4);
  x = float(x * (1 + rel));
  std::memcpy(t.bytes.data(), &x, 4);
  write_safetensors(dir.file("a.safetensors"), f);
  write_safetensors(dir.file("b.safetensors"), g);
  return testing::run_reftrain("compare " + dir.file("a.safetensors") + " " +
                               dir.file("b.safetensors") + " --quiet")
      .exit_code;
}

TEST(CompareBf16, FixturesJudgeBf16KernelsAtTheBf16Tolerance) {
  TempDir dir;
  // 1 % is within rtol 1.6e-2 (but 1e7 times the f32 fixtures' NMSE bound); 3 % is not.
  EXPECT_EQ(compare_scaled(dir, "linear_forward_bf16", "small.out", 0.01), 0);
  EXPECT_EQ(compare_scaled(dir, "linear_forward_bf16", "small.out", 0.03), 1);
  EXPECT_EQ(compare_scaled(dir, "attention_backward_bf16", "awkward.dqkv", 0.01), 0);
  EXPECT_EQ(compare_scaled(dir, "attention_backward_bf16", "awkward.dqkv", 0.03), 1);
  EXPECT_EQ(compare_scaled(dir, "linear_forward", "small.out", 0.01), 1);  // f32: NMSE 1e-9
}

TEST(CompareBf16, DefaultToleranceIsBf16ForBf16TensorsAndBf16Calls) {
  SafetensorsFile f;
  const float v[] = {1.0f};
  const uint16_t h[] = {0x3F80};
  f.add("0003.h0.linear_forward_bf16.out", DType::kF32, {1}, v);
  f.add("0004.h0.linear_forward.out", DType::kF32, {1}, v);
  f.add("0005.h0.cast_f32_to_bf16.dst", DType::kBF16, {1}, h);
  Tolerance fallback;
  const auto tol = [&](const std::string& n) {
    return default_tolerance(n, f.tensors.at(n), fallback);
  };
  EXPECT_EQ(tol("0003.h0.linear_forward_bf16.out").rtol, 1.6e-2);
  EXPECT_EQ(tol("0003.h0.linear_forward_bf16.out").atol, 1e-5);
  EXPECT_EQ(tol("0004.h0.linear_forward.out").rtol, 1e-5);
  EXPECT_EQ(tol("0005.h0.cast_f32_to_bf16.dst").rtol, 1.6e-2);
  // The CLI on files without tolerances: 1 % passes a bf16 call's output, fails an f32 one's.
  TempDir dir;
  const float w[] = {1.01f};
  SafetensorsFile g;
  g.add("0003.h0.linear_forward_bf16.out", DType::kF32, {1}, w);
  g.add("0004.h0.linear_forward.out", DType::kF32, {1}, v);
  g.add("0005.h0.cast_f32_to_bf16.dst", DType::kBF16, {1}, h);
  write_safetensors(dir.file("a.safetensors"), f);
  write_safetensors(dir.file("b.safetensors"), g);
  const std::string ab = dir.file("a.safetensors") + " " + dir.file("b.safetensors");
  EXPECT_EQ(testing::run_reftrain("compare " + ab).exit_code, 0);
  g.tensors.at("0004.h0.linear_forward.out") = g.tensors.at("0003.h0.linear_forward_bf16.out");
  write_safetensors(dir.file("b.safetensors"), g);
  EXPECT_EQ(testing::run_reftrain("compare " + ab).exit_code, 1);
}

TEST(KernelDumpBf16, ABf16CallRecordsBf16BytesThatRoundTrip) {
  const int N = 3, K = 5, O = 4;
  std::vector<float> inp(size_t(N) * K), w(size_t(O) * K), b(size_t(O), 0.25f);
  for (size_t i = 0; i < inp.size(); ++i) inp[i] = 0.1f * float(i) - 0.7f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.03f * float(i) + 0.01f;
  std::vector<bf16> inp16(inp.size()), w16(w.size());
  cast_f32_to_bf16(inp16.data(), inp.data(), inp.size());
  cast_f32_to_bf16(w16.data(), w.data(), w.size());
  std::vector<float> out(size_t(N) * O);
  KernelDump dump;
  const KernelRecord& r = kernel_record("linear_forward_bf16");
  const size_t call = dump.begin("h0", r, {out.data(), inp16.data(), w16.data(), b.data()},
                                 {{"N", size_t(N)}, {"K", size_t(K)}, {"O", size_t(O)}});
  MatmulBf16 mm(Bf16Path::kReference);
  linear_forward_bf16(mm, out.data(), inp16.data(), w16.data(), b.data(), N, K, O);
  dump.end(call);
  SafetensorsFile f;
  for (const KernelDump::Tensor& t : dump.tensors()) {
    f.add(t.name, t.dtype == "BF16" ? DType::kBF16 : DType::kF32, {int64_t(t.numel)},
          t.bytes.data());
  }
  TempDir dir;
  write_safetensors(dir.file("dump.safetensors"), f);
  const SafetensorsFile back = read_safetensors(dir.file("dump.safetensors"));
  const std::string c = "0000.h0.linear_forward_bf16.";
  expect_bytes(back, c + "inp16", inp16);
  expect_bytes(back, c + "w16", w16);
  expect_bytes(back, c + "out", out);
  EXPECT_EQ(back.get(c + "w16").dtype, DType::kBF16);
  EXPECT_EQ(back.get(c + "out").dtype, DType::kF32);
  // A bf16 argument where the record says f32 is a programming error.
  KernelDump wrong;
  EXPECT_THROW(wrong.begin("h0", r, {out.data(), inp16.data(), w16.data(), inp16.data()},
                           {{"N", size_t(N)}, {"K", size_t(K)}, {"O", size_t(O)}}),
               std::logic_error);
}

}  // namespace
}  // namespace reftrain
