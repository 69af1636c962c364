// The llama family's ops — RMSNorm, RoPE, SwiGLU — and the z-loss term of the cross-entropy:
// backward against central finite differences of the op's own forward in double, backward
// accumulates (+=), float agrees with double, forwards match their formulas written out here in
// long double; plus what each op promises beyond its gradient (RoPE: position 0 is the identity,
// each pair keeps its length, a worked example; SwiGLU: no overflow for large |gate|; z-loss:
// the extra term and its gradient, padding still ignored).
//
// Method, step and tolerances are those of test_ops_fd.cpp (see there for the derivation): for
// an op out = f(inputs), L = Σ R·out with a random projection R, the backward with dout = R is
// ∂L/∂input, compared element by element with (L(x+h) - L(x-h)) / 2h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/common/op_check.h"
#include "ops/activation.h"
#include "ops/loss.h"
#include "ops/norm.h"
#include "ops/rope.h"

namespace reftrain {
namespace {

using namespace op_check;

// ---------------------------------------------------------------------------------------------
// The ops, each as named differentiable inputs, an output size, and forward/backward for float
// and double; backward runs the forward first where it needs saved values.

// C = 19 spans one full 16-channel block of the dw pass and a partial one.
struct RmsNormOp {
  static constexpr int N = 10, C = 19;
  std::vector<std::string> names{"x", "w"};
  Tensors<double> inputs;
  RmsNormOp() {
    Data d(21);
    std::vector<double> x = d.vec(size_t(N) * C, -2, 2);
    for (int i = 0; i < N; ++i) {  // rows of different scales, some off-centre
      const double shift = d.uniform(-1, 1), scale = d.uniform(0.3, 3);
      for (int c = 0; c < C; ++c) x[size_t(i) * C + c] = shift + scale * x[size_t(i) * C + c];
    }
    inputs = {x, d.vec(C, 0.5, 1.5)};
  }
  size_t out_size() const { return size_t(N) * C; }
  template <typename T>
  std::vector<T> forward(const Tensors<T>& in, std::vector<T>* rstd = nullptr) const {
    std::vector<T> out(out_size()), r(N);
    rmsnorm_forward(out.data(), r.data(), in[0].data(), in[1].data(), N, C);
    if (rstd) *rstd = r;
    return out;
  }
  template <typename T>
  void backward(const Tensors<T>& in, const std::vector<T>& dout, Tensors<T>& grads) const {
    std::vector<T> rstd;
    forward(in, &rstd);
    rmsnorm_backward(grads[0].data(), grads[1].data(), dout.data(), in[0].data(), in[1].data(),
                     rstd.data(), N, C);
  }
};

// hs = 6: three pairs per head, an odd number of them. theta = 10 keeps every pair's angle
// t·theta^(-2i/hs) of order 1 over T = 5 positions, so every rotation is far from the identity.
struct RopeOp {
  static constexpr int B = 2, T = 5, NH = 3, hs = 6, C = NH * hs;
  double theta;
  std::vector<std::string> names{"x"};
  Tensors<double> inputs;
  explicit RopeOp(double th = 10.0) : theta(th) {
    Data d(22);
    inputs = {d.vec(size_t(B) * T * C, -2, 2)};
  }
  size_t out_size() const { return size_t(B) * T * C; }
  template <typename U>
  std::vector<U> forward(const Tensors<U>& in) const {
    std::vector<U> out(out_size());
    rope_forward(out.data(), in[0].data(), B, T, NH, hs, theta);
    return out;
  }
  template <typename U>
  void backward(const Tensors<U>&, const std::vector<U>& dout, Tensors<U>& grads) const {
    rope_backward(grads[0].data(), dout.data(), B, T, NH, hs, theta);
  }
};

struct SwigluOp {
  static constexpr size_t n = 37;
  std::vector<std::string> names{"gate", "up"};
  Tensors<double> inputs;
  SwigluOp() {
    Data d(23);
    inputs = {d.vec(n, -6, 6), d.vec(n, -2, 2)};  // both tails of silu and its dip near -1.28
  }
  size_t out_size() const { return n; }
  template <typename T>
  std::vector<T> forward(const Tensors<T>& in) const {
    std::vector<T> out(n);
    swiglu_forward(out.data(), in[0].data(), in[1].data(), n);
    return out;
  }
  template <typename T>
  void backward(const Tensors<T>& in, const std::vector<T>& dout, Tensors<T>& grads) const {
    swiglu_backward(grads[0].data(), grads[1].data(), dout.data(), in[0].data(), in[1].data(), n);
  }
};

// ---------------------------------------------------------------------------------------------
// The generic checks (as in test_ops_fd.cpp).

void expect_matches_reference(const std::string& what, const std::vector<double>& got,
                              const std::vector<long double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::abs((long double)got[i] - want[i]), 1e-13L * std::max(1.0L, std::abs(want[i])))
        << what << "[" << i << "]: got " << got[i] << ", want " << double(want[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// RMSNorm.

TEST(LlamaOpsFd, RmsNorm) {
  check_fd(RmsNormOp());
}
TEST(LlamaOpsAccumulate, RmsNorm) {
  check_accumulates(RmsNormOp());
}
TEST(LlamaOpsFloat, RmsNorm) {
  check_float_matches_double(RmsNormOp());
}

TEST(LlamaOpsForward, RmsNorm) {
  const RmsNormOp op;
  constexpr int N = RmsNormOp::N, C = RmsNormOp::C;
  std::vector<double> rstd;
  const std::vector<double> out = op.forward(op.inputs, &rstd);
  const auto& x = op.inputs[0];
  std::vector<long double> want_out, want_rstd;
  for (int i = 0; i < N; ++i) {
    long double sq = 0;  // no mean subtracted
    for (int c = 0; c < C; ++c) sq += (long double)x[size_t(i) * C + c] * x[size_t(i) * C + c];
    const long double r = 1.0L / std::sqrt(sq / C + 1e-5L);
    want_rstd.push_back(r);
    for (int c = 0; c < C; ++c) want_out.push_back(x[size_t(i) * C + c] * r * op.inputs[1][c]);
  }
  expect_matches_reference("out", out, want_out);
  expect_matches_reference("rstd", rstd, want_rstd);
  EXPECT_EQ(kRmsNormEps, 1e-5);
}

// eps matters where the row is small: a zero row gives rstd = 1/√eps and output 0, not NaN.
TEST(LlamaOpsForward, RmsNormZeroRow) {
  constexpr int C = 5;
  const std::vector<double> x(C, 0.0), w(C, 1.0);
  std::vector<double> out(C, 7.0), rstd(1);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), 1, C);
  EXPECT_DOUBLE_EQ(rstd[0], 1.0 / std::sqrt(1e-5));
  for (double o : out) EXPECT_EQ(o, 0.0);
}

// ---------------------------------------------------------------------------------------------
// RoPE.

TEST(LlamaOpsFd, Rope) {
  check_fd(RopeOp());
}
TEST(LlamaOpsAccumulate, Rope) {
  check_accumulates(RopeOp());
}
TEST(LlamaOpsFloat, Rope) {
  check_float_matches_double(RopeOp());
  check_float_matches_double(RopeOp(10000.0));
}

// The formula in the header, with every index written out, in long double.
TEST(LlamaOpsForward, Rope) {
  for (double theta : {10.0, 10000.0}) {
    SCOPED_TRACE("theta " + std::to_string(theta));
    const RopeOp op(theta);
    constexpr int B = RopeOp::B, T = RopeOp::T, NH = RopeOp::NH, hs = RopeOp::hs, C = RopeOp::C;
    const auto& x = op.inputs[0];
    std::vector<long double> want(op.out_size());
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < T; ++t) {
        for (int h = 0; h < NH; ++h) {
          const size_t base = (size_t(b) * T + t) * C + size_t(h) * hs;
          for (int i = 0; i < hs / 2; ++i) {
            const long double a = t * std::pow((long double)theta, -2.0L * i / hs);
            const long double x1 = x[base + i], x2 = x[base + i + hs / 2];
            want[base + i] = x1 * std::cos(a) - x2 * std::sin(a);
            want[base + i + hs / 2] = x2 * std::cos(a) + x1 * std::sin(a);
          }
        }
      }
    }
    expect_matches_reference("out", op.forward(op.inputs), want);
  }
}

