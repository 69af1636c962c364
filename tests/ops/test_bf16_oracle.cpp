// The bf16 kernels against an oracle that shares no code with them (tests/torch/bf16_oracle.py):
// the f32 -> bf16 conversion against PyTorch's rounding, and the reference and fastest bf16
// products against the canonical order evaluated in exact rational arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "ops/bf16.h"
#include "ops/matmul_bf16.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::write_raw;

TEST(Bf16Oracle, ConversionAndProductsMatchAnIndependentOracle) {
  ASSERT_STRNE(REFTRAIN_TORCH_PYTHON, "") << "configure with REFTRAIN_TORCH_TESTS=ON";
  testing::TempDir dir;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  // Conversions: values at every scale, rounding ties, the subnormal band, NaN and infinities.
  std::vector<float> x;
  for (int i = 0; i < 20000; ++i) x.push_back(std::ldexp(nd(rng), int(rng() % 300) - 150));
  for (uint32_t u : {0x3F808000u, 0x3F818000u, 0x007FFFFFu, 0x00008000u, 0x807F8000u, 0x7F7FFFFFu,
                     0x7FC12345u, 0xFF800000u, 0x80000000u}) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    x.push_back(f);
  }
  std::vector<bf16> xb(x.size());
  cast_f32_to_bf16_fast(xb.data(), x.data(), x.size());
  // A product with K = 77 (two full blocks and a padded one) and a few tiny operands.
  const int M = 9, N = 11, K = 77;
  std::vector<bf16> a(size_t(M) * K), b(size_t(K) * N);
  for (bf16& v : a) v = f32_to_bf16(rng() % 10 == 0 ? std::ldexp(nd(rng), -64) : nd(rng));
  for (bf16& v : b) v = f32_to_bf16(rng() % 10 == 0 ? std::ldexp(nd(rng), -64) : nd(rng));
  std::vector<float> c0(size_t(M) * N);
  for (float& v : c0) v = nd(rng);
  std::vector<float> ref = c0, fast = c0;
  GemmBf16 g{M,          N, K,          a.data(), Trans::kNo, K,      b.data(),
             Trans::kNo, N, ref.data(), N,        true,       nullptr};
  gemm_bf16_reference(g, 1);
  g.c = fast.data();
  MatmulBf16(bf16_best_path(), 2).run(g);

  write_raw(dir.file("x.f32"), x);
  write_raw(dir.file("xb.u16"), xb);
  write_raw(dir.file("a.u16"), a);
  write_raw(dir.file("b.u16"), b);
  write_raw(dir.file("c0.f32"), c0);
  write_raw(dir.file("ref.f32"), ref);
  write_raw(dir.file("fast.f32"), fast);
  std::ofstream(dir.file("meta.json"))
      << "{\"M\": " << M << ", \"N\": " << N << ", \"K\": " << K << ", \"n\": " << x.size() << "}";
  const testing::CommandResult r =
      testing::run_command(testing::python_script("bf16_oracle.py") + " " + dir.file(""));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace reftrain
