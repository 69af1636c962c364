// LayerNorm (gpt2) and RMSNorm (llama), ops/norm.h. The references' backward against central
// finite differences of their own forward in double, backward accumulates (+=), float agrees
// with double, forwards match their formulas written out here in long double; the fast
// kernels close to the reference, equal to a scalar emulation of the 16-lane order, the same
// bits for any thread count and for the AVX2 build.
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
#include "ops/norm.h"
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
// float and double; backward runs the forward first where it needs saved values.

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

// ---------------------------------------------------------------------------------------------
// Finite differences, accumulation, float against double, the forwards against their
// formulas.

TEST(OpsFd, LayerNorm) {
  check_fd(LayerNormOp());
}

TEST(OpsAccumulate, LayerNorm) {
  check_accumulates(LayerNormOp());
}

TEST(OpsFloat, LayerNorm) {
  check_float_matches_double(LayerNormOp());
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
// LayerNorm and RMSNorm.
//
// Tolerance: each row sum (mean, variance, Σx², Σdn, Σdn·n) has C terms; summed in any order
// it errs by at most γ_C ≈ C·u of the sum of its terms' magnitudes (Higham, Thm 4.4), the
// reference's sequential sum and the fast path's 16-lane sum alike. The rows here keep
// |mean|/σ ≤ 12 and the weights within [0.5, 1.5], so a mean or Σdn error moves an output by
// at most ~13·C·u·max|w| relative to the largest output, a variance or Σdn·n error by less;
// with the handful of roundings per element on top: tol = 16·(C + 16)·u. That is 2.4e-4 at
// C = 385 and 3e-5 at C = 1; one wrong element (a missed tail, a wrong lane) errs by the size
// of an output.

double norm_tol(int C) {
  return 16.0 * (C + 16) * kU;
}

TEST(OpsSimd, LayerNormForwardCloseToReference) {
  for (int C : kOddSizes) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const NormCase c(13, C);
    LayerNormOut ref(c), fast(c);
    layernorm_forward(ref.out.p(), ref.mean.p(), ref.rstd.p(), c.x.p(), c.w.p(), c.b.p(), c.N, C);
    layernorm_forward_fast(fast.out.p(), fast.mean.p(), fast.rstd.p(), c.x.p(), c.w.p(), c.b.p(),
                           c.N, C);
    expect_close("out", fast.out, ref.out, norm_tol(C));
    expect_close("mean", fast.mean, ref.mean, norm_tol(C));
    expect_close("rstd", fast.rstd, ref.rstd, norm_tol(C));
  }
}

// dx against the reference given the same saved mean and rstd; dw and db bit-identical (the
// same operations in the same row order).
TEST(OpsSimd, LayerNormBackwardCloseToReference) {
  for (int C : kOddSizes) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const NormCase c(13, C);
    LayerNormOut saved(c);
    layernorm_forward(saved.out.p(), saved.mean.p(), saved.rstd.p(), c.x.p(), c.w.p(), c.b.p(), c.N,
                      C);
    NormGrads ref(c), fast(c);
    layernorm_backward(ref.dx.p(), ref.dw.p(), ref.db.p(), c.dout.p(), c.x.p(), c.w.p(),
                       saved.mean.p(), saved.rstd.p(), c.N, C);
    layernorm_backward_fast(fast.dx.p(), fast.dw.p(), fast.db.p(), c.dout.p(), c.x.p(), c.w.p(),
                            saved.mean.p(), saved.rstd.p(), c.N, C);
    expect_close("dx", fast.dx, ref.dx, norm_tol(C));
    expect_bits_equal("dw", fast.dw, ref.dw);
    expect_bits_equal("db", fast.db, ref.db);
  }
}

TEST(OpsSimd, RmsNormForwardCloseToReference) {
  for (int C : kOddSizes) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const NormCase c(13, C);
    Buf ref_out(size_t(c.N) * C), ref_rstd(c.N), out(size_t(c.N) * C), rstd(c.N);
    rmsnorm_forward(ref_out.p(), ref_rstd.p(), c.x.p(), c.w.p(), c.N, C);
    rmsnorm_forward_fast(out.p(), rstd.p(), c.x.p(), c.w.p(), c.N, C);
    expect_close("out", out, ref_out, norm_tol(C));
    expect_close("rstd", rstd, ref_rstd, norm_tol(C));
  }
}