// Position 0 is rotated by angle 0: exactly the identity (cos 0 = 1, sin 0 = 0).
TEST(LlamaOps, RopePositionZeroIsIdentity) {
  const RopeOp op;
  constexpr int B = RopeOp::B, T = RopeOp::T, C = RopeOp::C;
  const std::vector<double> out = op.forward(op.inputs);
  const std::vector<float> out_f = op.forward(cast_all<float>(op.inputs));
  for (int b = 0; b < B; ++b) {
    for (int c = 0; c < C; ++c) {
      const size_t k = size_t(b) * T * C + c;
      EXPECT_EQ(out[k], op.inputs[0][k]) << "b " << b << " c " << c;
      EXPECT_EQ(out_f[k], float(op.inputs[0][k])) << "float, b " << b << " c " << c;
    }
  }
}

// A rotation keeps each pair's length: x_i² + x_{i+hs/2}² before and after, to a few roundings.
TEST(LlamaOps, RopePreservesPairNorms) {
  const RopeOp op;
  constexpr int B = RopeOp::B, T = RopeOp::T, NH = RopeOp::NH, hs = RopeOp::hs, C = RopeOp::C;
  const std::vector<double> out = op.forward(op.inputs);
  const auto& x = op.inputs[0];
  for (int bt = 0; bt < B * T; ++bt) {
    for (int h = 0; h < NH; ++h) {
      for (int i = 0; i < hs / 2; ++i) {
        const size_t k = size_t(bt) * C + size_t(h) * hs + i;
        const double before = x[k] * x[k] + x[k + hs / 2] * x[k + hs / 2];
        const double after = out[k] * out[k] + out[k + hs / 2] * out[k + hs / 2];
        EXPECT_NEAR(after, before, 1e-14 * before)
            << "row " << bt << " head " << h << " pair " << i;
      }
    }
  }
}

