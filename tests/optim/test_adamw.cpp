// optim/adamw.h and optim/schedule.h against the optimizer formulas (docs/kernels/12_optimizer.md),
// re-implemented here as plain double-precision scalar code.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/cast.h"
#include "optim/adamw.h"
#include "optim/schedule.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::kInf;
using testing::kNaN;
using testing::kU;

using Data = testing::TestData;

// Floats spread over many binades (|g| in [2^-30, 2^10]), random sign, with NaN, +Inf and -Inf
// sprinkled in (1 element in ~50 each, when n is large enough).
std::vector<float> spread_with_nonfinite(size_t n, uint64_t seed) {
  Data d(seed);
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    const double mag = std::ldexp(d.uniform(1.0, 2.0), int(d.below(41)) - 30);
    g[i] = float(d.unit() < 0.5 ? -mag : mag);
    const uint64_t r = d.below(150);
    if (r == 0) g[i] = kNaN;
    if (r == 1) g[i] = kInf;
    if (r == 2) g[i] = -kInf;
  }
  return g;
}

using Threads = testing::OmpThreads;

// Bits and values of the three element types the kernels write (ops/cast.h has float's and
// f16's bits).
using reftrain::bits_of;
uint16_t bits_of(bf16 x) {
  return x.bits;
}
float value_of(float x) {
  return x;
}
float value_of(f16 x) {
  return float(x);
}
float value_of(bf16 x) {
  return bf16_to_f32(x);
}

// Element-wise bit equality (so ±0 and NaN payloads count), reporting the first difference.
template <typename T>
::testing::AssertionResult same_bits(const char* what, const std::vector<T>& got,
                                     const std::vector<T>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
  size_t diffs = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (bits_of(got[i]) != bits_of(want[i]) && diffs++ == 0) first = i;
  }
  if (diffs == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << diffs << " of " << got.size() << " elements differ, first [" << first
         << "] bits 0x" << std::hex << unsigned(bits_of(got[first])) << " want 0x"
         << unsigned(bits_of(want[first])) << std::dec << " (" << value_of(got[first]) << " vs "
         << value_of(want[first]) << ")";
}

// ---------------------------------------------------------------------------------------------
// reduce_norm_sq: every test runs the xsimd kernel and the scalar reference.

struct NormKernel {
  const char* name;
  double (*fn)(const float*, size_t);
};
const NormKernel kNormKernels[] = {{"reduce_norm_sq", reduce_norm_sq_fast},
                                   {"reduce_norm_sq_ref", reduce_norm_sq}};

// Small integers: every square and every partial sum is an integer below 2^53, so any order of
// summation gives the exact answer; the kernel must equal the integer reference exactly.
// NaN, +Inf and -Inf are placed at the first, last and a middle element.
TEST(ReduceNormSq, ExactOnIntegersWithNonFinite) {
  for (const NormKernel& k : kNormKernels) {
    SCOPED_TRACE(k.name);
    for (size_t n :
         {size_t{1}, size_t{2}, size_t{7}, size_t{15}, size_t{17}, size_t{63}, size_t{64},
          size_t{65}, size_t{2047}, size_t{2048}, size_t{2049}, size_t{1000003}}) {
      std::vector<float> g(n);
      int64_t expected = 0;
      for (size_t i = 0; i < n; ++i) {
        const int64_t x = int64_t((i * 7919u) % 9u) - 4;  // -4..4
        g[i] = float(x);
        expected += x * x;
      }
      const auto knock_out = [&](size_t i, float bad) {
        const int64_t x = int64_t(g[i]);
        expected -= x * x;
        g[i] = bad;
      };
      knock_out(0, kNaN);
      if (n >= 2) knock_out(n - 1, kInf);
      if (n >= 3) knock_out(n / 2, -kInf);
      EXPECT_EQ(k.fn(g.data(), n), double(expected)) << "n " << n;
    }
    const float one[1] = {3.0f};
    EXPECT_EQ(k.fn(one, 1), 9.0);
    const float nan_only[1] = {kNaN};
    EXPECT_EQ(k.fn(nan_only, 1), 0.0);
  }
}

// Random magnitudes over 40 binades. Each g² is exact in double (24-bit mantissa squared), so
// the only error is the summation: any order of n - 1 double additions of non-negative terms
// errs by at most (n - 1)·2^-53·Σ. The reference sums in long double (64-bit mantissa), whose
// own error is 2^11 times smaller, so the bound n·2^-53·ref holds for a correct kernel. A
// dropped element (one of 1e6, each ~1e-6 of the total) or a kept Inf/NaN fails.
TEST(ReduceNormSq, MatchesLongDoubleReference) {
  for (const NormKernel& k : kNormKernels) {
    SCOPED_TRACE(k.name);
    for (size_t n : {size_t{1}, size_t{63}, size_t{1000}, size_t{1000003}}) {
      const std::vector<float> g = spread_with_nonfinite(n, 17 + n);
      long double ref = 0;
      for (float x : g) {
        if (std::isfinite(x)) ref += (long double)x * (long double)x;
      }
      const double got = k.fn(g.data(), n);
      const double bound = double(n) * 0x1p-53 * double(ref);
      EXPECT_LE(std::abs(got - double(ref)), bound) << "n " << n;
    }
  }
}

