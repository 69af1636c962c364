// core/base/rng.h: Philox4x32-10 against the Random123 known-answer vectors, and the CounterRng
// views (words, uniform, normal, below) built on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "core/base/rng.h"

namespace reftrain {
namespace {

constexpr uint64_t kSeed = 0x0123456789abcdefull;

// Random123 (D. E. Shaw Research), examples/kat_vectors, the three philox4x32 10-round lines:
//   philox4x32 10 <ctr0 ctr1 ctr2 ctr3> <key0 key1>  <out0 out1 out2 out3>
TEST(Philox, KnownAnswerZero) {
  const Philox4x32 out = philox4x32_10({0u, 0u, 0u, 0u}, {0u, 0u});
  EXPECT_EQ(out, (Philox4x32{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
}

TEST(Philox, KnownAnswerAllOnes) {
  const Philox4x32 out = philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                       {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(out, (Philox4x32{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
}

TEST(Philox, KnownAnswerPi) {
  const Philox4x32 out = philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                                       {0xa4093822u, 0x299f31d0u});
  EXPECT_EQ(out, (Philox4x32{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

// The documented layout: key = (seed lo, seed hi), counter = (index lo, index hi, sub, stream).
// Index and seed use both 32-bit halves so a dropped or swapped half shows.
TEST(CounterRng, WordsAreKeyedPhilox) {
  const uint64_t index = 0x00000005fffffff3ull;
  const uint32_t sub = 7;
  const CounterRng rng(kSeed, RngStream::kTrainData);
  const Philox4x32 expected =
      philox4x32_10({0xfffffff3u, 0x00000005u, sub, static_cast<uint32_t>(RngStream::kTrainData)},
                    {0x89abcdefu, 0x01234567u});
  EXPECT_EQ(rng.words(index, sub), expected);
  EXPECT_EQ(rng.words(index), rng.words(index, 0));
}

TEST(CounterRng, SameInputsSameResult) {
  const CounterRng a(kSeed, RngStream::kInit);
  const CounterRng b(kSeed, RngStream::kInit);
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{12345}, uint64_t{1} << 40}) {
    EXPECT_EQ(a.words(i, 3), a.words(i, 3));
    EXPECT_EQ(a.words(i, 3), b.words(i, 3));
    // Bitwise identical, not just close.
    const float ua = a.uniform(i), ub = b.uniform(i);
    const double na = a.normal(i), nb = b.normal(i);
    EXPECT_EQ(std::memcmp(&ua, &ub, sizeof ua), 0);
    EXPECT_EQ(std::memcmp(&na, &nb, sizeof na), 0);
    EXPECT_EQ(a.below(1000003, i), b.below(1000003, i));
  }
}

TEST(CounterRng, DifferentInputsDifferentWords) {
  const uint64_t index = 42;
  const Philox4x32 base = CounterRng(kSeed, RngStream::kInit).words(index, 0);
  const std::vector<Philox4x32> variants = {
      CounterRng(kSeed + 1, RngStream::kInit).words(index, 0),
      CounterRng(kSeed ^ (uint64_t{1} << 32), RngStream::kInit).words(index, 0),  // seed hi
      CounterRng(kSeed, RngStream::kTrainData).words(index, 0),
      CounterRng(kSeed, RngStream::kValData).words(index, 0),
      CounterRng(kSeed, RngStream::kSample).words(index, 0),
      CounterRng(kSeed, RngStream::kInit).words(index + 1, 0),
      CounterRng(kSeed, RngStream::kInit).words(index + (uint64_t{1} << 32), 0),  // index hi
      CounterRng(kSeed, RngStream::kInit).words(index, 1),
  };
  std::set<Philox4x32> all(variants.begin(), variants.end());
  all.insert(base);
  EXPECT_EQ(all.size(), variants.size() + 1) << "two (seed, stream, index, sub) share words";

  // Many indices and streams: all 128-bit outputs distinct.
  std::set<Philox4x32> seen;
  size_t count = 0;
  for (RngStream s :
       {RngStream::kInit, RngStream::kTrainData, RngStream::kValData, RngStream::kSample}) {
    const CounterRng rng(kSeed, s);
    for (uint64_t i = 0; i < 2000; ++i, ++count) seen.insert(rng.words(i));
  }
  EXPECT_EQ(seen.size(), count);
}

// uniform = (w0 >> 8)·2⁻²⁴: 24 random bits, so every value is k/2²⁴ with 0 ≤ k < 2²⁴.
TEST(CounterRng, UniformInUnitIntervalWith24Bits) {
  const CounterRng rng(kSeed, RngStream::kSample);
  constexpr int kDraws = 100000;
  double sum = 0;
  float lo = 1, hi = 0;
  for (int i = 0; i < kDraws; ++i) {
    const float u = rng.uniform(i, 2);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    EXPECT_EQ(u, static_cast<float>(rng.words(i, 2)[0] >> 8) * 0x1p-24f) << "index " << i;
    sum += u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  // Mean of U[0,1): σ = √(1/12)/√n ≈ 9.1e-4 for n = 1e5; allow 5σ.
  const double sigma = std::sqrt(1.0 / 12.0 / kDraws);
  EXPECT_NEAR(sum / kDraws, 0.5, 5 * sigma);
  // 1e5 draws: the extremes lie within ~1e-4 of the ends (P(min > 1e-3) = (1-1e-3)^1e5 ≈ e^-100).
  EXPECT_LT(lo, 1e-3f);
  EXPECT_GT(hi, 1.0f - 1e-3f);
}

// Mean, variance and P(|x| < 1) of 1e5 draws, each within 5 standard errors of N(0,1):
//   se(mean) = 1/√n,  se(var) = √(2/n),  se(P) = √(p(1-p)/n) with p = 0.682689492.
// The last one tells a normal from other unit-variance shapes (a uniform on ±√3 gives 0.577).
TEST(CounterRng, NormalMomentsMatchStandardNormal) {
  const CounterRng rng(kSeed, RngStream::kInit);
  constexpr int kDraws = 100000;
  double sum = 0, sum_sq = 0;
  int inside = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double x = rng.normal(i);
    ASSERT_TRUE(std::isfinite(x)) << "index " << i;
    sum += x;
    sum_sq += x * x;
    inside += std::abs(x) < 1.0;
  }
  const double n = kDraws;
  const double mean = sum / n;
  const double var = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 5 / std::sqrt(n));
  EXPECT_NEAR(var, 1.0, 5 * std::sqrt(2 / n));
  const double p = 0.682689492137086;
  EXPECT_NEAR(inside / n, p, 5 * std::sqrt(p * (1 - p) / n));
}

TEST(CounterRng, BelowIsInRange) {
  const CounterRng rng(kSeed, RngStream::kTrainData);
  for (uint64_t n : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{1000000007},
                     (uint64_t{1} << 40) + 3, UINT64_MAX}) {
    for (uint64_t i = 0; i < 20000; ++i) {
      const uint64_t k = rng.below(n, i);
      ASSERT_LT(k, n) << "n " << n << " index " << i;
    }
  }
  // n = 1 has one answer.
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(rng.below(1, i), 0u);
}

// below(7) over 7e4 draws: each count ~ Binomial(7e4, 1/7), σ = √(7e4·(1/7)·(6/7)) ≈ 92.6;
// every count within 5σ of 1e4. A range bug (never 0, or never n-1) fails at once.
TEST(CounterRng, BelowCoversRangeUniformly) {
  const CounterRng rng(kSeed, RngStream::kSample);
  constexpr uint64_t kN = 7;
  constexpr int kDraws = 70000;
  std::vector<int> counts(kN, 0);
  for (int i = 0; i < kDraws; ++i) ++counts[rng.below(kN, i, 1)];
  const double expected = double(kDraws) / kN;
  const double sigma = std::sqrt(kDraws * (1.0 / kN) * (1.0 - 1.0 / kN));
  for (uint64_t k = 0; k < kN; ++k) EXPECT_NEAR(counts[k], expected, 5 * sigma) << "value " << k;
}

}  // namespace
}  // namespace reftrain
