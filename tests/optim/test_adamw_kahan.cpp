// The AdamW kernel of --precision bf16-kahan (optim/adamw.h's adamw_update_bf16_kahan): bf16
// weights updated by rounding to nearest with a Kahan compensation. The fast kernel has the
// reference's bits at any thread count and alignment; a first step is the plain step rounded to
// nearest; and over many steps too small for a bf16 weight to move, the weight plus its
// compensation follows fp32 AdamW where plain rounding to nearest never moves.
// tests/optim/test_adamw_bf16_oracle.cpp checks the kernel against numpy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/bf16.h"
#include "ops/cast.h"
#include "optim/adamw.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

struct KahanState {
  std::vector<float> w, g, m, v;
  std::vector<bf16> wb16, comp;
};

KahanState kahan_state(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  KahanState s{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n),
               std::vector<float>(n), std::vector<bf16>(n),  std::vector<bf16>(n)};
  for (size_t i = 0; i < n; ++i) {
    s.w[i] = bf16_to_f32(f32_to_bf16(0.05f * nd(rng)));  // bf16 weights, as the run keeps them
    s.g[i] = 1e-2f * nd(rng);
    s.m[i] = 1e-3f * nd(rng);
    s.v[i] = 1e-5f * std::fabs(nd(rng));
    s.comp[i] = f32_to_bf16(1e-5f * nd(rng));  // a compensation carried from earlier steps
  }
  if (n > 3) s.g[3] = NAN;  // a gradient the update drops
  return s;
}

template <typename T>
bool same(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

bool same_bits(const KahanState& a, const KahanState& b) {
  return same(a.w, b.w) && same(a.g, b.g) && same(a.m, b.m) && same(a.v, b.v) &&
         same(a.wb16, b.wb16) && same(a.comp, b.comp);
}

using KahanFn = decltype(&adamw_update_bf16_kahan);
const GradStats kStats{1.7f, 0.9f};
const AdamWHyper kHyper{2e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};

void run_kahan(KahanFn fn, KahanState& s, size_t offset, size_t n, int t,
               const AdamWHyper& hp = kHyper) {
  fn(s.w.data() + offset, s.g.data() + offset, s.m.data() + offset, s.v.data() + offset,
     s.wb16.data() + offset, s.comp.data() + offset, n, kStats, hp, t);
}

// Sizes with every tail, one element past the start of the buffers (unaligned for every vector
// width), over three steps, at 1, 2 and 3 threads.
TEST(AdamWKahan, FastIsTheReferenceAtAnyThreadCountAndAlignment) {
  testing::OmpThreads threads;
  for (size_t n : {size_t{1}, size_t{17}, size_t{1003}, size_t{40013}}) {
    for (size_t offset : {size_t{0}, size_t{1}}) {
      KahanState want = kahan_state(n + offset, uint32_t(n));
      for (int t = 1; t <= 3; ++t) run_kahan(adamw_update_bf16_kahan, want, offset, n, t);
      for (int nt = 1; nt <= 3; ++nt) {
        SCOPED_TRACE(::testing::Message()
                     << "n " << n << " offset " << offset << " threads " << nt);
        threads.set(nt);
        KahanState got = kahan_state(n + offset, uint32_t(n));
        for (int t = 1; t <= 3; ++t) run_kahan(adamw_update_bf16_kahan_fast, got, offset, n, t);
        EXPECT_TRUE(same_bits(got, want));
      }
    }
  }
}

// With no compensation carried in, s = −δ exactly, so w + s is adamw_update's new weight: the
// mirror is its rounding to nearest, w the mirror's widening, and the compensation what the
// rounding lost. m, v and g are adamw_update's.
TEST(AdamWKahan, AFirstStepIsThePlainStepRoundedToNearest) {
  const size_t n = 5000;
  for (KahanFn fn : {adamw_update_bf16_kahan, adamw_update_bf16_kahan_fast}) {
    KahanState k = kahan_state(n, 5);
    for (bf16& c : k.comp) c = f32_to_bf16(0.0f);
    KahanState plain = k;
    run_kahan(fn, k, 0, n, 4);
    adamw_update(plain.w.data(), plain.g.data(), plain.m.data(), plain.v.data(), n, kStats, kHyper,
                 4);
    EXPECT_TRUE(same(k.m, plain.m) && same(k.v, plain.v) && same(k.g, plain.g));
    int moved = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(k.wb16[i].bits, f32_to_bf16(plain.w[i]).bits) << i;
      ASSERT_EQ(bits_of(k.w[i]), uint32_t(k.wb16[i].bits) << 16) << i;
      // What the rounding lost, up to the f32 rounding of adamw_update's w − δ (the kernel's s
      // is −δ itself) and comp's own rounding to bf16.
      const float lost = plain.w[i] - k.w[i];  // exact: both within a bf16 ulp
      const float f32_ulp = std::ldexp(1.0f, std::ilogb(plain.w[i]) - 23);
      ASSERT_NEAR(bf16_to_f32(k.comp[i]), lost, std::ldexp(std::fabs(lost), -8) + f32_ulp) << i;
      moved += lost != 0.0f;
    }
    EXPECT_GT(moved, 4000);  // most steps are not bf16 values: the compensation is not idle
  }
}

