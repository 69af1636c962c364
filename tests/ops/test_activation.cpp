// GELU (gpt2; the tanh and the exact erf forms) and SwiGLU (llama), ops/activation.h. The
// references' backward against central finite differences of their own forward in double, backward
// accumulates (+=), float agrees with double, forwards match their formulas written out here in
// long double, SwiGLU does not overflow for large |gate|; the fast kernels close to the reference,
// their vector lanes equal to the scalar tail, the same bits for any thread count and for the AVX2
// build.
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
#include <functional>
#include <string>
#include <vector>

#include "ops/activation.h"
#ifdef REFTRAIN_AVX2_TWIN
#include "tests/common/avx2_kernels.h"
#endif
#include "tests/common/fast_check.h"
#include "tests/common/op_check.h"

namespace reftrain {
namespace {

using namespace op_check;
using namespace fast_check;

// ---------------------------------------------------------------------------------------------
// The ops, each as named differentiable inputs, an output size, and forward/backward for
// float and double.

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

struct GeluErfOp {
  static constexpr size_t n = 37;
  std::vector<std::string> names{"x"};
  Tensors<double> inputs;
  GeluErfOp() {
    Data d(13);
    inputs = {d.vec(n, -5, 5)};  // both tails and the curved middle
  }
  size_t out_size() const { return n; }
  template <typename T>
  std::vector<T> forward(const Tensors<T>& in) const {
    std::vector<T> out(n);
    gelu_erf_forward(out.data(), in[0].data(), n);
    return out;
  }
  template <typename T>
  void backward(const Tensors<T>& in, const std::vector<T>& dout, Tensors<T>& grads) const {
    gelu_erf_backward(grads[0].data(), in[0].data(), dout.data(), n);
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
// GELU.

TEST(OpsFd, Gelu) {
  check_fd(GeluOp());
}

TEST(OpsAccumulate, Gelu) {
  check_accumulates(GeluOp());
}

TEST(OpsFloat, Gelu) {
  check_float_matches_double(GeluOp());
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

// ---------------------------------------------------------------------------------------------
// GELU, exact erf form.

TEST(OpsFd, GeluErf) {
  check_fd(GeluErfOp());
}

TEST(OpsAccumulate, GeluErf) {
  check_accumulates(GeluErfOp());
}

TEST(OpsFloat, GeluErf) {
  check_float_matches_double(GeluErfOp());
}

TEST(OpsForward, GeluErf) {
  const GeluErfOp op;
  std::vector<long double> want;
  for (double x : op.inputs[0]) {
    const long double X = x;
    want.push_back(0.5L * X * (1.0L + std::erf(X / std::sqrt(2.0L))));
  }
  expect_matches_reference("gelu_erf", op.forward(op.inputs), want);
  // gelu_erf(x) = x·Φ(x): Φ(1) = 0.841344746068543 (a table value), and the tails → x and 0.
  const std::vector<double> x = {0.0, 1.0, 10.0, -10.0};
  std::vector<double> y(4);
  gelu_erf_forward(y.data(), x.data(), 4);
  EXPECT_EQ(y[0], 0.0);
  EXPECT_NEAR(y[1], 0.841344746068543, 1e-15);
  EXPECT_NEAR(y[2], 10.0, 1e-12);
  EXPECT_NEAR(y[3], 0.0, 1e-12);
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
// GELU and SwiGLU: elementwise, so the vector lanes must give exactly what the scalar tail gives
// for the same element — checked by running the kernel on one element at a time (n = 1 is all
// tail). 4096 + 37 elements span two of parallel_for_each16's blocks.
//
// Tolerance against the reference, per element: simd::tanh/sigmoid and libm's tanhf/expf are
// each within 3 ulp of the exact function (tests/simd/test_simd_math.cpp), and the formulas
// differ in a few FMAs, so each element differs by a few u of the magnitude of the terms that
// make it up:
//   gelu = h + h·tanh u (h = x/2): the terms are ≤ |x|; tanh's argument differs by ~3u·|u| and
//     |u|·sech²u ≤ 0.45, so the error is ≤ ~7u·|x|.
//   gelu' = ½(1 + th) + ½x·sech²·du with du ≤ 0.8·(1 + 0.134x²): ≤ ~8u·(1 + |x|·(1 + 0.134x²)),
//     times |dout|, plus the rounding of the accumulation into dx (≤ u·|dx|).
//   silu·up = g·σ(g)·up: a product, ≤ ~12u of its own magnitude (σ to 6u in either form).
//   silu' = silu·(1 - σ) + σ: terms ≤ σ·(1 + |g|), times |dout·up|, plus the accumulation.
// tol = 16u of that magnitude. A wrong element errs by the size of the element itself.
constexpr double kActivationTol = 16 * kU;

double sigmoid_d(double g) {
  return 1.0 / (1.0 + std::exp(-g));
}

// Each output of `kernel(outs, i0, count)` over the whole range, and again one element at a time.
void expect_lanes_equal_tail(const std::string& what, size_t n, std::vector<Buf> outs,
                             const std::function<void(std::vector<Buf>&, size_t, size_t)>& kernel) {
  std::vector<Buf> whole = outs, single = outs;
  kernel(whole, 0, n);
  for (size_t i = 0; i < n; ++i) kernel(single, i, 1);
  for (size_t k = 0; k < outs.size(); ++k) {
    expect_bits_equal(what + " output " + std::to_string(k), whole[k], single[k]);
  }
}

TEST(OpsSimd, GeluCloseToReference) {
  for (int n : kActivationSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const ActivationCase c(n);
    Buf ref(c.n), fast(c.n);
    gelu_forward(ref.p(), c.x.p(), c.n);
    gelu_forward_fast(fast.p(), c.x.p(), c.n);
    expect_within("gelu", fast, ref, kActivationTol, [&](size_t i) { return std::abs(c.x[i]); });
    Buf dref = c.d0, dfast = c.d0;  // accumulates (+=)
    gelu_backward(dref.p(), c.x.p(), c.dout.p(), c.n);
    gelu_backward_fast(dfast.p(), c.x.p(), c.dout.p(), c.n);
    expect_within("dx", dfast, dref, kActivationTol, [&](size_t i) {
      const double x = c.x[i];
      return std::abs(c.d0[i]) + std::abs(c.dout[i]) * (1 + std::abs(x) * (1 + 0.134 * x * x));
    });
  }
}

// The fast erf (A&S 7.1.26) errs by < 1.5e-7 absolute, well inside 16u of |x| (forward) or of
// |dout| (backward); a wrong coefficient errs by ~1e-3.
TEST(OpsSimd, GeluErfCloseToReference) {
  for (int n : kActivationSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const ActivationCase c(n);
    Buf ref(c.n), fast(c.n);
    gelu_erf_forward(ref.p(), c.x.p(), c.n);
    gelu_erf_forward_fast(fast.p(), c.x.p(), c.n);
    expect_within("gelu_erf", fast, ref, kActivationTol,
                  [&](size_t i) { return std::abs(c.x[i]); });
    Buf dref = c.d0, dfast = c.d0;  // accumulates (+=)
    gelu_erf_backward(dref.p(), c.x.p(), c.dout.p(), c.n);
    gelu_erf_backward_fast(dfast.p(), c.x.p(), c.dout.p(), c.n);
    expect_within("dx", dfast, dref, kActivationTol, [&](size_t i) {
      return std::abs(c.d0[i]) + std::abs(c.dout[i]) * (1 + std::abs(c.x[i]));
    });
  }
}

TEST(OpsSimd, SwigluCloseToReference) {
  for (int n : kActivationSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const ActivationCase c(n);
    Buf ref(c.n), fast(c.n);
    swiglu_forward(ref.p(), c.x.p(), c.y.p(), c.n);
    swiglu_forward_fast(fast.p(), c.x.p(), c.y.p(), c.n);
    expect_within("swiglu", fast, ref, kActivationTol,
                  [&](size_t i) { return std::abs(c.x[i] * sigmoid_d(c.x[i]) * c.y[i]); });
    Buf dg_ref = c.d0, du_ref = c.d1, dg = c.d0, du = c.d1;
    swiglu_backward(dg_ref.p(), du_ref.p(), c.dout.p(), c.x.p(), c.y.p(), c.n);
    swiglu_backward_fast(dg.p(), du.p(), c.dout.p(), c.x.p(), c.y.p(), c.n);
    expect_within("dgate", dg, dg_ref, kActivationTol, [&](size_t i) {
      const double g = c.x[i];
      return std::abs(c.d0[i]) + std::abs(c.dout[i] * c.y[i]) * sigmoid_d(g) * (1 + std::abs(g));
    });
    expect_within("dup", du, du_ref, kActivationTol, [&](size_t i) {
      return std::abs(c.d1[i]) + std::abs(c.dout[i] * c.x[i] * sigmoid_d(c.x[i]));
    });
  }
}

TEST(OpsSimd, ActivationLanesEqualScalarTail) {
  const ActivationCase c(385);
  const float *x = c.x.p(), *y = c.y.p(), *g = c.dout.p();
  using Outs = std::vector<Buf>;
  expect_lanes_equal_tail("gelu", c.n, {Buf(c.n)}, [&](Outs& o, size_t i, size_t k) {
    gelu_forward_fast(o[0].p() + i, x + i, k);
  });
  expect_lanes_equal_tail("gelu_backward", c.n, {c.d0}, [&](Outs& o, size_t i, size_t k) {
    gelu_backward_fast(o[0].p() + i, x + i, g + i, k);
  });
  expect_lanes_equal_tail("gelu_erf", c.n, {Buf(c.n)}, [&](Outs& o, size_t i, size_t k) {
    gelu_erf_forward_fast(o[0].p() + i, x + i, k);
  });
  expect_lanes_equal_tail("gelu_erf_backward", c.n, {c.d0}, [&](Outs& o, size_t i, size_t k) {
    gelu_erf_backward_fast(o[0].p() + i, x + i, g + i, k);
  });
  expect_lanes_equal_tail("swiglu", c.n, {Buf(c.n)}, [&](Outs& o, size_t i, size_t k) {
    swiglu_forward_fast(o[0].p() + i, x + i, y + i, k);
  });
  expect_lanes_equal_tail("swiglu_backward", c.n, {c.d0, c.d1}, [&](Outs& o, size_t i, size_t k) {
    swiglu_backward_fast(o[0].p() + i, o[1].p() + i, g + i, x + i, y + i, k);
  });
}

TEST(OpsSimd, ActivationsAreThreadCountInvariant) {
  const ActivationCase c(3 * 4096 + 37);
  expect_thread_count_invariant([&] {
    Buf out(c.n), sw(c.n), dx = c.d0, dg = c.d0, du = c.d1, erf(c.n), derf = c.d0;
    gelu_forward_fast(out.p(), c.x.p(), c.n);
    gelu_backward_fast(dx.p(), c.x.p(), c.dout.p(), c.n);
    gelu_erf_forward_fast(erf.p(), c.x.p(), c.n);
    gelu_erf_backward_fast(derf.p(), c.x.p(), c.dout.p(), c.n);
    swiglu_forward_fast(sw.p(), c.x.p(), c.y.p(), c.n);
    swiglu_backward_fast(dg.p(), du.p(), c.dout.p(), c.x.p(), c.y.p(), c.n);
    std::vector<float> all;
    for (const Buf* b : {&out, &dx, &erf, &derf, &sw, &dg, &du}) {
      const std::vector<float> v = b->vec();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  });
}

// ---------------------------------------------------------------------------------------------
// The cross-build identity inside one binary: the kernels with reductions or transcendentals,
// compiled for AVX2 (two 8-lane registers per Wide), give the native build's bits (one 16-lane
// AVX-512 register here). The bit-identical-to-reference kernels need no such check.

// x86-64 builds only (REFTRAIN_AVX2_TWIN, tests/CMakeLists.txt): the AVX2 copy of the kernels.
#ifdef REFTRAIN_AVX2_TWIN
TEST(OpsSimd, Avx2ActivationsEqualNative) {
  const ActivationCase c(4096 + 37);
  Buf gn(c.n), ga(c.n), sn(c.n), sa(c.n), dn = c.d0, da = c.d0;
  gelu_forward_fast(gn.p(), c.x.p(), c.n);
  reftrain_avx2::gelu_forward_fast(ga.p(), c.x.p(), c.n);
  expect_bits_equal("gelu", ga, gn);
  gelu_backward_fast(dn.p(), c.x.p(), c.dout.p(), c.n);
  reftrain_avx2::gelu_backward_fast(da.p(), c.x.p(), c.dout.p(), c.n);
  expect_bits_equal("gelu backward", da, dn);
  Buf en(c.n), ea(c.n), den = c.d0, dea = c.d0;
  gelu_erf_forward_fast(en.p(), c.x.p(), c.n);
  reftrain_avx2::gelu_erf_forward_fast(ea.p(), c.x.p(), c.n);
  expect_bits_equal("gelu_erf", ea, en);
  gelu_erf_backward_fast(den.p(), c.x.p(), c.dout.p(), c.n);
  reftrain_avx2::gelu_erf_backward_fast(dea.p(), c.x.p(), c.dout.p(), c.n);
  expect_bits_equal("gelu_erf backward", dea, den);
  swiglu_forward_fast(sn.p(), c.x.p(), c.y.p(), c.n);
  reftrain_avx2::swiglu_forward_fast(sa.p(), c.x.p(), c.y.p(), c.n);
  expect_bits_equal("swiglu", sa, sn);
  Buf dgn = c.d0, dun = c.d1, dga = c.d0, dua = c.d1;
  swiglu_backward_fast(dgn.p(), dun.p(), c.dout.p(), c.x.p(), c.y.p(), c.n);
  reftrain_avx2::swiglu_backward_fast(dga.p(), dua.p(), c.dout.p(), c.x.p(), c.y.p(), c.n);
  expect_bits_equal("swiglu dgate", dga, dgn);
  expect_bits_equal("swiglu dup", dua, dun);
}
#endif

}  // namespace
}  // namespace reftrain