TEST(OpsSimd, RmsNormBackwardCloseToReference) {
  for (int C : kOddSizes) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const NormCase c(13, C);
    Buf out(size_t(c.N) * C), rstd(c.N);
    rmsnorm_forward(out.p(), rstd.p(), c.x.p(), c.w.p(), c.N, C);
    NormGrads ref(c), fast(c);
    rmsnorm_backward(ref.dx.p(), ref.dw.p(), c.dout.p(), c.x.p(), c.w.p(), rstd.p(), c.N, C);
    rmsnorm_backward_fast(fast.dx.p(), fast.dw.p(), c.dout.p(), c.x.p(), c.w.p(), rstd.p(), c.N, C);
    expect_close("dx", fast.dx, ref.dx, norm_tol(C));
    expect_bits_equal("dw", fast.dw, ref.dw);
  }
}

// The fast norms, bit for bit, as scalar code in the 16-lane order.
TEST(OpsSimd, LayerNormEqualsScalarEmulation) {
  for (int C : kOddSizes) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const NormCase c(5, C);
    LayerNormOut fast(c), emu(c);
    layernorm_forward_fast(fast.out.p(), fast.mean.p(), fast.rstd.p(), c.x.p(), c.w.p(), c.b.p(),
                           c.N, C);
    NormGrads g(c);
    layernorm_backward_fast(g.dx.p(), g.dw.p(), g.db.p(), c.dout.p(), c.x.p(), c.w.p(),
                            fast.mean.p(), fast.rstd.p(), c.N, C);
    Buf dx = c.dx0;
    for (int i = 0; i < c.N; ++i) {
      const float* x = c.x.p() + size_t(i) * C;
      const float* g_row = c.dout.p() + size_t(i) * C;
      const float* w = c.w.p();
      const float m = emulate_sum16(C, [&](float a, size_t k) { return a + x[k]; }) / float(C);
      const float sq =
          emulate_sum16(C, [&](float a, size_t k) { return std::fma(x[k] - m, x[k] - m, a); });
      const float s = 1.0f / std::sqrt(sq / float(C) + float(kLayerNormEps));
      float* out = emu.out.p() + size_t(i) * C;
      for (int k = 0; k < C; ++k) out[k] = std::fma((x[k] - m) * s, w[k], c.b[k]);
      emu.mean.p()[i] = m;
      emu.rstd.p()[i] = s;
      const float dn_sum = emulate_sum16(C, [&](float a, size_t k) { return a + g_row[k] * w[k]; });
      const float dnn_sum = emulate_sum16(
          C, [&](float a, size_t k) { return std::fma(g_row[k] * w[k], (x[k] - m) * s, a); });
      for (int k = 0; k < C; ++k) {
        const float n = (x[k] - m) * s, dn = g_row[k] * w[k];
        const float centred = std::fma(-n, dnn_sum / float(C), dn - dn_sum / float(C));
        float& d = dx.p()[size_t(i) * C + k];
        d = std::fma(centred, s, d);
      }
    }
    expect_bits_equal("out", fast.out, emu.out);
    expect_bits_equal("mean", fast.mean, emu.mean);
    expect_bits_equal("rstd", fast.rstd, emu.rstd);
    expect_bits_equal("dx", g.dx, dx);
  }
}

TEST(OpsSimd, RmsNormEqualsScalarEmulation) {
  for (int C : kOddSizes) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const NormCase c(5, C);
    Buf out(size_t(c.N) * C), rstd(c.N), emu_out(size_t(c.N) * C), emu_rstd(c.N);
    rmsnorm_forward_fast(out.p(), rstd.p(), c.x.p(), c.w.p(), c.N, C);
    NormGrads g(c);
    rmsnorm_backward_fast(g.dx.p(), g.dw.p(), c.dout.p(), c.x.p(), c.w.p(), rstd.p(), c.N, C);
    Buf dx = c.dx0;
    for (int i = 0; i < c.N; ++i) {
      const float* x = c.x.p() + size_t(i) * C;
      const float* g_row = c.dout.p() + size_t(i) * C;
      const float* w = c.w.p();
      const float sq = emulate_sum16(C, [&](float a, size_t k) { return std::fma(x[k], x[k], a); });
      const float s = 1.0f / std::sqrt(sq / float(C) + float(kRmsNormEps));
      for (int k = 0; k < C; ++k) emu_out.p()[size_t(i) * C + k] = x[k] * s * w[k];
      emu_rstd.p()[i] = s;
      const float dnn_sum = emulate_sum16(
          C, [&](float a, size_t k) { return std::fma(g_row[k] * w[k], x[k] * s, a); });
      for (int k = 0; k < C; ++k) {
        const float centred = std::fma(-(x[k] * s), dnn_sum / float(C), g_row[k] * w[k]);
        float& d = dx.p()[size_t(i) * C + k];
        d = std::fma(centred, s, d);
      }
    }
    expect_bits_equal("out", out, emu_out);
    expect_bits_equal("rstd", rstd, emu_rstd);
    expect_bits_equal("dx", g.dx, dx);
  }
}

