// simd/: the xsimd shim.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "simd/simd.h"

namespace reftrain {
namespace {

TEST(Simd, ArchNameIsTheCompiledTarget) {
  EXPECT_GT(std::strlen(simd::arch_name()), 0u);
  EXPECT_STRNE(simd::arch_name(), "unavailable");
}

TEST(Simd, ReduceAddSumsEveryLane) {
  constexpr size_t n = simd::Batch<float>::size;
  std::vector<float> lanes(n);
  float expected = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    lanes[i] = float(1u << i % 20);  // powers of two: every partial sum is exact
    expected += lanes[i];
  }
  const auto b = simd::Batch<float>::load_unaligned(lanes.data());
  EXPECT_EQ(simd::reduce_add(b), expected);
  EXPECT_EQ(simd::reduce_add(simd::Batch<double>(2.5)), 2.5 * simd::Batch<double>::size);
}

}  // namespace
}  // namespace reftrain
