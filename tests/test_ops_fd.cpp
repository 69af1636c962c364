// Every op's backward against central finite differences of its own forward, in double; plus the
// contracts the FD check cannot see: backward accumulates (+=), the float instantiation agrees
// with the double one, forwards match the formulas written out independently here, cross-entropy
// ignores vocabulary padding, attention is causal and writes only what its contract names.
//
// Method: for an op out = f(inputs), pick a random projection R of the output and set
// L = Σ R·out. Then ∂L/∂input is the op's backward with the upstream gradient dout = R, and each
// element of it is compared with (L(x+h) - L(x-h)) / 2h. Shapes are small and deliberately not
// multiples of 4/8/16, so no SIMD-width or block-size assumption goes unnoticed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/common/op_check.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/embed.h"
#include "ops/linear.h"
#include "ops/loss.h"
#include "ops/norm.h"
#include "ops/residual.h"

namespace reftrain {
namespace {

using namespace op_check;

// ---------------------------------------------------------------------------------------------
// The ops, each as: named differentiable inputs, an output size, and forward/backward for both
// float and double. backward(in, dout, grads) calls the kernel's backward, which accumulates
// into grads; it runs the forward first where the backward needs saved values.

struct GeluOp {
  static constexpr size_t n = 37;
  std::vector<std::string> names{"x"};
  Tensors<double> inputs;
  GeluOp() {
    Data d(11);
    inputs = {d.vec(n, -4, 4)};  // both tails and the curved middle
  }
  size_t out_size() const { return n; }
  template <typename T>
  std::vector<T> forward(const Tensors<T>& in) const {
    std::vector<T> out(n);
    gelu_forward(out.data(), in[0].data(), n);
    return out;
  }
  template <typename T>
  void backward(const Tensors<T>& in, const std::vector<T>& dout, Tensors<T>& grads) const {
    gelu_backward(grads[0].data(), in[0].data(), dout.data(), n);
  }
};

struct ResidualOp {
  static constexpr size_t n = 37;
  std::vector<std::string> names{"a", "b"};
  Tensors<double> inputs;
  ResidualOp() {
    Data d(12);
    inputs = {d.vec(n, -2, 2), d.vec(n, -2, 2)};
  }
  size_t out_size() const { return n; }
  template <typename T>
  std::vector<T> forward(const Tensors<T>& in) const {
    std::vector<T> out(n);
    residual_forward(out.data(), in[0].data(), in[1].data(), n);
    return out;
  }
  template <typename T>
  void backward(const Tensors<T>&, const std::vector<T>& dout, Tensors<T>& grads) const {
    residual_backward(grads[0].data(), grads[1].data(), dout.data(), n);
  }
};

// C = 35 spans one full 32-channel block of the backward and a partial one.
struct EmbedOp {
  static constexpr int B = 2, T = 5, C = 35, V = 11, maxT = 7;
  std::vector<std::string> names{"wte", "wpe"};
  Tensors<double> inputs;
  std::vector<int32_t> tokens;
  EmbedOp() {
    Data d(13);
    inputs = {d.vec(size_t(V) * C, -1, 1), d.vec(size_t(maxT) * C, -1, 1)};
    for (int i = 0; i < B * T; ++i) tokens.push_back(d.below(V));
    // Repeats within a row and across rows: their gradients must add up.
    tokens[1] = tokens[3] = tokens[8] = 4;
    tokens[0] = 0;
    tokens[9] = V - 1;
  }
  size_t out_size() const { return size_t(B) * T * C; }
  template <typename U>
  std::vector<U> forward(const Tensors<U>& in) const {
    std::vector<U> out(out_size());
    embed_forward(out.data(), tokens.data(), in[0].data(), in[1].data(), B, T, C);
    return out;
  }
  template <typename U>
  void backward(const Tensors<U>&, const std::vector<U>& dout, Tensors<U>& grads) const {
    embed_backward(grads[0].data(), grads[1].data(), dout.data(), tokens.data(), B, T, C);
  }
};

// C = 19 spans one full 16-channel block of the dw/db pass and a partial one.
struct LayerNormOp {
  static constexpr int N = 10, C = 19;
  std::vector<std::string> names{"x", "w", "b"};
  Tensors<double> inputs;
  LayerNormOp() {
    Data d(14);
    std::vector<double> x = d.vec(size_t(N) * C, -2, 2);
    for (int i = 0; i < N; ++i) {  // rows with different means and spreads
      const double shift = d.uniform(-3, 3), scale = d.uniform(0.5, 2);
      for (int c = 0; c < C; ++c) x[size_t(i) * C + c] = shift + scale * x[size_t(i) * C + c];
    }
    inputs = {x, d.vec(C, 0.5, 1.5), d.vec(C, -0.5, 0.5)};
  }
  size_t out_size() const { return size_t(N) * C; }
  template <typename T>
  std::vector<T> forward(const Tensors<T>& in, std::vector<T>* mean = nullptr,
                         std::vector<T>* rstd = nullptr) const {
    std::vector<T> out(out_size()), m(N), r(N);
    layernorm_forward(out.data(), m.data(), r.data(), in[0].data(), in[1].data(), in[2].data(), N,
                      C);
    if (mean) *mean = m;
    if (rstd) *rstd = r;
    return out;
  }
  template <typename T>
  void backward(const Tensors<T>& in, const std::vector<T>& dout, Tensors<T>& grads) const {
    std::vector<T> mean, rstd;
    forward(in, &mean, &rstd);
    layernorm_backward(grads[0].data(), grads[1].data(), grads[2].data(), dout.data(), in[0].data(),
                       in[1].data(), mean.data(), rstd.data(), N, C);
  }
};

// The training path's variant (the others are held to it in test_matmul.cpp).
const Matmul& blocked() {
  static const Matmul mm(MatmulKind::kBlocked);
  return mm;
}

struct LinearOp {
  static constexpr int N = 10, K = 7, O = 9;
  bool with_bias;
  std::vector<std::string> names{"inp", "w", "b"};
  Tensors<double> inputs;
  explicit LinearOp(bool bias = true) : with_bias(bias) {
    Data d(15);
    inputs = {d.vec(size_t(N) * K, -1, 1), d.vec(size_t(O) * K, -1, 1), d.vec(O, -1, 1)};
    if (!with_bias) {
      inputs.pop_back();
      names.pop_back();
    }
  }
  size_t out_size() const { return size_t(N) * O; }
  template <typename T>
  std::vector<T> forward(const Tensors<T>& in) const {
    std::vector<T> out(out_size());
    linear_forward(blocked(), out.data(), in[0].data(), in[1].data(),
                   with_bias ? in[2].data() : nullptr, N, K, O);
    return out;
  }
  template <typename T>
  void backward(const Tensors<T>& in, const std::vector<T>& dout, Tensors<T>& grads) const {
    linear_backward(blocked(), grads[0].data(), grads[1].data(),
                    with_bias ? grads[2].data() : nullptr, dout.data(), in[0].data(), in[1].data(),
                    N, K, O);
  }
};

// hs = 5: a head size that is no power of two.
struct AttentionOp {
  static constexpr int B = 2, T = 5, C = 15, NH = 3;
  std::vector<std::string> names{"qkv"};
  Tensors<double> inputs;
  AttentionOp() {
    Data d(16);
    inputs = {d.vec(size_t(B) * T * 3 * C, -1.5, 1.5)};  // scores up to ~±4: peaked softmax
  }
  size_t out_size() const { return size_t(B) * T * C; }
  size_t att_size() const { return size_t(B) * NH * T * T; }
  template <typename U>
  std::vector<U> forward(const Tensors<U>& in, std::vector<U>* att_out = nullptr) const {
    std::vector<U> out(out_size()), att(att_size());
    attention_forward(out.data(), att.data(), in[0].data(), B, T, C, NH);
    if (att_out) *att_out = att;
    return out;
  }
  template <typename U>
  void backward(const Tensors<U>& in, const std::vector<U>& dout, Tensors<U>& grads) const {
    std::vector<U> att, dp(size_t(B) * NH * T);
    forward(in, &att);
    attention_backward(grads[0].data(), dp.data(), dout.data(), in[0].data(), att.data(), B, T, C,
                       NH);
  }
};

// ---------------------------------------------------------------------------------------------
// The generic checks.

// ---------------------------------------------------------------------------------------------
// Finite differences, one TEST per op.

TEST(OpsFd, Gelu) {
  check_fd(GeluOp());
}
TEST(OpsFd, Residual) {
  check_fd(ResidualOp());
}
TEST(OpsFd, Embed) {
  // Rows of wte for tokens not in the batch and rows of wpe past T get exactly zero gradient;
  // the FD there is exactly zero too, so check_fd covers them.
  check_fd(EmbedOp());
}
TEST(OpsFd, LayerNorm) {
  check_fd(LayerNormOp());
}
TEST(OpsFd, Linear) {
  check_fd(LinearOp(true));
}
TEST(OpsFd, LinearNullBias) {
  check_fd(LinearOp(false));
}
TEST(OpsFd, Attention) {
  check_fd(AttentionOp());
}

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

// ---------------------------------------------------------------------------------------------
// Backward accumulates (+=).

TEST(OpsAccumulate, Gelu) {
  check_accumulates(GeluOp());
}
TEST(OpsAccumulate, Residual) {
  check_accumulates(ResidualOp());
}
TEST(OpsAccumulate, Embed) {
  check_accumulates(EmbedOp());
}
TEST(OpsAccumulate, LayerNorm) {
  check_accumulates(LayerNormOp());
}
TEST(OpsAccumulate, Linear) {
  check_accumulates(LinearOp(true));
}
TEST(OpsAccumulate, LinearNullBias) {
  check_accumulates(LinearOp(false));
}
TEST(OpsAccumulate, Attention) {
  check_accumulates(AttentionOp());
}

// ---------------------------------------------------------------------------------------------
// Float instantiation agrees with double.

TEST(OpsFloat, Gelu) {
  check_float_matches_double(GeluOp());
}
TEST(OpsFloat, Residual) {
  check_float_matches_double(ResidualOp());
}
TEST(OpsFloat, Embed) {
  check_float_matches_double(EmbedOp());
}
TEST(OpsFloat, LayerNorm) {
  check_float_matches_double(LayerNormOp());
}
TEST(OpsFloat, Linear) {
  check_float_matches_double(LinearOp(true));
}
TEST(OpsFloat, Attention) {
  check_float_matches_double(AttentionOp());
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
// Forwards against the formulas in the headers, written out here in long double. The double
// kernels round a handful of times per element at 2^-53 ≈ 1.1e-16 on O(1..10) values; 1e-13
// of the output's magnitude allows for that and nothing more.

void expect_matches_reference(const std::string& what, const std::vector<double>& got,
                              const std::vector<long double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::abs((long double)got[i] - want[i]), 1e-13L * std::max(1.0L, std::abs(want[i])))
        << what << "[" << i << "]: got " << got[i] << ", want " << double(want[i]);
  }
}

TEST(OpsForward, Gelu) {
  const GeluOp op;
  std::vector<long double> want;
  for (double x : op.inputs[0]) {
    const long double X = x;
    const long double u =
        std::sqrt(2.0L / 3.14159265358979323846264338327950288L) * (X + 0.044715L * X * X * X);
    want.push_back(0.5L * X * (1.0L + std::tanh(u)));
  }
  expect_matches_reference("gelu", op.forward(op.inputs), want);
  // Fixed points of the shape: gelu(0) = 0, and gelu(x) → x (x ≫ 0), → 0 (x ≪ 0).
  const std::vector<double> x = {0.0, 10.0, -10.0};
  std::vector<double> y(3);
  gelu_forward(y.data(), x.data(), 3);
  EXPECT_EQ(y[0], 0.0);
  EXPECT_NEAR(y[1], 10.0, 1e-12);
  EXPECT_NEAR(y[2], 0.0, 1e-12);
}

TEST(OpsForward, Residual) {
  const ResidualOp op;
  const std::vector<double> out = op.forward(op.inputs);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], op.inputs[0][i] + op.inputs[1][i]);
}