TEST(OpsSimd, NormsAreThreadCountInvariant) {
  const NormCase c(37, 385);
  expect_thread_count_invariant([&] {
    LayerNormOut f(c);
    layernorm_forward_fast(f.out.p(), f.mean.p(), f.rstd.p(), c.x.p(), c.w.p(), c.b.p(), c.N, c.C);
    NormGrads g(c);
    layernorm_backward_fast(g.dx.p(), g.dw.p(), g.db.p(), c.dout.p(), c.x.p(), c.w.p(), f.mean.p(),
                            f.rstd.p(), c.N, c.C);
    Buf out(size_t(c.N) * c.C), rstd(c.N);
    rmsnorm_forward_fast(out.p(), rstd.p(), c.x.p(), c.w.p(), c.N, c.C);
    NormGrads r(c);
    rmsnorm_backward_fast(r.dx.p(), r.dw.p(), c.dout.p(), c.x.p(), c.w.p(), rstd.p(), c.N, c.C);
    std::vector<float> all = f.out.vec(), more = g.all(), rms = r.all();
    all.insert(all.end(), more.begin(), more.end());
    all.insert(all.end(), rms.begin(), rms.end());
    return all;
  });
}

// ---------------------------------------------------------------------------------------------
// The cross-build identity inside one binary: the kernels with reductions or transcendentals,
// compiled for AVX2 (two 8-lane registers per Wide), give the native build's bits (one 16-lane
// AVX-512 register here). The bit-identical-to-reference kernels need no such check.

// x86-64 builds only (REFTRAIN_AVX2_TWIN, tests/CMakeLists.txt): the AVX2 copy of the kernels.
#ifdef REFTRAIN_AVX2_TWIN
TEST(OpsSimd, Avx2CodeEqualsNativeCode) {
  for (int C : kOddSizes) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const NormCase c(7, C);
    LayerNormOut nat(c), avx2(c);
    layernorm_forward_fast(nat.out.p(), nat.mean.p(), nat.rstd.p(), c.x.p(), c.w.p(), c.b.p(), c.N,
                           C);
    reftrain_avx2::layernorm_forward_fast(avx2.out.p(), avx2.mean.p(), avx2.rstd.p(), c.x.p(),
                                          c.w.p(), c.b.p(), c.N, C);
    expect_bits_equal("layernorm out", avx2.out, nat.out);
    expect_bits_equal("layernorm rstd", avx2.rstd, nat.rstd);
    NormGrads gn(c), ga(c);
    layernorm_backward_fast(gn.dx.p(), gn.dw.p(), gn.db.p(), c.dout.p(), c.x.p(), c.w.p(),
                            nat.mean.p(), nat.rstd.p(), c.N, C);
    reftrain_avx2::layernorm_backward_fast(ga.dx.p(), ga.dw.p(), ga.db.p(), c.dout.p(), c.x.p(),
                                           c.w.p(), nat.mean.p(), nat.rstd.p(), c.N, C);
    EXPECT_EQ(bits_of(ga.all()), bits_of(gn.all())) << "layernorm backward";
    Buf rn(size_t(c.N) * C), rn_rstd(c.N), ra(size_t(c.N) * C), ra_rstd(c.N);
    rmsnorm_forward_fast(rn.p(), rn_rstd.p(), c.x.p(), c.w.p(), c.N, C);
    reftrain_avx2::rmsnorm_forward_fast(ra.p(), ra_rstd.p(), c.x.p(), c.w.p(), c.N, C);
    expect_bits_equal("rmsnorm out", ra, rn);
    NormGrads rgn(c), rga(c);
    rmsnorm_backward_fast(rgn.dx.p(), rgn.dw.p(), c.dout.p(), c.x.p(), c.w.p(), rn_rstd.p(), c.N,
                          C);
    reftrain_avx2::rmsnorm_backward_fast(rga.dx.p(), rga.dw.p(), c.dout.p(), c.x.p(), c.w.p(),
                                         rn_rstd.p(), c.N, C);
    EXPECT_EQ(bits_of(rga.all()), bits_of(rgn.all())) << "rmsnorm backward";
    for (float z : {0.0f, 0.5f}) {
      const FastLossCase l(C, z);
      Buf ln(l.N), la(l.N), dn(size_t(l.N) * l.Vp), da(size_t(l.N) * l.Vp);
      crossentropy_forward_backward_fast(ln.p(), dn.p(), l.logits.p(), l.targets.data(), l.N, l.V,
                                         l.Vp, l.dloss, l.z);
      reftrain_avx2::crossentropy_forward_backward_fast(
          la.p(), da.p(), l.logits.p(), l.targets.data(), l.N, l.V, l.Vp, l.dloss, l.z);
      expect_bits_equal("losses", la, ln);
      expect_bits_equal("dlogits", da, dn);
    }
  }
}
#endif

}  // namespace
}  // namespace reftrain
