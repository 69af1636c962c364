// The harness of the op tests (tests/ops/test_*.cpp): deterministic data, the projected loss
// L = Σ R·out of an op, and the three checks every op gets — backward against central finite
// differences in double, backward accumulates (+=), and the float instantiation against the
// double one — plus the forward against its formula written out in long double.
//
// An op is a struct with `names` and `inputs` (its differentiable inputs, in double), `out_size()`,
// and templated `std::vector<T> forward(const Tensors<T>& in)` and `backward(const Tensors<T>& in,
// const std::vector<T>& dout, Tensors<T>& grads)` calling the kernel; see the test files.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

namespace reftrain::op_check {

template <typename T>
using Tensors = std::vector<std::vector<T>>;

// Central-difference step and tolerance. With h = 1e-5 the truncation error is
// h²/6·|L'''| ≈ 2e-11·|L'''| and the rounding error ≈ 2^-53·|L|/h ≈ 1e-11·|L|; L and its
// derivatives are O(1..10) here, so a correct gradient agrees to ~1e-10. 1e-6 relative (absolute
// below 1) keeps four orders of margin, while a wrong or missing term of a gradient errs by the
// size of that term, O(1e-2..1) for these O(1) inputs.
constexpr double kFdStep = 1e-5;
constexpr double kFdTol = 1e-6;
// Float vs double: float rounds each operation to 2^-24 ≈ 6e-8 relative; the sums here have at
// most ~40 terms, so errors stay below ~40·6e-8 ≈ 2.4e-6 of the tensor's largest magnitude.
constexpr double kFloatTol = 1e-5;

using Data = testing::TestData;

template <typename To, typename From>
std::vector<To> cast(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

template <typename To, typename From>
Tensors<To> cast_all(const Tensors<From>& ts) {
  Tensors<To> out;
  for (const auto& t : ts) out.push_back(cast<To>(t));
  return out;
}

template <typename T>
Tensors<T> zeros_like(const Tensors<double>& ts) {
  Tensors<T> out;
  for (const auto& t : ts) out.emplace_back(t.size(), T(0));
  return out;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

template <class Op>
double projected_loss(const Op& op, const Tensors<double>& in, const std::vector<double>& R) {
  const std::vector<double> out = op.template forward<double>(in);
  double L = 0;
  for (size_t i = 0; i < out.size(); ++i) L += R[i] * out[i];
  return L;
}

// Backward (dout = R) against the central difference of L = Σ R·out, for every element of every
// input.
template <class Op>
void check_fd(const Op& op) {
  Data d(99);
  const std::vector<double> R = d.vec(op.out_size(), -1, 1);
  Tensors<double> in = op.inputs;
  Tensors<double> grads = zeros_like<double>(in);
  op.template backward<double>(in, R, grads);
  for (size_t k = 0; k < in.size(); ++k) {
    std::vector<double> fd(in[k].size());
    for (size_t i = 0; i < in[k].size(); ++i) {
      const double x0 = in[k][i];
      const double xp = x0 + kFdStep, xm = x0 - kFdStep;
      in[k][i] = xp;
      const double lp = projected_loss(op, in, R);
      in[k][i] = xm;
      const double lm = projected_loss(op, in, R);
      in[k][i] = x0;
      fd[i] = (lp - lm) / (xp - xm);
      EXPECT_LE(std::abs(grads[k][i] - fd[i]), kFdTol * std::max(1.0, std::abs(fd[i])))
          << op.names[k] << "[" << i << "]: analytic " << grads[k][i] << ", finite difference "
          << fd[i];
    }
    // Not vacuous: every input does move L.
    EXPECT_GT(max_abs(fd), 1e-2) << op.names[k] << " does not affect the output";
  }
}

// Backward on a buffer that already holds g0 must leave g0 + (backward on zeros). The only
// difference allowed is double rounding of ~50 O(1) terms (~1e-14); 1e-12 of the magnitudes
// keeps a margin, while an overwriting backward errs by |g0| ~ 0.5.
template <class Op>
void check_accumulates(const Op& op) {
  Data d(98);
  const std::vector<double> R = d.vec(op.out_size(), -1, 1);
  const Tensors<double>& in = op.inputs;
  Tensors<double> g0;
  for (const auto& t : in) g0.push_back(d.vec(t.size(), -1, 1));
  Tensors<double> acc = g0;
  Tensors<double> fresh = zeros_like<double>(in);
  op.template backward<double>(in, R, acc);
  op.template backward<double>(in, R, fresh);
  for (size_t k = 0; k < in.size(); ++k) {
    EXPECT_GT(max_abs(fresh[k]), 1e-2) << op.names[k] << ": zero gradient, test is vacuous";
    for (size_t i = 0; i < in[k].size(); ++i) {
      const double want = g0[k][i] + fresh[k][i];
      EXPECT_LE(std::abs(acc[k][i] - want),
                1e-12 * (1 + std::abs(g0[k][i]) + std::abs(fresh[k][i])))
          << op.names[k] << "[" << i << "]: got " << acc[k][i] << ", g0 " << g0[k][i] << " + grad "
          << fresh[k][i];
    }
  }
}

inline void expect_float_close(const std::string& what, const std::vector<float>& f,
                               const std::vector<double>& d) {
  ASSERT_EQ(f.size(), d.size()) << what;
  const double scale = max_abs(d);
  ASSERT_GT(scale, 0.0) << what << " is all zero: test is vacuous";
  for (size_t i = 0; i < d.size(); ++i) {
    EXPECT_LE(std::abs(double(f[i]) - d[i]), kFloatTol * scale)
        << what << "[" << i << "]: float " << f[i] << ", double " << d[i];
  }
}

// The float instantiation on float-rounded inputs against the double one on the same values
// (widened), so the only difference is arithmetic precision.
template <class Op>
void check_float_matches_double(const Op& op) {
  Data d(97);
  const std::vector<float> R_f = cast<float>(d.vec(op.out_size(), -1, 1));
  const std::vector<double> R_d = cast<double>(R_f);
  const Tensors<float> in_f = cast_all<float>(op.inputs);
  const Tensors<double> in_d = cast_all<double>(in_f);
  expect_float_close("out", op.template forward<float>(in_f), op.template forward<double>(in_d));
  Tensors<float> g_f = zeros_like<float>(op.inputs);
  Tensors<double> g_d = zeros_like<double>(op.inputs);
  op.template backward<float>(in_f, R_f, g_f);
  op.template backward<double>(in_d, R_d, g_d);
  for (size_t k = 0; k < g_d.size(); ++k) expect_float_close("d" + op.names[k], g_f[k], g_d[k]);
}

// Forwards against the formulas in the headers, written out by each test in long double. The
// double kernels round a handful of times per element at 2^-53 ≈ 1.1e-16 on O(1..10) values;
// 1e-13 of the output's magnitude allows for that and nothing more.
inline void expect_matches_reference(const std::string& what, const std::vector<double>& got,
                                     const std::vector<long double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::abs((long double)got[i] - want[i]), 1e-13L * std::max(1.0L, std::abs(want[i])))
        << what << "[" << i << "]: got " << got[i] << ", want " << double(want[i]);
  }
}

// A buffer between guard zones of sentinel values, to catch writes outside it.
constexpr size_t kGuard = 64;
constexpr double kSentinel = -777.25;
struct Guarded {
  std::vector<double> buf;
  size_t n;
  Guarded(size_t size, double fill) : buf(size + 2 * kGuard, kSentinel), n(size) {
    std::fill(buf.begin() + kGuard, buf.begin() + kGuard + n, fill);
  }
  double* data() { return buf.data() + kGuard; }
  bool guards_intact() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (buf[i] != kSentinel || buf[kGuard + n + i] != kSentinel) return false;
    }
    return true;
  }
};

}  // namespace reftrain::op_check