// The xsimd kernel against the scalar reference. Both cut the range into the same 64 chunks and
// square exactly in double; they differ only in the order of the additions inside a chunk
// (reference: one running sum; xsimd: 4 accumulators × lanes, then a fixed lane tree, then the
// leftover elements). Adding an exact 0 is exact, and every term passes through at most
// k = ⌈n/64⌉ + 80 roundings in either (chunk length + accumulator and lane trees + leftover
// elements + 64 chunk sums), so each is within γ_k·S of S = Σ g² (γ_k = k·2^-53/(1 - k·2^-53))
// and they agree to 2·γ_k·S. S is summed in long double (error ≤ n·2^-64·S, added to the
// bound). The data span 40 binades, so the two orders do round differently; an element dropped
// or counted twice moves the result by far more (and ExactOnIntegers catches it exactly).
TEST(ReduceNormSq, XsimdWithinBoundOfRef) {
  int differ = 0;
  for (size_t n : {size_t{1}, size_t{7}, size_t{15}, size_t{17}, size_t{31}, size_t{32}, size_t{33},
                   size_t{63}, size_t{64}, size_t{65}, size_t{1000}, size_t{2047}, size_t{2048},
                   size_t{2049}, size_t{100003}, size_t{1000003}}) {
    const std::vector<float> g = spread_with_nonfinite(n, 4242 + n);
    long double s = 0;
    for (float x : g) {
      if (std::isfinite(x)) s += (long double)x * (long double)x;
    }
    const double k = double((n + 63) / 64 + 80);
    const double gamma = k * 0x1p-53 / (1 - k * 0x1p-53);
    const double bound = 2 * gamma * double(s) * (1 + double(n) * 0x1p-63);
    const double got = reduce_norm_sq_fast(g.data(), n);
    const double ref = reduce_norm_sq(g.data(), n);
    EXPECT_LE(std::abs(got - ref), bound) << "n " << n << " got " << got << " ref " << ref;
    differ += got != ref;
  }
  // Not a correctness requirement, only a guard that the test compares two different orders.
  RecordProperty("xsimd_differs_from_ref", differ);
}

