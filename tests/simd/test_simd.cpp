// simd/: the xsimd shim.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
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

// Batch arithmetic is IEEE on every ISA: +, −, ×, ÷, √ and simd::fma of a batch give, lane by
// lane, the correctly rounded scalar results (NaN results: any NaN). xsimd 8's NEON float ÷ and
// √ are Newton-refined estimates that fail this; simd/simd.h replaces them on aarch64. Operands
// are random bit patterns (every binade, subnormals, ±0, ±inf, NaN) and moderate magnitudes.
// (GCC 12 reports the undefined pass-through operand of the unmasked AVX-512 vsqrtps/vsqrtpd
// inside xsimd as maybe-uninitialized; a false positive, as in optim/.)
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <typename T, typename Bits>
void expect_batch_ops_are_ieee() {
  using B = simd::Batch<T>;
  constexpr size_t W = B::size;
  uint64_t state = 0x9E3779B97F4A7C15u;
  const auto next = [&state]() {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
    return state;
  };
  const auto same = [](T want, T got) {
    Bits a, b;
    std::memcpy(&a, &want, sizeof a), std::memcpy(&b, &got, sizeof b);
    return a == b || (want != want && got != got);
  };
  size_t checked = 0;
  for (int round = 0; round < 20000; ++round) {
    alignas(64) T x[W], y[W], z[W], r[W];
    for (size_t l = 0; l < W; ++l) {
      Bits bx = Bits(next()), by = Bits(next()), bz = Bits(next());
      if (round % 2) bx = bx >> 9 | Bits(0x3F) << (sizeof(Bits) * 8 - 8);  // moderate magnitudes
      std::memcpy(&x[l], &bx, sizeof bx), std::memcpy(&y[l], &by, sizeof by);
      std::memcpy(&z[l], &bz, sizeof bz);
    }
    const B bx = B::load_aligned(x), by = B::load_aligned(y), bz = B::load_aligned(z);
    const auto check = [&](const char* op, const B& got, auto scalar) {
      got.store_aligned(r);
      for (size_t l = 0; l < W; ++l, ++checked) {
        const T want = scalar(x[l], y[l], z[l]);
        ASSERT_TRUE(same(want, r[l])) << op << " of " << x[l] << ", " << y[l] << ", " << z[l]
                                      << ": scalar " << want << ", batch " << r[l];
      }
    };
    check("+", bx + by, [](T a, T b, T) { return a + b; });
    check("-", bx - by, [](T a, T b, T) { return a - b; });
    check("*", bx * by, [](T a, T b, T) { return a * b; });
    check("/", bx / by, [](T a, T b, T) { return a / b; });
    check("sqrt", xsimd::sqrt(xsimd::abs(bx)), [](T a, T, T) { return std::sqrt(std::fabs(a)); });
    check("fma", simd::fma(bx, by, bz), [](T a, T b, T c) { return std::fma(a, b, c); });
  }
  EXPECT_EQ(checked, 20000u * 6 * W);
}
#pragma GCC diagnostic pop

TEST(Simd, BatchArithmeticIsIeee) {
  expect_batch_ops_are_ieee<float, uint32_t>();
  expect_batch_ops_are_ieee<double, uint64_t>();
}

}  // namespace
}  // namespace reftrain
