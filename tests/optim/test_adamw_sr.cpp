// The stochastic rounding of --precision bf16-pure (ops/bf16.h) and the AdamW kernel that writes
// its weights (optim/adamw.h's adamw_update_bf16_sr): the rounding is unbiased exactly, its noise
// is a function of (seed, step, element index) alone, the fast kernel has the reference's bits at
// any thread count and alignment, and the weights it leaves are bf16 values, one of the two
// neighbours of the plain AdamW step's. tests/optim/test_adamw_bf16_oracle.cpp checks the kernel
// against an implementation in numpy that shares no code with it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ops/bf16.h"
#include "ops/cast.h"
#include "optim/adamw.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

// Over all 2^16 noise values, the mean of the rounded values is x itself, exactly (each sum
// below is exact in double: at most 2^16 terms of 8 significant bits within one binade pair).
TEST(StochasticRounding, IsUnbiasedOverAllNoise) {
  std::mt19937 rng(7);
  std::vector<float> xs = {1.0f, 0x1.fffffep0f, -0x1.0101p-3f, 3.0e38f, 0x1.0001p-120f};
  for (int i = 0; i < 40; ++i) {
    xs.push_back(std::ldexp(float(rng()) / 4294967296.0f + 0.5f, int(rng() % 200) - 100));
    xs.push_back(-xs.back());
  }
  for (float x : xs) {
    double sum = 0.0;
    for (uint32_t noise = 0; noise < 65536; ++noise)
      sum += double(bf16_to_f32(f32_to_bf16_stochastic(x, noise)));
    EXPECT_EQ(sum / 65536.0, double(x)) << "x = " << x;
  }
}

// The cases f32_to_bf16 has: NaN canonical, ±Inf kept, bf16 values unchanged by any noise, a
// bf16-subnormal result flushed to its signed zero, the largest finite value carried to ±Inf
// only by noise that carries.
TEST(StochasticRounding, KeepsTheConversionsRules) {
  for (uint32_t noise : {0u, 1u, 0x7FFFu, 0x8000u, 0xFFFFu}) {
    SCOPED_TRACE(noise);
    EXPECT_EQ(f32_to_bf16_stochastic(std::nanf(""), noise).bits, 0x7FC0);
    EXPECT_EQ(f32_to_bf16_stochastic(float_of(0xFFC12345u), noise).bits, 0x7FC0);
    EXPECT_EQ(f32_to_bf16_stochastic(INFINITY, noise).bits, 0x7F80);
    EXPECT_EQ(f32_to_bf16_stochastic(-INFINITY, noise).bits, 0xFF80);
    EXPECT_EQ(f32_to_bf16_stochastic(1.5f, noise).bits, 0x3FC0);
    EXPECT_EQ(f32_to_bf16_stochastic(-0.0f, noise).bits, 0x8000);
    EXPECT_EQ(f32_to_bf16_stochastic(float_of(0x00400001u), noise).bits, 0x0000);
    EXPECT_EQ(f32_to_bf16_stochastic(float_of(0x80400001u), noise).bits, 0x8000);
  }
  EXPECT_EQ(f32_to_bf16_stochastic(float_of(0x7F7FFFFFu), 0).bits, 0x7F7F);
  EXPECT_EQ(f32_to_bf16_stochastic(float_of(0x7F7FFFFFu), 1).bits, 0x7F80);
  EXPECT_EQ(f32_to_bf16_stochastic(float_of(0x3F80C000u), 0x3FFF).bits, 0x3F80);
  EXPECT_EQ(f32_to_bf16_stochastic(float_of(0x3F80C000u), 0x4000).bits, 0x3F81);
  // The smallest normal bf16 from below: up with the carry, else flushed.
  EXPECT_EQ(f32_to_bf16_stochastic(float_of(0x007FFFFFu), 0).bits, 0x0000);
  EXPECT_EQ(f32_to_bf16_stochastic(float_of(0x007FFFFFu), 1).bits, 0x0080);
}

// The hash: its noise is 16 bits, distinct indices of one step give distinct pre-shift hashes,
// and over a million indices a value a quarter of the way up rounds up a quarter of the time
// (within 6 standard deviations), for two seeds and two steps.
TEST(StochasticRounding, NoiseIsAUniformHashOfSeedStepAndIndex) {
  const float x = float_of(0x3F804000u);  // low 16 bits 0x4000: p(up) = 1/4
  const int n = 1 << 20;
  for (uint32_t seed : {0u, 1337u}) {
    for (uint32_t step : {1u, 2u}) {
      int up = 0;
      for (int i = 0; i < n; ++i) {
        const uint32_t noise = stochastic_noise(seed, step, uint32_t(i));
        ASSERT_LT(noise, 65536u);
        up += f32_to_bf16_stochastic(x, noise).bits == 0x3F81;
      }
      const double sd = std::sqrt(n * 0.25 * 0.75);
      EXPECT_NEAR(up, n * 0.25, 6 * sd) << "seed " << seed << " step " << step;
    }
  }
  EXPECT_NE(stochastic_noise(1, 1, 5), stochastic_noise(2, 1, 5));
  EXPECT_NE(stochastic_noise(1, 1, 5), stochastic_noise(1, 2, 5));
  // lowbias32 of 0 is 0, and its first words: a typo in a constant changes them.
  EXPECT_EQ(hash_mix32(0), 0u);
  EXPECT_NE(hash_mix32(1), 1u);
}