TEST(OpsForward, Embed) {
  const EmbedOp op;
  const std::vector<double> out = op.forward(op.inputs);
  const auto& wte = op.inputs[0];
  const auto& wpe = op.inputs[1];
  for (int b = 0; b < EmbedOp::B; ++b) {
    for (int t = 0; t < EmbedOp::T; ++t) {
      const int tok = op.tokens[size_t(b) * EmbedOp::T + t];
      for (int c = 0; c < EmbedOp::C; ++c) {
        EXPECT_EQ(out[(size_t(b) * EmbedOp::T + t) * EmbedOp::C + c],
                  wte[size_t(tok) * EmbedOp::C + c] + wpe[size_t(t) * EmbedOp::C + c]);
      }
    }
  }
}

TEST(OpsForward, LayerNorm) {
  const LayerNormOp op;
  constexpr int N = LayerNormOp::N, C = LayerNormOp::C;
  std::vector<double> mean, rstd;
  const std::vector<double> out = op.forward(op.inputs, &mean, &rstd);
  const auto& x = op.inputs[0];
  std::vector<long double> want_out, want_mean, want_rstd;
  for (int i = 0; i < N; ++i) {
    long double s = 0;
    for (int c = 0; c < C; ++c) s += x[size_t(i) * C + c];
    const long double m = s / C;
    long double var = 0;  // biased
    for (int c = 0; c < C; ++c) var += (x[size_t(i) * C + c] - m) * (x[size_t(i) * C + c] - m);
    var /= C;
    const long double r = 1.0L / std::sqrt(var + 1e-5L);
    want_mean.push_back(m);
    want_rstd.push_back(r);
    for (int c = 0; c < C; ++c) {
      want_out.push_back((x[size_t(i) * C + c] - m) * r * op.inputs[1][c] + op.inputs[2][c]);
    }
  }
  expect_matches_reference("out", out, want_out);
  expect_matches_reference("mean", mean, want_mean);
  expect_matches_reference("rstd", rstd, want_rstd);
}