// Deterministic for any thread count: with 1, 2 and 3 threads the result is bitwise identical.
// The data span 40 binades, so a per-thread split (or any other change of order) would change
// the rounding.
TEST(ReduceNormSq, BitIdenticalAcrossThreadCounts) {
  Threads threads;
  for (const NormKernel& k : kNormKernels) {
    SCOPED_TRACE(k.name);
    for (size_t n : {size_t{63}, size_t{100003}, size_t{1000003}}) {
      const std::vector<float> g = spread_with_nonfinite(n, 99 + n);
      double results[3];
      for (int t = 1; t <= 3; ++t) {
        threads.set(t);
        ASSERT_EQ(Threads::team_size(), t) << "OpenMP did not give the requested team size";
        results[t - 1] = k.fn(g.data(), n);
      }
      EXPECT_EQ(std::memcmp(&results[0], &results[1], sizeof(double)), 0) << "n " << n;
      EXPECT_EQ(std::memcmp(&results[0], &results[2], sizeof(double)), 0) << "n " << n;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// finalize_grad_stats: clip = min(1, max_norm / max(grad_norm, 1e-6)), or 1 when max_norm = 0.

TEST(FinalizeGradStats, NoClipBelowMaxNorm) {
  const GradStats s = finalize_grad_stats(0.25, 1.0f);  // norm 0.5
  EXPECT_EQ(s.grad_norm, 0.5f);
  EXPECT_EQ(s.clip, 1.0f);
  const GradStats at = finalize_grad_stats(1.0, 1.0f);  // norm exactly max_norm
  EXPECT_EQ(at.grad_norm, 1.0f);
  EXPECT_EQ(at.clip, 1.0f);
}

TEST(FinalizeGradStats, ClipsAboveMaxNorm) {
  const GradStats s = finalize_grad_stats(16.0, 1.0f);  // norm 4
  EXPECT_EQ(s.grad_norm, 4.0f);
  EXPECT_EQ(s.clip, 0.25f);  // exact in float
  // Non-power-of-two ratio: one float division of max_norm by the float norm, ≤ ½ ulp.
  const GradStats t = finalize_grad_stats(9.0, 0.7f);  // norm 3
  EXPECT_EQ(t.grad_norm, 3.0f);
  EXPECT_NEAR(t.clip, 0.7 / 3.0, kU * (0.7 / 3.0) * 2);  // input 0.7f itself is off by ≤ u
  // grad_norm is √norm_sq for a non-square too (float of the double root: ≤ ½ ulp).
  const GradStats r = finalize_grad_stats(2.0, 1.0f);
  EXPECT_NEAR(r.grad_norm, std::sqrt(2.0), kU * std::sqrt(2.0));
  EXPECT_NEAR(r.clip, 1.0 / std::sqrt(2.0), 2 * kU);
}

TEST(FinalizeGradStats, ClipOffWhenMaxNormZero) {
  const GradStats s = finalize_grad_stats(1e6, 0.0f);
  EXPECT_EQ(s.grad_norm, 1000.0f);
  EXPECT_EQ(s.clip, 1.0f);
}

// At norm 0 the divisor is max(0, 1e-6) = 1e-6: with max_norm 1e-7 the clip is 0.1 (finite),
// where an unguarded division would give max_norm/0 = Inf → clip 1, or 0/0 = NaN.
TEST(FinalizeGradStats, GuardAtZeroNorm) {
  const GradStats s = finalize_grad_stats(0.0, 1e-7f);
  EXPECT_EQ(s.grad_norm, 0.0f);
  EXPECT_TRUE(std::isfinite(s.clip));
  EXPECT_NEAR(s.clip, 0.1, 0.1 * 4 * kU);  // 1e-7f, 1e-6f and the division: 3 roundings
  const GradStats one = finalize_grad_stats(0.0, 1.0f);
  EXPECT_EQ(one.clip, 1.0f);
  // Below the guard (norm 1e-8 < 1e-6) the divisor is still 1e-6.
  const GradStats tiny = finalize_grad_stats(1e-16, 2e-7f);
  EXPECT_NEAR(tiny.clip, 0.2, 0.2 * 4 * kU);
}

// ---------------------------------------------------------------------------------------------
// adamw_update against the GPU kernel's formulas in double:
//   g' = isfinite(g) ? g·clip : 0;  m = β1·m + (1-β1)·g';  v = β2·v + (1-β2)·g'²
//   m̂ = m / max(1-β1ᵗ, 1e-12);  v̂ = v / max(1-β2ᵗ, 1e-12);  w -= lr·(m̂/(√v̂+ε) + wd·w);  g = 0
//
// Tolerance: the float kernel makes about a dozen roundings per element (g·clip, two products
// and a sum for m, three for v, the bias corrections, √, +ε, ÷, wd·w, +, lr·, −), each ≤ u
// relative to the magnitude it rounds. So each result is compared against 16·u times its own
// scale: for m, |β1·m| + |(1-β1)·g'| (the terms may cancel); for v, v itself (terms ≥ 0); for
// w, |w| + lr·|wd·w| + lr·(scale_m / (1-β1ᵗ)) / (√v̂ + ε). Any formula error (no bias
// correction, ε inside the root, decay applied to the new w, clip not applied, the old m used)
// moves w by ≥ 1e-3 relative, far outside.
//
// Every AdamW test runs all six kernels through one signature (each ignores the mirror it does
// not write).
using AdamFn = void (*)(float* w, float* g, float* m, float* v, f16* w16, bf16* wb16, size_t n,
                        const GradStats& stats, const AdamWHyper& hp, int t);
enum class Mirror { kNone, kF16, kBf16 };  // what a kernel writes besides w, m, v, g
struct AdamKernel {
  const char* name;
  AdamFn fn;
  Mirror mirror;
};
const AdamKernel kAdamUpdate{
    "adamw_update",
    [](float* w, float* g, float* m, float* v, f16*, bf16*, size_t n, const GradStats& s,
       const AdamWHyper& hp, int t) { adamw_update_fast(w, g, m, v, n, s, hp, t); },
    Mirror::kNone};
const AdamKernel kAdamUpdateRef{
    "adamw_update_ref",
    [](float* w, float* g, float* m, float* v, f16*, bf16*, size_t n, const GradStats& s,
       const AdamWHyper& hp, int t) { adamw_update(w, g, m, v, n, s, hp, t); },
    Mirror::kNone};
const AdamKernel kAdamUpdateF16{
    "adamw_update_f16",
    [](float* w, float* g, float* m, float* v, f16* w16, bf16*, size_t n, const GradStats& s,
       const AdamWHyper& hp, int t) { adamw_update_f16_fast(w, g, m, v, w16, n, s, hp, t); },
    Mirror::kF16};
const AdamKernel kAdamUpdateF16Ref{
    "adamw_update_f16_ref",
    [](float* w, float* g, float* m, float* v, f16* w16, bf16*, size_t n, const GradStats& s,
       const AdamWHyper& hp, int t) { adamw_update_f16(w, g, m, v, w16, n, s, hp, t); },
    Mirror::kF16};
const AdamKernel kAdamUpdateBf16{
    "adamw_update_bf16",
    [](float* w, float* g, float* m, float* v, f16*, bf16* wb16, size_t n, const GradStats& s,
       const AdamWHyper& hp, int t) { adamw_update_bf16_fast(w, g, m, v, wb16, n, s, hp, t); },
    Mirror::kBf16};
const AdamKernel kAdamUpdateBf16Ref{
    "adamw_update_bf16_ref",
    [](float* w, float* g, float* m, float* v, f16*, bf16* wb16, size_t n, const GradStats& s,
       const AdamWHyper& hp, int t) { adamw_update_bf16(w, g, m, v, wb16, n, s, hp, t); },
    Mirror::kBf16};
const AdamKernel kAdamKernels[] = {kAdamUpdate,       kAdamUpdateRef,  kAdamUpdateF16,
                                   kAdamUpdateF16Ref, kAdamUpdateBf16, kAdamUpdateBf16Ref};

struct AdamCase {
  int t;
  float wd;
};

void run_adamw_case(const AdamCase& c) {
  for (const AdamKernel& k : kAdamKernels) {
    SCOPED_TRACE(::testing::Message() << k.name << " t=" << c.t << " wd=" << c.wd);
    constexpr size_t n = 1003;
    const AdamWHyper hp{/*lr=*/0.05f, /*beta1=*/0.9f, /*beta2=*/0.95f, /*eps=*/1e-8f, c.wd};
    const GradStats stats{/*grad_norm=*/2.0f, /*clip=*/0.5f};
    Data d(1000 + c.t);
    std::vector<float> w(n), m(n), v(n);
    for (size_t i = 0; i < n; ++i) {
      w[i] = float(d.uniform(-1, 1));
      // t = 1 starts from zero moments; later steps from moments of the right sign/size.
      m[i] = c.t == 1 ? 0.0f : float(d.uniform(-1e-2, 1e-2));
      v[i] = c.t == 1 ? 0.0f : float(d.uniform(0, 1e-4));
    }
    // Gradients over 40 binades, |g| in [2^-42, 2^-1]: both far below ε = 1e-8 ≈ 2^-26.6 (where
    // ε dominates the step) and far above it; with NaN and ±Inf, three of them placed first.
    std::vector<float> g = spread_with_nonfinite(n, 555 + c.t);
    for (float& x : g) x = std::ldexp(x, -12);
    g[0] = kNaN;
    g[1] = kInf;
    g[2] = -kInf;
    const std::vector<float> w0 = w, m0 = m, v0 = v, g0 = g;
    std::vector<f16> w16(n);
    std::vector<bf16> wb16(n);

    k.fn(w.data(), g.data(), m.data(), v.data(), w16.data(), wb16.data(), n, stats, hp, c.t);

    const double b1 = hp.beta1, b2 = hp.beta2, lr = hp.lr, eps = hp.eps, wd = hp.wd;
    const double bc1 = std::max(1.0 - std::pow(b1, c.t), 1e-12);
    const double bc2 = std::max(1.0 - std::pow(b2, c.t), 1e-12);
    int nonfinite = 0;
    for (size_t i = 0; i < n; ++i) {
      const bool finite = std::isfinite(g0[i]);
      nonfinite += !finite;
      const double gp = finite ? double(g0[i]) * double(stats.clip) : 0.0;
      const double m_ref = b1 * m0[i] + (1 - b1) * gp;
      const double v_ref = b2 * v0[i] + (1 - b2) * gp * gp;
      const double m_hat = m_ref / bc1;
      const double v_hat = v_ref / bc2;
      const double denom = std::sqrt(v_hat) + eps;
      const double w_ref = w0[i] - lr * (m_hat / denom + wd * w0[i]);

      const double scale_m = std::abs(b1 * m0[i]) + std::abs((1 - b1) * gp);
      const double scale_w =
          std::abs(w0[i]) + lr * std::abs(wd * w0[i]) + lr * (scale_m / bc1) / denom;
      EXPECT_LE(std::abs(m[i] - m_ref), 16 * kU * scale_m) << "m[" << i << "] g " << g0[i];
      EXPECT_LE(std::abs(v[i] - v_ref), 16 * kU * v_ref) << "v[" << i << "] g " << g0[i];
      EXPECT_LE(std::abs(w[i] - w_ref), 16 * kU * scale_w)
          << "w[" << i << "] got " << w[i] << " want " << w_ref << " g " << g0[i];
      EXPECT_EQ(g[i], 0.0f) << "g[" << i << "] not zeroed";
      EXPECT_FALSE(std::signbit(g[i])) << "g[" << i << "] is -0";
    }
    EXPECT_GE(nonfinite, 3);
  }
}

TEST(AdamW, FirstStepNoDecay) {
  run_adamw_case({1, 0.0f});
}
TEST(AdamW, FirstStepWithDecay) {
  run_adamw_case({1, 0.1f});
}
TEST(AdamW, FifthStepNoDecay) {
  run_adamw_case({5, 0.0f});
}
TEST(AdamW, FifthStepWithDecay) {
  run_adamw_case({5, 0.1f});
}

// A non-finite gradient is a zero gradient: m and v decay, w moves only by the decay and the
// existing momentum, exactly as if g had been 0.
// n = 35 puts elements in full batches and in the scalar tail of the xsimd kernels.
TEST(AdamW, NonFiniteGradIsZeroGrad) {
  const AdamWHyper hp{0.01f, 0.9f, 0.999f, 1e-8f, 0.1f};
  const GradStats stats{1.0f, 1.0f};
  constexpr size_t n = 35;
  for (const AdamKernel& k : kAdamKernels) {
    SCOPED_TRACE(k.name);
    std::vector<float> w(n), m(n), v(n), g_bad(n), g_zero(n, 0.0f);
    for (size_t i = 0; i < n; ++i) {
      w[i] = 0.5f - 0.03f * float(i);
      m[i] = 0.01f * float(int(i % 5) - 2);
      v[i] = 1e-4f * float(i % 3 + 1);
      g_bad[i] = i % 3 == 0 ? kNaN : i % 3 == 1 ? kInf : -kInf;
    }
    std::vector<float> w2 = w, m2 = m, v2 = v;
    std::vector<f16> h(n), h2(n);
    std::vector<bf16> b(n), b2(n);
    k.fn(w.data(), g_bad.data(), m.data(), v.data(), h.data(), b.data(), n, stats, hp, 3);
    k.fn(w2.data(), g_zero.data(), m2.data(), v2.data(), h2.data(), b2.data(), n, stats, hp, 3);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(std::isfinite(w[i]) && std::isfinite(m[i]) && std::isfinite(v[i])) << i;
      EXPECT_EQ(g_bad[i], 0.0f) << i;
    }
    EXPECT_TRUE(same_bits("w", w, w2));
    EXPECT_TRUE(same_bits("m", m, m2));
    EXPECT_TRUE(same_bits("v", v, v2));
    if (k.mirror == Mirror::kF16) {
      EXPECT_TRUE(same_bits("w16", h, h2));
    }
    if (k.mirror == Mirror::kBf16) {
      EXPECT_TRUE(same_bits("wb16", b, b2));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The xsimd AdamW kernels against the scalar references, bit for bit.
//
// Both do the same IEEE float operations in the same order (separate products and sums, √ and
// ÷ correctly rounded), so every output must match in every bit: w, m, v, g and the mirror
// (w16 or wb16). An FMA, a reordered product ((1-β2)·g'² instead of ((1-β2)·g')·g'), a bias
// correction applied by division instead of the reciprocal, a different clamp or rounding of the
// mirror changes the last bit of some of the thousands of elements compared here.

// One optimizer state of n elements, random but reproducible. Gradients span 2^-75..2^5 (so g'²
// underflows to subnormals and to 0 for some, and is large for others) with NaN, +Inf and -Inf
// at the first, a middle and the last element plus ~1 in 50 elsewhere. Weights lie in [-2, 2]
// with, when n allows, some beyond the f16 range (±7e4, ±1e6, ±3e38), the f16 boundary 65504,
// values at f16 subnormal scale, ±0, and NaN/±Inf weights (which must propagate identically).
struct OptState {
  std::vector<float> w, g, m, v;
  std::vector<f16> w16;
  std::vector<bf16> wb16;
};

std::vector<float> random_grads(size_t n, uint64_t seed) {
  Data d(seed);
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) {
    const double mag = std::ldexp(d.uniform(1.0, 2.0), int(d.below(81)) - 75);
    g[i] = float(d.unit() < 0.5 ? -mag : mag);
    const uint64_t r = d.below(150);
    if (r == 0) g[i] = kNaN;
    if (r == 1) g[i] = kInf;
    if (r == 2) g[i] = -kInf;
  }
  g[0] = kNaN;
  if (n >= 3) g[n / 2] = kInf;
  if (n >= 2) g[n - 1] = -kInf;
  return g;
}

OptState random_state(size_t n, uint64_t seed) {
  Data d(seed);
  OptState s{std::vector<float>(n), random_grads(n, seed * 31 + 7), std::vector<float>(n),
             std::vector<float>(n), std::vector<f16>(n, f16(0.0f)), std::vector<bf16>(n)};
  for (size_t i = 0; i < n; ++i) {
    s.w[i] = float(d.uniform(-2, 2));
    s.m[i] = float(d.uniform(-1e-2, 1e-2));
    s.v[i] = float(std::ldexp(d.unit(), -int(d.below(40))));  // [0, 1), many binades
  }
  const float specials[] = {7e4f,     -7e4f, 1e6f,   -1e6f, 3e38f, -3e38f, 65504.0f, -65504.0f,
                            65519.0f, 3e-6f, -4e-7f, 0.0f,  -0.0f, kNaN,   kInf,     -kInf};
  const size_t ns = sizeof specials / sizeof specials[0];
  if (n >= 40) {
    for (size_t k = 0; k < ns; ++k) s.w[(k * 7919 + 5) % n] = specials[k];
  }
  return s;
}

void run(const AdamKernel& k, OptState& s, const GradStats& stats, const AdamWHyper& hp, int t) {
  k.fn(s.w.data(), s.g.data(), s.m.data(), s.v.data(), s.w16.data(), s.wb16.data(), s.w.size(),
       stats, hp, t);
}

// w, m, v, g and the mirror `mirror` (none: the four alone).
::testing::AssertionResult same_state(const OptState& got, const OptState& want, Mirror mirror) {
  for (const auto& r : {same_bits("w", got.w, want.w), same_bits("m", got.m, want.m),
                        same_bits("v", got.v, want.v), same_bits("g", got.g, want.g)}) {
    if (!r) return r;
  }
  if (mirror == Mirror::kF16) return same_bits("w16", got.w16, want.w16);
  if (mirror == Mirror::kBf16) return same_bits("wb16", got.wb16, want.wb16);
  return ::testing::AssertionSuccess();
}

// The bf16 mirror against both casts of the new weights: ops/bf16.h's reference and its fast
// version (bit-identical to each other by tests/ops/test_bf16.cpp).
::testing::AssertionResult mirror_is_bf16_cast(const OptState& s) {
  std::vector<bf16> ref(s.w.size()), fast(s.w.size());
  cast_f32_to_bf16(ref.data(), s.w.data(), s.w.size());
  cast_f32_to_bf16_fast(fast.data(), s.w.data(), s.w.size());
  const auto r = same_bits("wb16 vs cast_f32_to_bf16(w)", s.wb16, ref);
  return r ? same_bits("wb16 vs cast_f32_to_bf16_fast(w)", s.wb16, fast) : r;
}

::testing::AssertionResult all_zero_grads(const std::vector<float>& g) {
  for (size_t i = 0; i < g.size(); ++i) {
    if (bits_of(g[i]) != 0) {
      return ::testing::AssertionFailure() << "g[" << i << "] = " << g[i] << " after the update";
    }
  }
  return ::testing::AssertionSuccess();
}

const size_t kSizes[] = {1, 7, 15, 17, 1000, 100003};

TEST(AdamWXsimd, BitIdenticalToRef) {
  for (size_t n : kSizes) {
    for (float clip : {0.37f, 1.0f}) {
      for (int t : {1, 5}) {
        for (float wd : {0.0f, 0.1f}) {
          SCOPED_TRACE(::testing::Message()
                       << "n=" << n << " clip=" << clip << " t=" << t << " wd=" << wd);
          const GradStats stats{2.7f, clip};
          const AdamWHyper hp{3e-3f, 0.9f, 0.95f, 1e-8f, wd};
          const OptState s0 = random_state(n, n * 131 + t * 7 + (clip < 1) + (wd > 0) * 2);
          OptState a = s0, b = s0, c = s0, d = s0, e = s0, f = s0;
          run(kAdamUpdate, a, stats, hp, t);
          run(kAdamUpdateRef, b, stats, hp, t);
          run(kAdamUpdateF16, c, stats, hp, t);
          run(kAdamUpdateF16Ref, d, stats, hp, t);
          run(kAdamUpdateBf16, e, stats, hp, t);
          run(kAdamUpdateBf16Ref, f, stats, hp, t);
          EXPECT_TRUE(same_state(a, b, Mirror::kNone)) << "adamw_update vs adamw_update_ref";
          EXPECT_TRUE(same_state(c, d, Mirror::kF16)) << "adamw_update_f16 vs its reference";
          EXPECT_TRUE(same_state(e, f, Mirror::kBf16)) << "adamw_update_bf16 vs its reference";
          // The fused variants' w, m, v, g are adamw_update's.
          EXPECT_TRUE(same_state(c, a, Mirror::kNone)) << "adamw_update_f16 vs adamw_update";
          EXPECT_TRUE(same_state(e, a, Mirror::kNone)) << "adamw_update_bf16 vs adamw_update";
          EXPECT_TRUE(all_zero_grads(a.g));
          EXPECT_TRUE(all_zero_grads(c.g));
          // The mirrors are the casts of the updated master weights.
          std::vector<f16> cast(n);
          cast_f32_to_f16_fast(cast.data(), c.w.data(), n);
          EXPECT_TRUE(same_bits("w16 vs cast_f32_to_f16(w)", c.w16, cast));
          EXPECT_TRUE(mirror_is_bf16_cast(e));
          EXPECT_TRUE(mirror_is_bf16_cast(f));
        }
      }
    }
  }
}

// The same, on buffers that start one float past an allocation (misaligned for every vector
// width), so the xsimd loads and stores are exercised unaligned.
TEST(AdamWXsimd, BitIdenticalToRefUnaligned) {
  const size_t n = 1000;
  const GradStats stats{2.7f, 0.6f};
  const AdamWHyper hp{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  OptState big = random_state(n + 1, 77);
  OptState ref = big;
  adamw_update_f16_fast(big.w.data() + 1, big.g.data() + 1, big.m.data() + 1, big.v.data() + 1,
                        big.w16.data() + 1, n, stats, hp, 2);
  adamw_update_f16(ref.w.data() + 1, ref.g.data() + 1, ref.m.data() + 1, ref.v.data() + 1,
                   ref.w16.data() + 1, n, stats, hp, 2);
  EXPECT_TRUE(same_state(big, ref, Mirror::kF16));
  EXPECT_NE(bits_of(big.g[0]), 0u) << "wrote before the range";
  // The bf16 mirror, from the same start one element past the allocation.
  OptState big_b = random_state(n + 1, 78);
  OptState ref_b = big_b;
  adamw_update_bf16_fast(big_b.w.data() + 1, big_b.g.data() + 1, big_b.m.data() + 1,
                         big_b.v.data() + 1, big_b.wb16.data() + 1, n, stats, hp, 2);
  adamw_update_bf16(ref_b.w.data() + 1, ref_b.g.data() + 1, ref_b.m.data() + 1, ref_b.v.data() + 1,
                    ref_b.wb16.data() + 1, n, stats, hp, 2);
  EXPECT_TRUE(same_state(big_b, ref_b, Mirror::kBf16));
  EXPECT_NE(bits_of(big_b.g[0]), 0u) << "wrote before the range";
  EXPECT_EQ(big_b.wb16[0].bits, 0u) << "wrote the mirror before the range";
}

// Element-wise kernels over fixed blocks: 1, 2 and 3 threads give the same bits, over several
// steps, for each kernel.
TEST(AdamWXsimd, BitIdenticalAcrossThreadCounts) {
  Threads threads;
  const GradStats stats{1.3f, 0.8f};
  const AdamWHyper hp{1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f};
  for (const AdamKernel& k : kAdamKernels) {
    for (size_t n : {size_t{100003}, size_t{1000003}}) {
      SCOPED_TRACE(::testing::Message() << k.name << " n=" << n);
      OptState results[3];
      for (int nt = 1; nt <= 3; ++nt) {
        threads.set(nt);
        ASSERT_EQ(Threads::team_size(), nt) << "OpenMP did not give the requested team size";
        OptState s = random_state(n, 5150 + n);
        for (int t = 1; t <= 3; ++t) {
          if (t > 1) s.g = random_grads(n, 900 + t);
          run(k, s, stats, hp, t);
        }
        results[nt - 1] = s;
      }
      EXPECT_TRUE(same_state(results[1], results[0], k.mirror)) << "2 threads vs 1";
      EXPECT_TRUE(same_state(results[2], results[0], k.mirror)) << "3 threads vs 1";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The fused fp16 mirror, the GPU cast and optimizer checklists: clamp(1000) and clamp(1e6) to the
// f16 range, f16(1.0) exact, the mirror in sync with the master after every step, grads zero.

// lr = 0 leaves w unchanged (w - 0·x = w for finite nonzero w), so the mirror of chosen weights
// can be checked against exact f16 values. 40 elements: two full 16-lane batches and a tail of
// 8 (five full 8-lane batches on AVX2), with the pattern repeated so each value lands in both.
TEST(AdamWMirror, ClampAndExactValues) {
  struct Case {
    float w;
    uint16_t f16_bits;
    float back;  // f32(f16)
  };
  const Case cases[] = {
      {1000.0f, 0x63D0, 1000.0f},       // representable: exactly 1000
      {1e6f, 0x7BFF, 65504.0f},         // beyond the range: clamped, not Inf
      {-1e6f, 0xFBFF, -65504.0f},       //
      {1.0f, 0x3C00, 1.0f},             // powers of two are exact
      {-1.0f, 0xBC00, -1.0f},           //
      {65504.0f, 0x7BFF, 65504.0f},     // the f16 max itself
      {65519.0f, 0x7BFF, 65504.0f},     // just above: clamped (unclamped RNE gives 65504 too)
      {65520.0f, 0x7BFF, 65504.0f},     // unclamped RNE would give Inf
      {3e38f, 0x7BFF, 65504.0f},        //
      {1.0f + 0x1p-11f, 0x3C00, 1.0f},  // tie between 1 and 1+2^-10: to even (1)
      {1.0f + 3 * 0x1p-11f, 0x3C02, 1.0f + 0x1p-9f},  // tie: to even (1+2^-9)
      {0x1p-24f, 0x0001, 0x1p-24f},                   // the smallest f16 subnormal
      {0.5f, 0x3800, 0.5f},
  };
  constexpr size_t ncases = sizeof cases / sizeof cases[0];
  constexpr size_t n = 40;
  const GradStats stats{1.0f, 1.0f};
  const AdamWHyper hp{/*lr=*/0.0f, 0.9f, 0.95f, 1e-8f, 0.1f};
  for (const AdamKernel& k : {kAdamUpdateF16, kAdamUpdateF16Ref}) {
    SCOPED_TRACE(k.name);
    OptState s{std::vector<float>(n),          random_grads(n, 3),
               std::vector<float>(n, 0.0f),    std::vector<float>(n, 0.0f),
               std::vector<f16>(n, f16(0.0f)), std::vector<bf16>(n)};
    for (size_t i = 0; i < n; ++i) s.w[i] = cases[i % ncases].w;
    const std::vector<float> w0 = s.w;
    run(k, s, stats, hp, 1);
    EXPECT_TRUE(same_bits("w (lr = 0)", s.w, w0));
    for (size_t i = 0; i < n; ++i) {
      const Case& c = cases[i % ncases];
      EXPECT_EQ(bits_of(s.w16[i]), c.f16_bits) << "w " << c.w << " at " << i;
      EXPECT_EQ(bits_of(float(s.w16[i])), bits_of(c.back)) << "w " << c.w << " at " << i;
      EXPECT_TRUE(std::isfinite(float(s.w16[i])));
    }
    EXPECT_TRUE(all_zero_grads(s.g));
  }
}

// Several real steps (lr large enough to move the weights, gradients with NaN/±Inf, weights
// near and beyond ±65504 where the clamp matters): after every step the fused mirror equals
// cast_f32_to_f16 of the master weights bit for bit, the grads are zero, and w, m, v equal those
// of adamw_update run side by side (and those of the scalar references).
TEST(AdamWMirror, InSyncWithMasterEveryStep) {
  constexpr size_t n = 4099;
  const AdamWHyper hp{0.05f, 0.9f, 0.95f, 1e-8f, 0.1f};
  OptState fused = random_state(n, 2024);
  for (size_t i = 0; i < n; i += 97) fused.w[i] = (i % 2 ? -1.0f : 1.0f) * (65504.0f + 7.0f * i);
  OptState plain = fused, fused_ref = fused;
  for (int t = 1; t <= 6; ++t) {
    SCOPED_TRACE(::testing::Message() << "step " << t);
    const std::vector<float> g = random_grads(n, 300 + t);
    fused.g = plain.g = fused_ref.g = g;
    const GradStats stats = finalize_grad_stats(reduce_norm_sq_fast(g.data(), n), 1.0f);
    run(kAdamUpdateF16, fused, stats, hp, t);
    run(kAdamUpdate, plain, stats, hp, t);
    run(kAdamUpdateF16Ref, fused_ref, stats, hp, t);
    std::vector<f16> cast(n);
    cast_f32_to_f16_fast(cast.data(), fused.w.data(), n);
    EXPECT_TRUE(same_bits("w16 vs cast_f32_to_f16(w)", fused.w16, cast));
    EXPECT_TRUE(all_zero_grads(fused.g));
    EXPECT_TRUE(same_state(fused, plain, Mirror::kNone)) << "adamw_update_f16 vs adamw_update";
    EXPECT_TRUE(same_state(fused, fused_ref, Mirror::kF16)) << "adamw_update_f16 vs its reference";
  }
  // The weights moved, and some mirrors saturated: the test exercised what it claims to.
  int saturated = 0;
  for (size_t i = 0; i < n; ++i) saturated += (bits_of(fused.w16[i]) & 0x7FFF) == 0x7BFF;
  EXPECT_GT(saturated, 10);
}

// The fused bf16 mirror's rules on chosen weights (lr = 0 leaves a finite w unchanged, as
// above): ties to even, a carry into the exponent, no clamp (bf16 has f32's exponent range, so
// 65520 and 1e6 keep their magnitude and the largest f32 rounds to +Inf), the smallest normal
// kept and an f32 subnormal that rounds up to it kept, bf16 subnormals flushed to ±0, a NaN of
// any sign and payload the one quiet NaN. 40 elements, each value in a full batch and the tail.
TEST(AdamWMirror, Bf16RoundingRules) {
  struct Case {
    uint32_t w;  // f32 bits
    uint16_t bf16_bits;
  };
  const Case cases[] = {
      {0x3F800000, 0x3F80},  // 1: exact
      {0x3F808000, 0x3F80},  // 1 + 2^-8, a tie: to even (1)
      {0x3F818000, 0x3F82},  // 1 + 3·2^-8, a tie: to even (1 + 2^-6)
      {0x3F808001, 0x3F81},  // just above the tie: up
      {0x3F7FFFFF, 0x3F80},  // the carry bumps the exponent: 1
      {0x477FF000, 0x4780},  // 65520: 65536 (f16 would clamp to 65504)
      {0x49742400, 0x4974},  // 1e6: 999424
      {0x7F7FFFFF, 0x7F80},  // the largest f32: +Inf
      {0x00800000, 0x0080},  // 2^-126, the smallest normal
      {0x007FFFFF, 0x0080},  // the largest f32 subnormal rounds up to it: kept
      {0x007F0000, 0x0000},  // a bf16 subnormal: +0
      {0x807F0000, 0x8000},  // and its negative: -0
      {0xFFA00001, 0x7FC0},  // a signalling NaN with sign and payload: 0x7FC0
  };
  constexpr size_t ncases = sizeof cases / sizeof cases[0];
  constexpr size_t n = 40;
  const GradStats stats{1.0f, 1.0f};
  const AdamWHyper hp{/*lr=*/0.0f, 0.9f, 0.95f, 1e-8f, 0.1f};
  for (const AdamKernel& k : {kAdamUpdateBf16, kAdamUpdateBf16Ref}) {
    SCOPED_TRACE(k.name);
    OptState s = random_state(n, 4);
    for (size_t i = 0; i < n; ++i) s.w[i] = float_of(cases[i % ncases].w);
    const std::vector<float> w0 = s.w;
    run(k, s, stats, hp, 1);
    for (size_t i = 0; i < n; ++i) {
      const Case& c = cases[i % ncases];
      if (!std::isnan(w0[i])) {
        EXPECT_EQ(bits_of(s.w[i]), c.w) << "w (lr = 0) at " << i;
      }
      EXPECT_EQ(s.wb16[i].bits, c.bf16_bits) << "w bits 0x" << std::hex << c.w << " at " << i;
    }
    EXPECT_TRUE(mirror_is_bf16_cast(s));
    EXPECT_TRUE(all_zero_grads(s.g));
  }
}

// Several real steps, as InSyncWithMasterEveryStep for the f16 mirror: after every step the fused
// bf16 mirror equals cast_f32_to_bf16 of the master weights, and w, m, v, g equal adamw_update's
// (and the reference's). Every 89th weight starts below 2^-126 with m = 0 and a zero gradient in
// every step, so it only decays and stays in the band whose mirror flushes to ±0; random_state's
// NaN and ±Inf weights stay non-finite.
TEST(AdamWMirror, Bf16InSyncWithMasterEveryStep) {
  constexpr size_t n = 4099;
  const AdamWHyper hp{0.05f, 0.9f, 0.95f, 1e-8f, 0.1f};
  OptState fused = random_state(n, 2025);
  for (size_t i = 0; i < n; i += 89) fused.w[i] = std::ldexp(fused.w[i], -127), fused.m[i] = 0.0f;
  OptState plain = fused, fused_ref = fused;
  for (int t = 1; t <= 6; ++t) {
    SCOPED_TRACE(::testing::Message() << "step " << t);
    std::vector<float> g = random_grads(n, 400 + t);
    for (size_t i = 0; i < n; i += 89) g[i] = 0.0f;
    fused.g = plain.g = fused_ref.g = g;
    const GradStats stats = finalize_grad_stats(reduce_norm_sq_fast(g.data(), n), 1.0f);
    run(kAdamUpdateBf16, fused, stats, hp, t);
    run(kAdamUpdate, plain, stats, hp, t);
    run(kAdamUpdateBf16Ref, fused_ref, stats, hp, t);
    EXPECT_TRUE(mirror_is_bf16_cast(fused));
    EXPECT_TRUE(all_zero_grads(fused.g));
    EXPECT_TRUE(same_state(fused, plain, Mirror::kNone)) << "adamw_update_bf16 vs adamw_update";
    EXPECT_TRUE(same_state(fused, fused_ref, Mirror::kBf16)) << "adamw_update_bf16 vs its ref";
  }
  // Mirrors flushed from nonzero weights, and NaN mirrors: the rules were exercised.
  int flushed = 0, nan = 0;
  for (size_t i = 0; i < n; ++i) {
    flushed += fused.w[i] != 0.0f && (fused.wb16[i].bits & 0x7FFF) == 0;
    nan += fused.wb16[i].bits == 0x7FC0;
  }
  EXPECT_GT(flushed, 10);
  EXPECT_GT(nan, 0);
}

// ---------------------------------------------------------------------------------------------
// learning_rate. Expected values come from the header's formulas in double; the kernel works
// in float, a few roundings each ≤ u relative, so it is held to 4·u relative.

void expect_lr(float got, double want, const char* what, int step) {
  EXPECT_LE(std::abs(double(got) - want), 4 * kU * std::abs(want))
      << what << " step " << step << ": got " << got << " want " << want;
}

TEST(LearningRate, WarmupIsLinear) {
  const LrSchedule s{6e-4f, 6e-5f, 10, 100, Schedule::kCosine};
  for (int step = 0; step < s.warmup; ++step) {
    expect_lr(learning_rate(s, step), double(s.lr) * (step + 1) / s.warmup, "warmup", step);
  }
  // The first step is lr/warmup, not 0; the last warmup step reaches lr.
  expect_lr(learning_rate(s, 0), double(s.lr) / 10, "warmup first", 0);
  expect_lr(learning_rate(s, 9), double(s.lr), "warmup last", 9);
}

TEST(LearningRate, CosineEndpointsAndMidpoint) {
  const LrSchedule s{1e-3f, 1e-4f, 10, 110, Schedule::kCosine};  // 100 decay steps
  const double lr = s.lr, mn = s.min_lr;
  const double pi = 3.14159265358979323846;
  const auto cosine = [&](int step) {
    const double p = double(step - s.warmup) / double(s.steps - s.warmup);
    return mn + 0.5 * (1 + std::cos(pi * p)) * (lr - mn);
  };
  expect_lr(learning_rate(s, 10), lr, "p=0", 10);  // start of decay: lr
  expect_lr(learning_rate(s, 35), mn + 0.5 * (1 + std::sqrt(0.5)) * (lr - mn), "p=1/4", 35);
  expect_lr(learning_rate(s, 60), 0.5 * (lr + mn), "p=1/2", 60);  // midpoint
  expect_lr(learning_rate(s, 109), cosine(109), "last step", 109);
  EXPECT_GT(learning_rate(s, 109), s.min_lr);        // p < 1 on the last step
  expect_lr(learning_rate(s, 110), mn, "p=1", 110);  // the formula's end point: min_lr
  for (int step = s.warmup; step < s.steps; ++step) {
    expect_lr(learning_rate(s, step), cosine(step), "cosine", step);
    if (step > s.warmup) {
      EXPECT_LE(learning_rate(s, step), learning_rate(s, step - 1));
    }
  }
}

TEST(LearningRate, NoWarmupStartsAtLr) {
  const LrSchedule s{3e-4f, 0.0f, 0, 50, Schedule::kCosine};
  expect_lr(learning_rate(s, 0), double(s.lr), "step 0", 0);
  expect_lr(learning_rate(s, 25), 0.5 * s.lr, "midpoint", 25);
}

TEST(LearningRate, ConstantAfterWarmup) {
  const LrSchedule s{2e-3f, 1e-5f, 5, 40, Schedule::kConstant};
  for (int step = 0; step < s.warmup; ++step) {
    expect_lr(learning_rate(s, step), double(s.lr) * (step + 1) / s.warmup, "warmup", step);
  }
  for (int step = s.warmup; step < s.steps + 10; ++step) {
    EXPECT_EQ(learning_rate(s, step), s.lr) << "step " << step;
  }
}

}  // namespace
}  // namespace reftrain
