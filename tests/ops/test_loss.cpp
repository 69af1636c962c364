// Cross-entropy with the z-loss term (ops/loss.h). The reference's gradient against central
// finite differences of its mean loss in double, float agrees with double, the loss is
// logsumexp minus the target logit, stable for large logits, vocabulary padding ignored, the
// z-loss term and its gradient; the fast kernel close to the reference, equal to a scalar
// emulation of the 16-lane order, the same bits for any thread count (its AVX2 identity is
// checked with the norms', OpsSimd.Avx2CodeEqualsNativeCode in test_norm.cpp).
//
// Method: for an op out = f(inputs), pick a random projection R of the output and set
// L = Σ R·out. Then ∂L/∂input is the op's backward with the upstream gradient dout = R, and each
// element of it is compared with (L(x+h) - L(x-h)) / 2h. Shapes are small and deliberately not
// multiples of 4/8/16, so no SIMD-width or block-size assumption goes unnoticed.
//
// The finite-difference, accumulate and float-vs-double checks are tests/common/op_check.h;
// the fast-against-reference helpers and cases are tests/common/fast_check.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ops/loss.h"
#include "simd/math.h"
#include "tests/common/fast_check.h"
#include "tests/common/op_check.h"

namespace reftrain {
namespace {

using namespace op_check;
using namespace fast_check;

// Cross-entropy: L = mean_i loss_i, so the analytic gradient is dlogits with dloss = 1/N. The
// padding columns V..Vp-1 hold large logits (40, against ≤ 3 in the real columns): if they took
// part in the softmax they would dominate it.
// zloss is the z-loss coefficient z; 0 is plain cross-entropy. The z ≠ 0 cases use z = 0.5 so the
// z-loss term of the gradient, 2·z·lse·p/N, is as large as the cross-entropy term: a wrong or
// missing factor in it errs by far more than the tolerance.
struct LossCase {
  static constexpr int N = 10, V = 11, Vp = 16;
  double zloss;
  std::vector<double> logits;
  std::vector<int32_t> targets;
  explicit LossCase(double z = 0.0) : zloss(z) {
    Data d(17);
    logits = d.vec(size_t(N) * Vp, -3, 3);
    for (int i = 0; i < N; ++i) {
      for (int j = V; j < Vp; ++j) logits[size_t(i) * Vp + j] = 40.0;
      targets.push_back(d.below(V));
    }
    targets[0] = 0;
    targets[1] = V - 1;
  }
  template <typename T>
  std::vector<T> losses(const std::vector<T>& z, std::vector<T>* dz = nullptr) const {
    std::vector<T> l(N);
    if (dz) dz->assign(z.size(), T(123));  // garbage: the kernel writes (=) every element
    crossentropy_forward_backward(l.data(), dz ? dz->data() : nullptr, z.data(), targets.data(), N,
                                  V, Vp, T(1) / T(N), T(zloss));
    return l;
  }
  double mean_loss(const std::vector<double>& z) const {
    double s = 0;
    for (double x : losses(z)) s += x;
    return s / N;
  }
};

void check_crossentropy_fd(const LossCase& lc) {
  std::vector<double> z = lc.logits;
  std::vector<double> dz;
  lc.losses(z, &dz);
  double max_fd = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    const double x0 = z[i];
    const double xp = x0 + kFdStep, xm = x0 - kFdStep;
    z[i] = xp;
    const double lp = lc.mean_loss(z);
    z[i] = xm;
    const double lm = lc.mean_loss(z);
    z[i] = x0;
    const double fd = (lp - lm) / (xp - xm);
    max_fd = std::max(max_fd, std::abs(fd));
    EXPECT_LE(std::abs(dz[i] - fd), kFdTol * std::max(1.0, std::abs(fd)))
        << "dlogits[" << i / LossCase::Vp << "," << i % LossCase::Vp << "]: analytic " << dz[i]
        << ", finite difference " << fd;
  }
  EXPECT_GT(max_fd, 1e-2);
}

TEST(OpsFd, CrossEntropy) {
  check_crossentropy_fd(LossCase());
}
TEST(OpsFd, CrossEntropyZLoss) {
  check_crossentropy_fd(LossCase(0.5));
}

TEST(OpsFloat, CrossEntropy) {
  for (double zloss : {0.0, 0.5}) {
    SCOPED_TRACE("z = " + std::to_string(zloss));
    const LossCase lc(zloss);
    const std::vector<float> z_f = cast<float>(lc.logits);
    std::vector<float> dz_f;
    std::vector<double> dz_d;
    const std::vector<float> l_f = lc.losses(z_f, &dz_f);
    const std::vector<double> l_d = lc.losses(cast<double>(z_f), &dz_d);
    expect_float_close("losses", l_f, l_d);
    expect_float_close("dlogits", dz_f, dz_d);
  }
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy specifics.

// loss_i = logsumexp_j<V(z_ij) - z_i,target, the logsumexp summed directly in long double.
TEST(CrossEntropy, LossIsLogSumExpMinusTargetLogit) {
  const LossCase lc;
  constexpr int N = LossCase::N, V = LossCase::V, Vp = LossCase::Vp;
  const std::vector<double> l = lc.losses(lc.logits);
  std::vector<long double> want;
  for (int i = 0; i < N; ++i) {
    long double s = 0;
    for (int j = 0; j < V; ++j) s += std::exp((long double)lc.logits[size_t(i) * Vp + j]);
    want.push_back(std::log(s) - lc.logits[size_t(i) * Vp + lc.targets[i]]);
  }
  expect_matches_reference("loss", l, want);
  // No dlogits wanted: the same losses, bit for bit.
  std::vector<double> l2(N);
  crossentropy_forward_backward<double>(l2.data(), nullptr, lc.logits.data(), lc.targets.data(), N,
                                        V, Vp, 1.0 / N, 0.0);
  for (int i = 0; i < N; ++i) EXPECT_EQ(l2[i], l[i]);
}

// Logits shifted by +100 overflow a naive exp in float (e^100 > FLT_MAX); the kernel subtracts
// the row max. Compared with a long double reference on the same float-rounded logits; the float
// kernel rounds values of size |lse| ≈ 103, so it errs by a few ulps of |lse| (8·2^-24·|lse|).
TEST(CrossEntropy, StableForLargeLogits) {
  const LossCase lc;
  constexpr int N = LossCase::N, V = LossCase::V, Vp = LossCase::Vp;
  std::vector<float> z(lc.logits.size());
  for (size_t i = 0; i < z.size(); ++i) z[i] = float(lc.logits[i] + 100.0);
  std::vector<float> dz;
  const std::vector<float> l = lc.losses(z, &dz);
  for (int i = 0; i < N; ++i) {
    long double m = z[size_t(i) * Vp];
    for (int j = 1; j < V; ++j) m = std::max(m, (long double)z[size_t(i) * Vp + j]);
    long double s = 0;
    for (int j = 0; j < V; ++j) s += std::exp(z[size_t(i) * Vp + j] - m);
    const long double lse = m + std::log(s);
    const long double want = lse - z[size_t(i) * Vp + lc.targets[i]];
    EXPECT_LE(std::abs(l[i] - want), 8 * 0x1p-24L * lse) << "row " << i;
  }
  for (float g : dz) EXPECT_TRUE(std::isfinite(g));
}

// Padding columns: exactly zero gradient (overwriting the buffer's garbage), and their values
// change nothing, bit for bit.
TEST(CrossEntropy, PaddedColumnsIgnored) {
  const LossCase lc;
  constexpr int N = LossCase::N, V = LossCase::V, Vp = LossCase::Vp;
  std::vector<double> dz;
  const std::vector<double> l = lc.losses(lc.logits, &dz);
  for (int i = 0; i < N; ++i) {
    double row_sum = 0;
    for (int j = 0; j < Vp; ++j) {
      const double g = dz[size_t(i) * Vp + j];
      if (j >= V) {
        EXPECT_EQ(g, 0.0) << "padded dlogits[" << i << "," << j << "]";
      }
      row_sum += g;
    }
    // softmax sums to 1 and the one-hot to 1: each real row of dlogits sums to 0.
    EXPECT_NEAR(row_sum, 0.0, 1e-15);
  }
  for (double pad : {-1e4, 0.0, 1e4}) {
    std::vector<double> z = lc.logits;
    for (int i = 0; i < N; ++i) {
      for (int j = V; j < Vp; ++j) z[size_t(i) * Vp + j] = pad;
    }
    std::vector<double> dz2;
    const std::vector<double> l2 = lc.losses(z, &dz2);
    for (int i = 0; i < N; ++i) EXPECT_EQ(l2[i], l[i]) << "pad " << pad << " row " << i;
    for (size_t k = 0; k < dz.size(); ++k) EXPECT_EQ(dz2[k], dz[k]) << "pad " << pad;
  }
  // Float too.
  std::vector<float> dz_f;
  lc.losses(cast<float>(lc.logits), &dz_f);
  for (int i = 0; i < N; ++i) {
    for (int j = V; j < Vp; ++j) EXPECT_EQ(dz_f[size_t(i) * Vp + j], 0.0f);
  }
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy's z-loss term: loss_i = (lse_i - x_target) + z·lse_i²,
// dlogits = (p - onehot)·dloss + 2·z·lse·p·dloss. (Its finite-difference and float-vs-double
// checks are OpsFd.CrossEntropyZLoss and OpsFloat.CrossEntropy above.)

struct ZLossCase {
  static constexpr int N = 6, V = 9, Vp = 12;
  std::vector<double> logits;
  std::vector<int32_t> targets;
  ZLossCase() {
    Data d(24);
    logits = d.vec(size_t(N) * Vp, -2, 4);  // lse ≈ 4..5: z·lse² is not small next to the CE
    for (int i = 0; i < N; ++i) {
      for (int j = V; j < Vp; ++j) logits[size_t(i) * Vp + j] = 40.0;
      targets.push_back(d.below(V));
    }
  }
  std::vector<double> run(double z, std::vector<double>* dz,
                          const std::vector<double>* other_logits = nullptr) const {
    const std::vector<double>& x = other_logits ? *other_logits : logits;
    std::vector<double> l(N);
    dz->assign(x.size(), 123.0);
    crossentropy_forward_backward(l.data(), dz->data(), x.data(), targets.data(), N, V, Vp, 1.0 / N,
                                  z);
    return l;
  }
  long double lse(int i) const {
    long double s = 0;
    for (int j = 0; j < V; ++j) s += std::exp((long double)logits[size_t(i) * Vp + j]);
    return std::log(s);
  }
};

TEST(ZLoss, LossAndGradientMatchFormula) {
  const ZLossCase zc;
  constexpr int N = ZLossCase::N, V = ZLossCase::V, Vp = ZLossCase::Vp;
  const double z = 0.25;
  std::vector<double> dz;
  const std::vector<double> l = zc.run(z, &dz);
  std::vector<long double> want_l, want_dz;
  for (int i = 0; i < N; ++i) {
    const long double lse = zc.lse(i);
    want_l.push_back(lse - zc.logits[size_t(i) * Vp + zc.targets[i]] + z * lse * lse);
    for (int j = 0; j < Vp; ++j) {
      if (j >= V) {
        want_dz.push_back(0.0L);
        continue;
      }
      const long double p = std::exp(zc.logits[size_t(i) * Vp + j] - lse);
      const long double onehot = j == zc.targets[i] ? 1.0L : 0.0L;
      want_dz.push_back((p - onehot) / N + 2.0L * z * lse * p / N);
    }
  }
  expect_matches_reference("loss", l, want_l);
  expect_matches_reference("dlogits", dz, want_dz);
}

// With z the row of dlogits no longer sums to 0 but to 2·z·lse·dloss (Σp = 1); padding still
// gets exactly zero gradient and its values change nothing.
TEST(ZLoss, RowSumsAndPadding) {
  const ZLossCase zc;
  constexpr int N = ZLossCase::N, V = ZLossCase::V, Vp = ZLossCase::Vp;
  const double z = 0.25;
  std::vector<double> dz;
  const std::vector<double> l = zc.run(z, &dz);
  for (int i = 0; i < N; ++i) {
    double row_sum = 0;
    for (int j = 0; j < Vp; ++j) {
      if (j >= V) {
        EXPECT_EQ(dz[size_t(i) * Vp + j], 0.0) << "padded [" << i << "," << j << "]";
      }
      row_sum += dz[size_t(i) * Vp + j];
    }
    const double want = 2.0 * z * double(zc.lse(i)) / N;
    EXPECT_NEAR(row_sum, want, 1e-14 * std::abs(want) + 1e-15) << "row " << i;
  }
  std::vector<double> x = zc.logits;
  for (int i = 0; i < N; ++i) {
    for (int j = V; j < Vp; ++j) x[size_t(i) * Vp + j] = -1e4;
  }
  std::vector<double> dz2;
  EXPECT_EQ(zc.run(z, &dz2, &x), l);
  EXPECT_EQ(dz2, dz);
}

// The z term adds exactly z·lse² to each loss (compare with the same call at z = 0), and a
// negative z flips its sign: the loss is linear in z.
TEST(ZLoss, TermIsAdditive) {
  const ZLossCase zc;
  std::vector<double> dz0, dz1, dz2;
  const std::vector<double> l0 = zc.run(0.0, &dz0);
  const std::vector<double> l1 = zc.run(0.5, &dz1);
  const std::vector<double> l2 = zc.run(-0.5, &dz2);
  for (int i = 0; i < ZLossCase::N; ++i) {
    const double lse = double(zc.lse(i));
    EXPECT_NEAR(l1[i] - l0[i], 0.5 * lse * lse, 1e-13 * lse * lse) << "row " << i;
    EXPECT_NEAR(l0[i] - l2[i], 0.5 * lse * lse, 1e-13 * lse * lse) << "row " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy with z-loss.
//
// Tolerance: both paths compute lse from a sum of V positive terms (each exponential within
// 3 ulp, its argument x - m or x - lse rounded once, |x - lse| ≤ 12 here), so lse, and with it
// each loss, differs by at most (V + 16 + 2·12)·u absolute plus a few ulp of the loss:
// (V + 64)·u·max(1, |loss|). Each probability p_j = e_j/sum (fast) or e^(x_j - lse)
// (reference) differs by the same relative amount, so every dlogits element is held to
// (V + 64)·u of its own magnitude — per element, so a wrong small probability fails too —
// with the target element's cancellation (p_t - 1) allowed (V + 64)·u·dloss·(1 + 2z·|lse|).

void expect_loss_close(const FastLossCase& c, const Buf& fast, const Buf& ref) {
  for (int i = 0; i < c.N; ++i) {
    const double bound = c.tol() * std::max(1.0, std::abs(double(ref[i])));
    EXPECT_LE(std::abs(double(fast[i]) - double(ref[i])), bound)
        << "loss[" << i << "]: fast " << fast[i] << ", reference " << ref[i];
  }
}

void expect_dlogits_close(const FastLossCase& c, const Buf& fast, const Buf& ref) {
  for (int i = 0; i < c.N; ++i) {
    for (int j = 0; j < c.Vp; ++j) {
      const size_t k = size_t(i) * c.Vp + j;
      if (j >= c.V) {
        EXPECT_EQ(fast[k], 0.0f) << "padding dlogits[" << i << "," << j << "]";
        continue;
      }
      // |lse| ≤ 3 + log V ≤ 9 for these logits.
      const double target_term = j == c.targets[i] ? c.dloss * (1 + 2 * c.z * 9.0) : 0.0;
      const double bound = c.tol() * (std::abs(double(ref[k])) + target_term);
      EXPECT_LE(std::abs(double(fast[k]) - double(ref[k])), bound)
          << "dlogits[" << i << "," << j << "]: fast " << fast[k] << ", reference " << ref[k];
    }
  }
}

TEST(OpsSimd, CrossEntropyCloseToReference) {
  for (float z : {0.0f, 0.5f}) {
    for (int V : kOddSizes) {
      SCOPED_TRACE("V = " + std::to_string(V) + ", z = " + std::to_string(z));
      const FastLossCase c(V, z);
      Buf ref(c.N), fast(c.N), only_loss(c.N);
      Buf dref(size_t(c.N) * c.Vp, 123.0f), dfast(size_t(c.N) * c.Vp, 123.0f);  // written (=)
      crossentropy_forward_backward(ref.p(), dref.p(), c.logits.p(), c.targets.data(), c.N, V, c.Vp,
                                    c.dloss, c.z);
      crossentropy_forward_backward_fast(fast.p(), dfast.p(), c.logits.p(), c.targets.data(), c.N,
                                         V, c.Vp, c.dloss, c.z);
      expect_loss_close(c, fast, ref);
      expect_dlogits_close(c, dfast, dref);
      crossentropy_forward_backward_fast(only_loss.p(), nullptr, c.logits.p(), c.targets.data(),
                                         c.N, V, c.Vp, c.dloss, c.z);
      expect_bits_equal("losses without dlogits", only_loss, fast);
    }
  }
}

TEST(OpsSimd, CrossEntropyEqualsScalarEmulation) {
  for (float z : {0.0f, 0.5f}) {
    for (int V : kOddSizes) {
      SCOPED_TRACE("V = " + std::to_string(V) + ", z = " + std::to_string(z));
      const FastLossCase c(V, z);
      Buf loss(c.N), dx(size_t(c.N) * c.Vp), emu_loss(c.N), emu_dx(size_t(c.N) * c.Vp);
      crossentropy_forward_backward_fast(loss.p(), dx.p(), c.logits.p(), c.targets.data(), c.N, V,
                                         c.Vp, c.dloss, c.z);
      for (int i = 0; i < c.N; ++i) {
        const float* x = c.logits.p() + size_t(i) * c.Vp;
        float* d = emu_dx.p() + size_t(i) * c.Vp;
        const int t = c.targets[i];
        const float m = emulate_max16(V, [&](float a, size_t j) { return a > x[j] ? a : x[j]; });
        const float sum =
            emulate_sum16(V, [&](float a, size_t j) { return a + simd::exp(x[j] - m); });
        const float lse = m + std::log(sum);
        float loss_i = lse - x[t];
        if (z != 0.0f) loss_i += z * lse * lse;
        emu_loss.p()[i] = loss_i;
        const float coef = z != 0.0f ? c.dloss + 2.0f * z * lse * c.dloss : c.dloss;
        for (int j = 0; j < V; ++j) d[j] = simd::exp(x[j] - m) * (coef / sum);
        const float p_t = simd::exp(x[t] - m) / sum;
        d[t] = (p_t - 1.0f) * c.dloss;
        if (z != 0.0f) d[t] += 2.0f * z * lse * p_t * c.dloss;
      }
      expect_bits_equal("losses", loss, emu_loss);
      expect_bits_equal("dlogits", dx, emu_dx);
    }
  }
}

TEST(OpsSimd, CrossEntropyIsThreadCountInvariant) {
  const FastLossCase c(385, 0.5f);
  expect_thread_count_invariant([&] {
    Buf loss(c.N), dx(size_t(c.N) * c.Vp);
    crossentropy_forward_backward_fast(loss.p(), dx.p(), c.logits.p(), c.targets.data(), c.N, c.V,
                                       c.Vp, c.dloss, c.z);
    std::vector<float> all = loss.vec(), d = dx.vec();
    all.insert(all.end(), d.begin(), d.end());
    return all;
  });
}

}  // namespace
}  // namespace reftrain