// 1000 steps of δ ≈ 1e-4 (wd 0, so δ does not depend on w) on weights of magnitude 0.6-0.7,
// where half a bf16 ulp is 2^-9 ≈ 2e-3: rounding each step to nearest never moves a weight, while
// with the compensation w + comp follows fp32 AdamW's weight over the 0.1 it travels. w + comp
// is what the steps have added, up to comp's own rounding each step (at most 2^-8 of |comp| ≤
// half an ulp of w, 2^-9 below 1: 2^-17) and s's in f32: 1000 steps stay within 1000 · 2^-16.
TEST(AdamWKahan, CarriesStepsTooSmallToMoveABf16Weight) {
  const size_t n = 64;
  const int steps = 1000;
  const AdamWHyper hp{1e-4f, 0.9f, 0.95f, 1e-8f, 0.0f};
  for (KahanFn fn : {adamw_update_bf16_kahan, adamw_update_bf16_kahan_fast}) {
    std::mt19937 rng(21);
    KahanState k{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n),
                 std::vector<float>(n), std::vector<bf16>(n),  std::vector<bf16>(n)};
    std::vector<float> w0(n), sign(n), fp32(n), m(n), v(n), g(n), nearest(n), nm(n), nv(n), ng(n);
    for (size_t i = 0; i < n; ++i) {
      sign[i] = rng() % 2 ? 1.0f : -1.0f;
      w0[i] = bf16_to_f32(f32_to_bf16(sign[i] * (0.6f + 0.1f * float(rng() % 1000) / 1000.0f)));
      k.w[i] = fp32[i] = nearest[i] = w0[i];
    }
    for (int t = 1; t <= steps; ++t) {
      for (size_t i = 0; i < n; ++i) k.g[i] = g[i] = ng[i] = sign[i];  // w moves toward 0
      run_kahan(fn, k, 0, n, t, hp);
      adamw_update(fp32.data(), g.data(), m.data(), v.data(), n, kStats, hp, t);
      adamw_update(nearest.data(), ng.data(), nm.data(), nv.data(), n, kStats, hp, t);
      for (float& x : nearest) x = bf16_to_f32(f32_to_bf16(x));
    }
    for (size_t i = 0; i < n; ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(nearest[i], w0[i]);
      EXPECT_NEAR(std::fabs(w0[i]) - std::fabs(fp32[i]), 0.1, 0.005);
      EXPECT_NEAR(k.w[i] + bf16_to_f32(k.comp[i]), fp32[i], steps * std::ldexp(1.0, -16));
      EXPECT_EQ(bits_of(k.w[i]), uint32_t(k.wb16[i].bits) << 16);
    }
  }
}

}  // namespace
}  // namespace reftrain
