// simd/reduce.h against a scalar emulation of its fixed 16-lane order (tests/common/
// fast_check.h), which the fast kernels' tests in tests/ops/ hold them to.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "simd/reduce.h"
#include "tests/common/fast_check.h"

namespace reftrain {
namespace {

using namespace fast_check;

// simd/reduce.h itself: sums, FMA dot products, two sums at once and maxima equal the scalar
// emulation for every n from 0 to 70 (no block, one block, blocks and tails), on values spread
// over 40 binades, where a different order gives different bits (checked: not vacuous).
TEST(OpsSimd, ReductionsFollowTheStatedOrder) {
  using simd::load;
  TestData d(6000);
  std::vector<float> x(70), y(70);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(d.spread(-20, 20)), y[i] = float(d.uniform(-1, 1));
  int order_visible = 0;
  for (size_t n = 0; n <= x.size(); ++n) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const float sum =
        simd::sum16(n, [&](auto acc, size_t i) { return acc + load<decltype(acc)>(&x[i]); });
    EXPECT_EQ(bits_of({sum}),
              bits_of({emulate_sum16(n, [&](float a, size_t i) { return a + x[i]; })}));
    const auto two = simd::sums16<2>(n, [&](auto& acc, size_t i) {
      using V = simd::lane_type<decltype(acc)>;
      acc[0] = simd::fma(load<V>(&x[i]), load<V>(&y[i]), acc[0]);
      acc[1] = acc[1] + load<V>(&y[i]);
    });
    EXPECT_EQ(
        bits_of({two[0]}),
        bits_of({emulate_sum16(n, [&](float a, size_t i) { return std::fma(x[i], y[i], a); })}));
    EXPECT_EQ(bits_of({two[1]}),
              bits_of({emulate_sum16(n, [&](float a, size_t i) { return a + y[i]; })}));
    const float mx = simd::max16(
        n, [&](auto acc, size_t i) { return simd::max(acc, load<decltype(acc)>(&x[i])); });
    EXPECT_EQ(bits_of({mx}),
              bits_of({emulate_max16(n, [&](float a, size_t i) { return a > x[i] ? a : x[i]; })}));
    float sequential = 0.0f;
    for (size_t i = 0; i < n; ++i) sequential += x[i];
    order_visible += sequential != sum;
  }
  EXPECT_GT(order_visible, 20) << "the data do not tell the orders apart";
}

}  // namespace
}  // namespace reftrain