TEST(OpsForward, Linear) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "with bias" : "null bias");
    const LinearOp op(bias);
    constexpr int N = LinearOp::N, K = LinearOp::K, O = LinearOp::O;
    std::vector<long double> want;
    for (int r = 0; r < N; ++r) {
      for (int o = 0; o < O; ++o) {
        long double s = bias ? op.inputs[2][o] : 0.0L;
        for (int k = 0; k < K; ++k)
          s += (long double)op.inputs[0][r * K + k] * op.inputs[1][o * K + k];
        want.push_back(s);
      }
    }
    expect_matches_reference("out", op.forward(op.inputs), want);
  }
}

TEST(OpsForward, Attention) {
  const AttentionOp op;
  constexpr int B = AttentionOp::B, T = AttentionOp::T, C = AttentionOp::C, NH = AttentionOp::NH;
  constexpr int hs = C / NH;
  const auto& qkv = op.inputs[0];
  const auto at = [&](int b, int t, int part, int h, int i) {
    return (long double)qkv[(size_t(b) * T + t) * 3 * C + size_t(part) * C + size_t(h) * hs + i];
  };
  std::vector<long double> want(op.out_size(), 0.0L);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < T; ++t) {
        std::vector<long double> e(t + 1);
        long double z = 0;
        for (int u = 0; u <= t; ++u) {
          long double s = 0;
          for (int i = 0; i < hs; ++i) s += at(b, t, 0, h, i) * at(b, u, 1, h, i);
          e[u] = std::exp(s / std::sqrt((long double)hs));  // scores are small: no shift needed
          z += e[u];
        }
        for (int u = 0; u <= t; ++u) {
          for (int i = 0; i < hs; ++i) {
            want[(size_t(b) * T + t) * C + size_t(h) * hs + i] += e[u] / z * at(b, u, 2, h, i);
          }
        }
      }
    }
  }
  expect_matches_reference("out", op.forward(op.inputs), want);
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
// Attention specifics.