struct SrState {
  std::vector<float> w, g, m, v;
  std::vector<bf16> wb16;
};

SrState sr_state(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  SrState s{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n),
            std::vector<float>(n), std::vector<bf16>(n)};
  for (size_t i = 0; i < n; ++i) {
    s.w[i] = bf16_to_f32(f32_to_bf16(0.05f * nd(rng)));  // bf16 weights, as the run keeps them
    s.g[i] = 1e-2f * nd(rng);
    s.m[i] = 1e-3f * nd(rng);
    s.v[i] = 1e-5f * std::fabs(nd(rng));
  }
  if (n > 3) s.g[3] = NAN;  // a gradient the update drops
  return s;
}

bool same_bits(const SrState& a, const SrState& b) {
  const auto same = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  return same(a.w, b.w) && same(a.g, b.g) && same(a.m, b.m) && same(a.v, b.v) &&
         std::memcmp(a.wb16.data(), b.wb16.data(), a.wb16.size() * sizeof(bf16)) == 0;
}

using SrFn = decltype(&adamw_update_bf16_sr);
void run_sr(SrFn fn, SrState& s, size_t offset, size_t n, int t, uint32_t seed, size_t first) {
  const GradStats stats{1.7f, 0.9f};
  const AdamWHyper hp{2e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  fn(s.w.data() + offset, s.g.data() + offset, s.m.data() + offset, s.v.data() + offset,
     s.wb16.data() + offset, n, stats, hp, t, seed, first);
}

// The fast kernel against the reference: sizes with every tail, one element past the start of
// the buffers (unaligned for every vector width), over three steps, at 1, 2 and 3 threads.
TEST(AdamWStochastic, FastIsTheReferenceAtAnyThreadCountAndAlignment) {
  testing::OmpThreads threads;
  for (size_t n : {size_t{1}, size_t{17}, size_t{1003}, size_t{40013}}) {
    for (size_t offset : {size_t{0}, size_t{1}}) {
      SrState want = sr_state(n + offset, uint32_t(n));
      for (int t = 1; t <= 3; ++t) run_sr(adamw_update_bf16_sr, want, offset, n, t, 99, 12345);
      for (int nt = 1; nt <= 3; ++nt) {
        SCOPED_TRACE(::testing::Message()
                     << "n " << n << " offset " << offset << " threads " << nt);
        threads.set(nt);
        SrState got = sr_state(n + offset, uint32_t(n));
        for (int t = 1; t <= 3; ++t)
          run_sr(adamw_update_bf16_sr_fast, got, offset, n, t, 99, 12345);
        EXPECT_TRUE(same_bits(got, want));
      }
    }
  }
}

// m, v and g are adamw_update's; w is the widening of the mirror, and the mirror one of the two
// bf16 neighbours of adamw_update's new w (itself where that is a bf16 value); both neighbours
// occur.
TEST(AdamWStochastic, WritesANeighbourOfThePlainStep) {
  const size_t n = 5000;
  for (SrFn fn : {adamw_update_bf16_sr, adamw_update_bf16_sr_fast}) {
    SrState sr = sr_state(n, 5), plain = sr;
    run_sr(fn, sr, 0, n, 4, 7, 0);
    adamw_update(plain.w.data(), plain.g.data(), plain.m.data(), plain.v.data(), n, {1.7f, 0.9f},
                 {2e-3f, 0.9f, 0.95f, 1e-8f, 0.1f}, 4);
    EXPECT_EQ(std::memcmp(sr.m.data(), plain.m.data(), n * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(sr.v.data(), plain.v.data(), n * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(sr.g.data(), plain.g.data(), n * sizeof(float)), 0);
    int down = 0, up = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(bits_of(sr.w[i]), uint32_t(sr.wb16[i].bits) << 16) << i;
      const uint32_t u = bits_of(plain.w[i]), truncated = u >> 16;
      const uint32_t got = sr.wb16[i].bits;
      if ((u & 0xFFFF) == 0) {
        EXPECT_EQ(got, truncated) << i;
        continue;
      }
      ASSERT_TRUE(got == truncated || got == truncated + 1) << i << ": " << plain.w[i];
      (got == truncated ? down : up) += 1;
    }
    EXPECT_GT(down, 1000);
    EXPECT_GT(up, 1000);
  }
}

// An element's noise depends on its place in the mega-buffer, not on the call: one call over
// [0, n) equals two calls over [0, k) and [k, n) that say where they start (first), as the
// optimizer's wd and no-wd ranges and a sharded state do; and another seed changes it.
TEST(AdamWStochastic, NoiseFollowsTheElementNotTheCall) {
  const size_t n = 3001, k = 1234;
  for (SrFn fn : {adamw_update_bf16_sr, adamw_update_bf16_sr_fast}) {
    SrState whole = sr_state(n, 11), split = whole, other_seed = whole;
    run_sr(fn, whole, 0, n, 2, 5, 0);
    run_sr(fn, split, 0, k, 2, 5, 0);
    run_sr(fn, split, k, n - k, 2, 5, k);
    EXPECT_TRUE(same_bits(whole, split));
    run_sr(fn, other_seed, 0, n, 2, 6, 0);
    int differ = 0;
    for (size_t i = 0; i < n; ++i) differ += whole.wb16[i].bits != other_seed.wb16[i].bits;
    EXPECT_GT(differ, 100);
  }
}

}  // namespace
}  // namespace reftrain