// Worked by hand: one head, hs = 4, theta = 100, so the pairs are (x0, x2) with frequency
// 100^0 = 1 and (x1, x3) with frequency 100^(-2/4) = 0.1. At position 1 the angles are 1 and 0.1:
//   cos 1 = 0.5403023058681398, sin 1 = 0.8414709848078965
//   cos 0.1 = 0.9950041652780258, sin 0.1 = 0.09983341664682815
// and x = (1, 2, 3, 4) becomes
//   out0 = 1·cos 1 - 3·sin 1     = -1.9841106485555498
//   out1 = 2·cos 0.1 - 4·sin 0.1 =  1.5906746639687389
//   out2 = 3·cos 1 + 1·sin 1     =  2.4623779024123157
//   out3 = 4·cos 0.1 + 2·sin 0.1 =  4.1796834944057594
// At position 0 the row is unchanged. Interleaved pairing (x0, x1) would give other numbers.
TEST(LlamaOps, RopeWorkedExample) {
  const std::vector<double> x = {9, 8, 7, 6, 1, 2, 3, 4};  // [B=1, T=2, C=4]
  std::vector<double> out(8);
  rope_forward(out.data(), x.data(), 1, 2, 1, 4, 100.0);
  const double want[8] = {
      9, 8, 7, 6, -1.9841106485555498, 1.5906746639687389, 2.4623779024123157, 4.1796834944057594};
  for (int k = 0; k < 8; ++k) EXPECT_NEAR(out[k], want[k], 1e-15 * 8) << "out[" << k << "]";
  // The backward rotates back: applied to out it returns x.
  std::vector<double> back(8, 0.0);
  rope_backward(back.data(), out.data(), 1, 2, 1, 4, 100.0);
  for (int k = 0; k < 8; ++k) EXPECT_NEAR(back[k], x[k], 1e-14) << "back[" << k << "]";
}

// out may be x itself: in place gives the same bits as out of place.
TEST(LlamaOps, RopeInPlace) {
  const RopeOp op;
  const std::vector<double> out = op.forward(op.inputs);
  std::vector<double> x = op.inputs[0];
  rope_forward(x.data(), x.data(), RopeOp::B, RopeOp::T, RopeOp::NH, RopeOp::hs, op.theta);
  EXPECT_EQ(x, out);
}

// ---------------------------------------------------------------------------------------------
// SwiGLU.

TEST(LlamaOpsFd, Swiglu) {
  check_fd(SwigluOp());
}
TEST(LlamaOpsAccumulate, Swiglu) {
  check_accumulates(SwigluOp());
}
TEST(LlamaOpsFloat, Swiglu) {
  check_float_matches_double(SwigluOp());
}

TEST(LlamaOpsForward, Swiglu) {
  const SwigluOp op;
  std::vector<long double> want;
  for (size_t i = 0; i < SwigluOp::n; ++i) {
    const long double g = op.inputs[0][i];
    want.push_back(g / (1.0L + std::exp(-g)) * op.inputs[1][i]);
  }
  expect_matches_reference("out", op.forward(op.inputs), want);
}

// Large |gate|: σ must not form inf/inf. silu(g) → g for g ≫ 0 and → 0 for g ≪ 0, and so do
// the gradients: dgate → dout·up, dup → dout·g (g ≫ 0); both → 0 (g ≪ 0).
template <typename T>
void check_swiglu_extremes(T big) {
  const std::vector<T> gate = {big, -big, T(0)}, up = {T(3), T(3), T(3)}, dout = {T(2), T(2), T(2)};
  std::vector<T> out(3), dgate(3, T(0)), dup(3, T(0));
  swiglu_forward(out.data(), gate.data(), up.data(), 3);
  swiglu_backward(dgate.data(), dup.data(), dout.data(), gate.data(), up.data(), 3);
  EXPECT_EQ(out[0], big * T(3));
  EXPECT_EQ(out[1], T(0));
  EXPECT_EQ(out[2], T(0));
  EXPECT_EQ(dgate[0], T(6));  // dout·up·σ(g)(1 + g(1 - σ)) with σ = 1
  EXPECT_EQ(dgate[1], T(0));
  EXPECT_EQ(dgate[2], T(3));  // σ(0) = ½: 2·3·½
  EXPECT_EQ(dup[0], T(2) * big);
  EXPECT_EQ(dup[1], T(0));
  EXPECT_EQ(dup[2], T(0));
}
TEST(LlamaOps, SwigluLargeGateDouble) {
  check_swiglu_extremes<double>(1000.0);
}
TEST(LlamaOps, SwigluLargeGateFloat) {
  check_swiglu_extremes<float>(200.0f);
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy's z-loss term: loss_i = (lse_i - x_target) + z·lse_i²,
// dlogits = (p - onehot)·dloss + 2·z·lse·p·dloss. (Its finite-difference and float-vs-double
// checks are OpsFd.CrossEntropyZLoss and OpsFloat.CrossEntropy in test_ops_fd.cpp.)

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

}  // namespace
}  // namespace reftrain