// att is causal: exactly 0 above the diagonal (overwriting what was there), each row a
// probability distribution. A row sum rounds T + 3 times at most (exp, scaling, the additions),
// so it is within (T + 3)·eps of 1.
template <typename U>
void check_causal(double eps) {
  const AttentionOp op;
  constexpr int B = AttentionOp::B, T = AttentionOp::T, C = AttentionOp::C, NH = AttentionOp::NH;
  const Tensors<U> in = cast_all<U>(op.inputs);
  std::vector<U> out(op.out_size()), att(op.att_size(), U(7));
  attention_forward(out.data(), att.data(), in[0].data(), B, T, C, NH);
  for (size_t row = 0; row < size_t(B) * NH * T; ++row) {
    const int t = int(row % T);
    double sum = 0;
    for (int u = 0; u < T; ++u) {
      const U p = att[row * T + u];
      if (u > t) {
        EXPECT_EQ(p, U(0)) << "att row " << row << " col " << u;
      } else {
        EXPECT_GT(p, U(0)) << "att row " << row << " col " << u;
      }
      sum += double(p);
    }
    EXPECT_NEAR(sum, 1.0, (T + 3) * eps) << "att row " << row;
  }
  // out[t] depends on positions ≤ t only: changing q, k, v at positions > t changes nothing.
  for (int t = 0; t + 1 < T; ++t) {
    Tensors<U> in2 = in;
    for (int b = 0; b < B; ++b) {
      for (int u = t + 1; u < T; ++u) {
        for (int c = 0; c < 3 * C; ++c) in2[0][(size_t(b) * T + u) * 3 * C + c] += U(0.5);
      }
    }
    std::vector<U> out2(op.out_size()), att2(op.att_size());
    attention_forward(out2.data(), att2.data(), in2[0].data(), B, T, C, NH);
    for (int b = 0; b < B; ++b) {
      for (int s = 0; s <= t; ++s) {
        for (int c = 0; c < C; ++c) {
          const size_t k = (size_t(b) * T + s) * C + c;
          EXPECT_EQ(out2[k], out[k]) << "out[" << b << "," << s << "] moved with a later position";
        }
      }
    }
  }
}

