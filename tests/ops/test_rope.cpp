// RoPE (ops/rope.h, llama). The reference backward against central finite differences of its
// own forward in double, backward accumulates (+=), float agrees with double, the forward
// matches its formula written out here in long double; what RoPE promises beyond its gradient
// (position 0 is the identity, each pair keeps its length, a worked example, in place); the
// fast kernels equal the reference bit for bit.
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

#include "ops/rope.h"
#include "tests/common/fast_check.h"
#include "tests/common/op_check.h"

namespace reftrain {
namespace {

using namespace op_check;
using namespace fast_check;

// ---------------------------------------------------------------------------------------------
// The op, with named differentiable inputs, an output size, and forward/backward for float
// and double.

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
// Residual, embedding and RoPE: no reductions and no transcendentals, so the fast path does the
// reference's operations in the reference's order — bit-identical, tolerance 0.

TEST(OpsSimd, RopeEqualsReference) {
  for (int half : {1, 7, 33, 100}) {
    SCOPED_TRACE("hs = " + std::to_string(2 * half));
    const RopeCase c(half);
    Buf ref(c.x.size()), fast(c.x.size());
    rope_forward(ref.p(), c.x.p(), c.B, c.T, c.NH, c.hs, 10000.0);
    rope_forward_fast(fast.p(), c.x.p(), c.B, c.T, c.NH, c.hs, 10000.0);
    expect_bits_equal("out", fast, ref);
    Buf in_place = c.x;  // out may be x
    rope_forward_fast(in_place.p(), in_place.p(), c.B, c.T, c.NH, c.hs, 10000.0);
    expect_bits_equal("in place", in_place, ref);
    Buf dref = c.d0, dfast = c.d0;  // accumulates
    rope_backward(dref.p(), c.x.p(), c.B, c.T, c.NH, c.hs, 10000.0);
    rope_backward_fast(dfast.p(), c.x.p(), c.B, c.T, c.NH, c.hs, 10000.0);
    expect_bits_equal("dx", dfast, dref);
  }
}

}  // namespace
}  // namespace reftrain
