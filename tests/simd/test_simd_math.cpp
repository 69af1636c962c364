// simd/math.h: exp, tanh and sigmoid against libm in double (the accuracy stated in the header),
// and the SIMD batch bit-identical to the scalar version on every input (what makes a kernel's
// result independent of the ISA: both are the same FMA sequence).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "simd/math.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using simd::Batch;
constexpr size_t kLanes = Batch<float>::size;

uint32_t float_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Distance in units in the last place between two finite floats of the same sign (or zero).
int64_t ulps(float a, float b) {
  return std::llabs(int64_t(float_bits(a) & 0x7fffffffu) - int64_t(float_bits(b) & 0x7fffffffu)) +
         (std::signbit(a) != std::signbit(b) && (a != 0 || b != 0) ? 1 : 0);
}

// Every 61st float bit pattern with |x| in [lo, hi] of both signs, plus the interval's ends.
std::vector<float> sweep(float lo, float hi) {
  std::vector<float> xs;
  for (uint32_t b = float_bits(lo); b <= float_bits(hi); b += 61) {
    float x;
    std::memcpy(&x, &b, sizeof x);
    xs.push_back(x);
    xs.push_back(-x);
  }
  xs.push_back(lo), xs.push_back(hi), xs.push_back(-lo), xs.push_back(-hi);
  return xs;
}

template <typename Scalar, typename Exact>
int64_t max_ulps(const std::vector<float>& xs, Scalar f, Exact exact) {
  int64_t worst = 0;
  for (float x : xs) worst = std::max(worst, ulps(f(x), float(exact(double(x)))));
  return worst;
}

// Applies the batch version to xs kLanes at a time (the tail padded with 0) and checks each lane
// against the scalar version, bit for bit.
template <typename Scalar, typename Vector>
void expect_batch_equals_scalar(const std::vector<float>& xs, Scalar f, Vector fv) {
  std::vector<float> in(xs), out(xs.size() + kLanes);
  in.resize((xs.size() + kLanes - 1) / kLanes * kLanes, 0.0f);
  for (size_t i = 0; i < in.size(); i += kLanes) {
    fv(Batch<float>::load_unaligned(&in[i])).store_unaligned(&out[i]);
  }
  size_t mismatches = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float s = f(xs[i]);
    if (float_bits(s) != float_bits(out[i])) {
      if (++mismatches <= 5)
        ADD_FAILURE() << "x=" << xs[i] << " scalar " << s << " batch " << out[i];
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(SimdMath, ExpWithinTwoUlpsOfLibmInDouble) {
  auto f = [](float x) { return simd::exp(x); };
  auto exact = [](double x) { return std::exp(x); };
  const auto normal = sweep(1e-30f, 87.0f);
  EXPECT_LE(max_ulps(normal, f, exact), 2);
  // Results in the subnormal range (x < −87.34) and the last binade before overflow.
  std::vector<float> edges;
  for (float x = -103.9f; x < -87.0f; x += 0.013f) edges.push_back(x);
  for (float x = 87.0f; x < 88.72f; x += 0.0007f) edges.push_back(x);
  EXPECT_LE(max_ulps(edges, f, exact), 2);
}

TEST(SimdMath, ExpSpecialValues) {
  EXPECT_EQ(simd::exp(0.0f), 1.0f);
  EXPECT_EQ(simd::exp(-0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(simd::exp(testing::kNaN)));
  EXPECT_EQ(simd::exp(testing::kInf), testing::kInf);
  EXPECT_EQ(simd::exp(89.0f), testing::kInf);
  EXPECT_EQ(simd::exp(-testing::kInf), 0.0f);
  EXPECT_EQ(simd::exp(-200.0f), 0.0f);
  EXPECT_LE(ulps(simd::exp(88.72f), float(std::exp(double(88.72f)))), 2);  // just below FLT_MAX
}

TEST(SimdMath, TanhAndSigmoidAccuracy) {
  auto t = [](float x) { return simd::tanh(x); };
  auto texact = [](double x) { return std::tanh(x); };
  EXPECT_LE(max_ulps(sweep(1e-30f, 0.625f), t, texact), 2);  // the polynomial branch
  EXPECT_LE(max_ulps(sweep(0.625f, 20.0f), t, texact), 3);   // 1 − 2/(e^{2x}+1)
  EXPECT_EQ(simd::tanh(30.0f), 1.0f);
  EXPECT_EQ(simd::tanh(-testing::kInf), -1.0f);
  EXPECT_TRUE(std::isnan(simd::tanh(testing::kNaN)));
  auto s = [](float x) { return simd::sigmoid(x); };
  auto sexact = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  EXPECT_LE(max_ulps(sweep(1e-30f, 80.0f), s, sexact), 3);
  EXPECT_EQ(simd::sigmoid(-200.0f), 0.0f);
  EXPECT_EQ(simd::sigmoid(200.0f), 1.0f);
}

TEST(SimdMath, BatchEqualsScalarBitForBit) {
  std::vector<float> xs = sweep(1e-38f, 120.0f);
  xs.push_back(testing::kNaN), xs.push_back(testing::kInf), xs.push_back(-testing::kInf);
  xs.push_back(0.0f), xs.push_back(-0.0f);
  expect_batch_equals_scalar(
      xs, [](float x) { return simd::exp(x); }, [](Batch<float> x) { return simd::exp(x); });
  expect_batch_equals_scalar(
      xs, [](float x) { return simd::tanh(x); }, [](Batch<float> x) { return simd::tanh(x); });
  expect_batch_equals_scalar(
      xs, [](float x) { return simd::sigmoid(x); },
      [](Batch<float> x) { return simd::sigmoid(x); });
}

}  // namespace
}  // namespace reftrain