TEST(Attention, CausalRowsSumToOneDouble) {
  check_causal<double>(0x1p-52);
}
TEST(Attention, CausalRowsSumToOneFloat) {
  check_causal<float>(0x1p-23);
}

// The backward's contract: it reads dout, qkv and att, accumulates into dqkv and uses
// dp_scratch [B,NH,T]; it writes nothing else and nothing outside those buffers. Every buffer
// sits between guard zones of sentinel values.
TEST(Attention, BackwardWritesOnlyDqkvAndScratch) {
  const AttentionOp op;
  constexpr int B = AttentionOp::B, T = AttentionOp::T, C = AttentionOp::C, NH = AttentionOp::NH;
  Guarded qkv(op.inputs[0].size(), 0), out(op.out_size(), 0), att(op.att_size(), 0);
  std::copy(op.inputs[0].begin(), op.inputs[0].end(), qkv.data());
  attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  EXPECT_TRUE(qkv.guards_intact() && out.guards_intact() && att.guards_intact())
      << "forward wrote outside its buffers";

  Data d(5);
  Guarded dout(op.out_size(), 0), dqkv(op.inputs[0].size(), 0), dp(size_t(B) * NH * T, 0);
  const std::vector<double> dout_v = d.vec(op.out_size(), -1, 1);
  std::copy(dout_v.begin(), dout_v.end(), dout.data());
  const std::vector<double> g0 = d.vec(op.inputs[0].size(), -1, 1);
  std::copy(g0.begin(), g0.end(), dqkv.data());
  const std::vector<double> qkv_before = qkv.buf, att_before = att.buf, dout_before = dout.buf;

  attention_backward(dqkv.data(), dp.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);

  EXPECT_TRUE(std::memcmp(qkv.buf.data(), qkv_before.data(), qkv.buf.size() * sizeof(double)) == 0)
      << "backward modified qkv";
  EXPECT_TRUE(std::memcmp(att.buf.data(), att_before.data(), att.buf.size() * sizeof(double)) == 0)
      << "backward modified att";
  EXPECT_TRUE(std::memcmp(dout.buf.data(), dout_before.data(), dout.buf.size() * sizeof(double)) ==
              0)
      << "backward modified dout";
  EXPECT_TRUE(dqkv.guards_intact()) << "backward wrote outside dqkv";
  EXPECT_TRUE(dp.guards_intact()) << "backward wrote outside dp_scratch [B,NH,T]";
  // And what it wrote into dqkv is g0 + the gradient (the FD test checks the gradient itself).
  std::vector<double> fresh(op.inputs[0].size(), 0.0), dp2(size_t(B) * NH * T);
  attention_backward(fresh.data(), dp2.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
  for (size_t i = 0; i < fresh.size(); ++i) {
    EXPECT_NEAR(dqkv.data()[i], g0[i] + fresh[i],
                1e-12 * (1 + std::abs(g0[i]) + std::abs(fresh[i])));
  }
}

// ---------------------------------------------------------------------------------------------
// Linear's optional outputs: a null dinp or db leaves the other gradients bit-identical.

TEST(Linear, NullDinpAndNullDbLeaveOtherGradientsUnchanged) {
  const LinearOp op(true);
  constexpr int N = LinearOp::N, K = LinearOp::K, O = LinearOp::O;
  Data d(6);
  const std::vector<double> dout = d.vec(op.out_size(), -1, 1);
  const auto& in = op.inputs;
  std::vector<double> dinp(size_t(N) * K, 0), dw(size_t(O) * K, 0), db(O, 0);
  linear_backward(blocked(), dinp.data(), dw.data(), db.data(), dout.data(), in[0].data(),
                  in[1].data(), N, K, O);
  std::vector<double> dw2(dw.size(), 0), db2(O, 0);
  linear_backward<double, double>(blocked(), nullptr, dw2.data(), db2.data(), dout.data(),
                                  in[0].data(), in[1].data(), N, K, O);
  EXPECT_EQ(dw2, dw);
  EXPECT_EQ(db2, db);
  std::vector<double> dinp3(dinp.size(), 0), dw3(dw.size(), 0);
  linear_backward<double, double>(blocked(), dinp3.data(), dw3.data(), nullptr, dout.data(),
                                  in[0].data(), in[1].data(), N, K, O);
  EXPECT_EQ(dinp3, dinp);
  EXPECT_EQ(dw3, dw);
  EXPECT_GT(max_abs(db), 1e-2);  // not vacuous
}

}  // namespace
}  // namespace reftrain
