// optim/adamw.h and optim/schedule.h against the formulas of DESIGN.md (section Optimizer),
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

#include "optim/adamw.h"
#include "optim/schedule.h"

namespace reftrain {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
// Unit roundoff of float: one rounding errs by at most u relative to its result.
constexpr double kU = 0x1p-24;

// Deterministic data: mt19937_64's sequence is fixed by the standard; the mapping to [0, 1) is
// done here so no library distribution is involved.
class Data {
 public:
  explicit Data(uint64_t seed) : gen_(seed) {}
  double unit() { return double(gen_() >> 11) * 0x1p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }
  uint64_t below(uint64_t n) { return gen_() % n; }

 private:
  std::mt19937_64 gen_;
};

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

// ---------------------------------------------------------------------------------------------
// reduce_norm_sq

// Small integers: every square and every partial sum is an integer below 2^53, so any order of
// summation gives the exact answer; the kernel must equal the integer reference exactly.
// NaN, +Inf and -Inf are placed at the first, last and a middle element.
TEST(ReduceNormSq, ExactOnIntegersWithNonFinite) {
  for (size_t n : {size_t{1}, size_t{2}, size_t{63}, size_t{64}, size_t{65}, size_t{1000003}}) {
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
    EXPECT_EQ(reduce_norm_sq(g.data(), n), double(expected)) << "n " << n;
  }
  const float one[1] = {3.0f};
  EXPECT_EQ(reduce_norm_sq(one, 1), 9.0);
  const float nan_only[1] = {kNaN};
  EXPECT_EQ(reduce_norm_sq(nan_only, 1), 0.0);
}

// Random magnitudes over 40 binades. Each g² is exact in double (24-bit mantissa squared), so
// the only error is the summation: any order of n - 1 double additions of non-negative terms
// errs by at most (n - 1)·2^-53·Σ. The reference sums in long double (64-bit mantissa), whose
// own error is 2^11 times smaller, so the bound n·2^-53·ref holds for a correct kernel. A
// dropped element (one of 1e6, each ~1e-6 of the total) or a kept Inf/NaN fails.
TEST(ReduceNormSq, MatchesLongDoubleReference) {
  for (size_t n : {size_t{1}, size_t{63}, size_t{1000}, size_t{1000003}}) {
    const std::vector<float> g = spread_with_nonfinite(n, 17 + n);
    long double ref = 0;
    for (float x : g) {
      if (std::isfinite(x)) ref += (long double)x * (long double)x;
    }
    const double got = reduce_norm_sq(g.data(), n);
    const double bound = double(n) * 0x1p-53 * double(ref);
    EXPECT_LE(std::abs(got - double(ref)), bound) << "n " << n;
  }
}

// Deterministic for any thread count: with 1, 2 and 3 threads the result is bitwise identical.
// The data span 40 binades, so a per-thread split (or any other change of order) would change
// the rounding.
TEST(ReduceNormSq, BitIdenticalAcrossThreadCounts) {
  const int saved = omp_get_max_threads();
  const bool saved_dynamic = omp_get_dynamic();
  omp_set_dynamic(0);
  for (size_t n : {size_t{63}, size_t{1000003}}) {
    const std::vector<float> g = spread_with_nonfinite(n, 99 + n);
    double results[3];
    for (int threads = 1; threads <= 3; ++threads) {
      omp_set_num_threads(threads);
      int team = 0;
#pragma omp parallel
      {
#pragma omp single
        team = omp_get_num_threads();
      }
      ASSERT_EQ(team, threads) << "OpenMP did not give the requested team size";
      results[threads - 1] = reduce_norm_sq(g.data(), n);
    }
    EXPECT_EQ(std::memcmp(&results[0], &results[1], sizeof(double)), 0) << "n " << n;
    EXPECT_EQ(std::memcmp(&results[0], &results[2], sizeof(double)), 0) << "n " << n;
  }
  omp_set_num_threads(saved);
  omp_set_dynamic(saved_dynamic);
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
// adamw_update against the DESIGN.md formulas in double:
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
struct AdamCase {
  int t;
  float wd;
};

void run_adamw_case(const AdamCase& c) {
  SCOPED_TRACE(testing::Message() << "t=" << c.t << " wd=" << c.wd);
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

  adamw_update(w.data(), g.data(), m.data(), v.data(), n, stats, hp, c.t);

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
TEST(AdamW, NonFiniteGradIsZeroGrad) {
  const AdamWHyper hp{0.01f, 0.9f, 0.999f, 1e-8f, 0.1f};
  const GradStats stats{1.0f, 1.0f};
  std::vector<float> w = {0.5f, -0.25f, 0.75f}, m = {0.01f, -0.02f, 0.03f},
                     v = {1e-4f, 2e-4f, 3e-4f};
  std::vector<float> w2 = w, m2 = m, v2 = v;
  std::vector<float> g_bad = {kNaN, kInf, -kInf};
  std::vector<float> g_zero = {0.0f, 0.0f, 0.0f};
  adamw_update(w.data(), g_bad.data(), m.data(), v.data(), 3, stats, hp, 3);
  adamw_update(w2.data(), g_zero.data(), m2.data(), v2.data(), 3, stats, hp, 3);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isfinite(w[i]) && std::isfinite(m[i]) && std::isfinite(v[i]));
    EXPECT_EQ(w[i], w2[i]);
    EXPECT_EQ(m[i], m2[i]);
    EXPECT_EQ(v[i], v2[i]);
    EXPECT_EQ(g_bad[i], 0.0f);
  }
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
