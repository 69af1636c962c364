// The fast float kernels (the *_fast functions of ops/, used by the models) against their
// scalar references, and against a scalar emulation of the fixed 16-lane order.
//
// Three properties per kernel:
//  - Close to the reference: within a tolerance stated beside each test, relative to the
//    magnitude of the result, on sizes that are not multiples of 16 or 8 (1, 7, 33, 100, 385),
//    on pointers 4 bytes past an aligned address, accumulating into non-zero buffers where the
//    kernel accumulates. Kernels without reductions or transcendentals (residual, embedding,
//    RoPE, the norms' dw/db) must equal the reference bit for bit.
//  - Equal, bit for bit, to the same arithmetic written out here in scalar code in the order of
//    simd/reduce.h (16 lanes, the fixed tree, the scalar tail) and with the scalar simd::fma /
//    simd::tanh / simd::exp. What the vector code computes is thereby pinned to an order that
//    does not mention the vector width, which is what makes the AVX-512 and AVX2 builds agree.
//  - The same bits for 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/activation.h"
#include "ops/embed.h"
#include "ops/loss.h"
#include "ops/norm.h"
#include "ops/residual.h"
#include "ops/rope.h"
#include "simd/reduce.h"
#include "tests/common/test_util.h"

// The fast kernels compiled for x86-64-v3 (AVX2) in namespace reftrain_avx2 (tests/CMakeLists.txt:
// ops_fast_avx2), declared here as ops/*.h declare them.
namespace reftrain_avx2 {
void layernorm_forward_fast(float* out, float* mean, float* rstd, const float* x, const float* w,
                            const float* b, int N, int C);
void layernorm_backward_fast(float* dx, float* dw, float* db, const float* dout, const float* x,
                             const float* w, const float* mean, const float* rstd, int N, int C);
void rmsnorm_forward_fast(float* out, float* rstd, const float* x, const float* w, int N, int C);
void rmsnorm_backward_fast(float* dx, float* dw, const float* dout, const float* x, const float* w,
                           const float* rstd, int N, int C);
void gelu_forward_fast(float* out, const float* x, size_t n);
void gelu_backward_fast(float* dx, const float* x, const float* dout, size_t n);
void swiglu_forward_fast(float* out, const float* gate, const float* up, size_t n);
void swiglu_backward_fast(float* dgate, float* dup, const float* dout, const float* gate,
                          const float* up, size_t n);
void crossentropy_forward_backward_fast(float* losses, float* dlogits, const float* logits,
                                        const int32_t* targets, int N, int V, int Vp, float dloss,
                                        float z);
}  // namespace reftrain_avx2

namespace reftrain {
namespace {

using testing::kU;
using testing::OmpThreads;
using testing::TestData;

// Sizes not multiples of 16 or 8 (385 = 24·16 + 1), and 1 (tail only).
const std::vector<int> kOddSizes = {1, 7, 33, 100, 385};

// A float buffer whose data starts 4 bytes past the allocation (16-byte aligned), so no pointer
// handed to a kernel is 32- or 64-byte aligned.
class Buf {
 public:
  Buf() = default;
  explicit Buf(const std::vector<double>& v) : store_(v.size() + 1) {
    std::copy(v.begin(), v.end(), store_.begin() + 1);
  }
  explicit Buf(size_t n, float fill = 0.0f) : store_(n + 1, fill) {}
  float* p() { return store_.data() + 1; }
  const float* p() const { return store_.data() + 1; }
  size_t size() const { return store_.size() - 1; }
  float operator[](size_t i) const { return store_[i + 1]; }
  std::vector<float> vec() const { return std::vector<float>(store_.begin() + 1, store_.end()); }

 private:
  std::vector<float> store_;
};

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

void expect_bits_equal(const std::string& what, const Buf& got, const Buf& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_EQ(bits_of(got.vec()), bits_of(want.vec())) << what;
}

// |fast_i - ref_i| ≤ tol·scale(i) for every element i, where scale(i) is the magnitude the
// element's error is measured against. Reports the worst element's share of its bound.
void expect_within(const std::string& what, const Buf& fast, const Buf& ref, double tol,
                   const std::function<double(size_t)>& scale) {
  ASSERT_EQ(fast.size(), ref.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::abs(double(fast[i]) - double(ref[i])), bound = tol * scale(i);
    worst = std::max(worst, err / bound);
    EXPECT_LE(err, bound) << what << "[" << i << "]: fast " << fast[i] << ", reference " << ref[i];
  }
  ::testing::Test::RecordProperty(what + "_tolerance_used", std::to_string(worst));
}

// The same with every element measured against the largest magnitude of the reference tensor
// (which must not be all zero, or the check would mean nothing).
void expect_close(const std::string& what, const Buf& fast, const Buf& ref, double tol) {
  double scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) scale = std::max(scale, std::abs(double(ref[i])));
  ASSERT_GT(scale, 0.0) << what << " is all zero: the check is vacuous";
  expect_within(what, fast, ref, tol, [scale](size_t) { return scale; });
}

// run() returns every output of a kernel call; it must give the same bits at 1, 2 and 3 threads.
void expect_thread_count_invariant(const std::function<std::vector<float>()>& run) {
  OmpThreads threads;
  threads.set(1);
  const std::vector<float> one = run();
  for (int n : {2, 3}) {
    threads.set(n);
    EXPECT_EQ(bits_of(run()), bits_of(one)) << n << " threads";
  }
}

// ---------------------------------------------------------------------------------------------
// The order of simd/reduce.h, in scalar code: lane l folds elements l, l+16, ... of the full
// blocks, the lanes meet in the tree (l with l+8, l+4, l+2, l+1), then the tail folds in order.

template <typename Fold, typename Combine>
float emulate_lanes(size_t n, float identity, Fold fold, Combine combine) {
  float lane[16];
  std::fill(lane, lane + 16, identity);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (size_t l = 0; l < 16; ++l) lane[l] = fold(lane[l], i + l);
  }
  for (size_t half = 8; half > 0; half /= 2) {
    for (size_t l = 0; l < half; ++l) lane[l] = combine(lane[l], lane[l + half]);
  }
  float acc = lane[0];
  for (; i < n; ++i) acc = fold(acc, i);
  return acc;
}

template <typename Fold>
float emulate_sum16(size_t n, Fold fold) {
  return emulate_lanes(n, 0.0f, fold, [](float a, float b) { return a + b; });
}

template <typename Fold>
float emulate_max16(size_t n, Fold fold) {
  return emulate_lanes(n, -INFINITY, fold, [](float a, float b) { return a > b ? a : b; });
}

// simd/reduce.h itself: sums, FMA dot products, two sums at once and maxima equal the scalar
// emulation for every n from 0 to 70 (no block, one block, blocks and tails), on values spread
// over 40 binades, where a different order gives different bits (checked: not vacuous).
TEST(OpsSimd, ReductionsFollowTheStatedOrder) {
  using simd::load;
  TestData d(6000);
  std::vector<float> x(70), y(70);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(d.spread(-20, 20)), y[i] = float(d.uniform(-1, 1));
  int order_visible = 0;
  for (size_t n = 0; n <= x.size(); ++n) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const float sum =
        simd::sum16(n, [&](auto acc, size_t i) { return acc + load<decltype(acc)>(&x[i]); });
    EXPECT_EQ(bits_of({sum}),
              bits_of({emulate_sum16(n, [&](float a, size_t i) { return a + x[i]; })}));
    const auto two = simd::sums16<2>(n, [&](auto& acc, size_t i) {
      using V = simd::lane_type<decltype(acc)>;
      acc[0] = simd::fma(load<V>(&x[i]), load<V>(&y[i]), acc[0]);
      acc[1] = acc[1] + load<V>(&y[i]);
    });
    EXPECT_EQ(
        bits_of({two[0]}),
        bits_of({emulate_sum16(n, [&](float a, size_t i) { return std::fma(x[i], y[i], a); })}));
    EXPECT_EQ(bits_of({two[1]}),
              bits_of({emulate_sum16(n, [&](float a, size_t i) { return a + y[i]; })}));
    const float mx = simd::max16(
        n, [&](auto acc, size_t i) { return simd::max(acc, load<decltype(acc)>(&x[i])); });
    EXPECT_EQ(bits_of({mx}),
              bits_of({emulate_max16(n, [&](float a, size_t i) { return a > x[i] ? a : x[i]; })}));
    float sequential = 0.0f;
    for (size_t i = 0; i < n; ++i) sequential += x[i];
    order_visible += sequential != sum;
  }
  EXPECT_GT(order_visible, 20) << "the data do not tell the orders apart";
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

struct NormCase {
  int N, C;
  Buf x, w, b, dout, dx0, dw0, db0;
  NormCase(int n, int c) : N(n), C(c) {
    TestData d(uint64_t(1000 + c));
    std::vector<double> xv = d.vec(size_t(N) * C, -1, 1);
    for (int i = 0; i < N; ++i) {  // each row its own mean (|m| ≤ 3) and spread (0.25..2)
      const double shift = d.uniform(-3, 3), scale = d.uniform(0.25, 2);
      for (int k = 0; k < C; ++k) xv[size_t(i) * C + k] = shift + scale * xv[size_t(i) * C + k];
    }
    x = Buf(xv);
    w = Buf(d.vec(C, 0.5, 1.5));
    b = Buf(d.vec(C, -0.5, 0.5));
    dout = Buf(d.vec(size_t(N) * C, -1, 1));
    dx0 = Buf(d.vec(size_t(N) * C, -1, 1));  // the backward accumulates onto these
    dw0 = Buf(d.vec(C, -1, 1));
    db0 = Buf(d.vec(C, -1, 1));
  }
};

struct LayerNormOut {
  Buf out, mean, rstd;
  explicit LayerNormOut(const NormCase& c)
      : out(size_t(c.N) * c.C), mean(size_t(c.N)), rstd(size_t(c.N)) {}
};

struct NormGrads {
  Buf dx, dw, db;
  explicit NormGrads(const NormCase& c) : dx(c.dx0), dw(c.dw0), db(c.db0) {}
  std::vector<float> all() const {
    std::vector<float> v = dx.vec(), w = dw.vec(), b = db.vec();
    v.insert(v.end(), w.begin(), w.end());
    v.insert(v.end(), b.begin(), b.end());
    return v;
  }
};

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
// GELU and SwiGLU: elementwise, so the vector lanes must give exactly what the scalar tail gives
// for the same element — checked by running the kernel on one element at a time (n = 1 is all
// tail). 4096 + 37 elements span two of parallel_for_each16's blocks.
//
// Tolerance against the reference, per element: simd::tanh/sigmoid and libm's tanhf/expf are
// each within 3 ulp of the exact function (tests/test_simd_math.cpp), and the formulas differ in
// a few FMAs, so each element differs by a few u of the magnitude of the terms that make it up:
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

const std::vector<int> kActivationSizes = {1, 7, 33, 100, 385, 4096 + 37};

struct ActivationCase {
  size_t n;
  Buf x, y, dout, d0, d1;  // x: input or gate; y: up; d0, d1: what the backward accumulates onto
  explicit ActivationCase(size_t size) : n(size) {
    TestData d(uint64_t(2000 + size));
    x = Buf(d.vec(n, -4, 4));
    y = Buf(d.vec(n, -2, 2));
    dout = Buf(d.vec(n, -1, 1));
    d0 = Buf(d.vec(n, -1, 1));
    d1 = Buf(d.vec(n, -1, 1));
  }
};

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
    Buf out(c.n), sw(c.n), dx = c.d0, dg = c.d0, du = c.d1;
    gelu_forward_fast(out.p(), c.x.p(), c.n);
    gelu_backward_fast(dx.p(), c.x.p(), c.dout.p(), c.n);
    swiglu_forward_fast(sw.p(), c.x.p(), c.y.p(), c.n);
    swiglu_backward_fast(dg.p(), du.p(), c.dout.p(), c.x.p(), c.y.p(), c.n);
    std::vector<float> all;
    for (const Buf* b : {&out, &dx, &sw, &dg, &du}) {
      const std::vector<float> v = b->vec();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  });
}

// ---------------------------------------------------------------------------------------------
// Residual, embedding and RoPE: no reductions and no transcendentals, so the fast path does the
// reference's operations in the reference's order — bit-identical, tolerance 0.

TEST(OpsSimd, ResidualEqualsReference) {
  for (int n : kActivationSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const ActivationCase c(n);
    Buf ref(c.n), fast(c.n);
    residual_forward(ref.p(), c.x.p(), c.y.p(), c.n);
    residual_forward_fast(fast.p(), c.x.p(), c.y.p(), c.n);
    expect_bits_equal("out", fast, ref);
    Buf da_ref = c.d0, db_ref = c.d1, da = c.d0, db = c.d1;
    residual_backward(da_ref.p(), db_ref.p(), c.dout.p(), c.n);
    residual_backward_fast(da.p(), db.p(), c.dout.p(), c.n);
    expect_bits_equal("da", da, da_ref);
    expect_bits_equal("db", db, db_ref);
  }
}

struct EmbedCase {
  int B = 3, T = 11, V = 9, C;
  Buf wte, wpe, dout, dwte0, dwpe0;
  std::vector<int32_t> tokens;
  explicit EmbedCase(int c) : C(c) {
    TestData d(uint64_t(3000 + c));
    wte = Buf(d.vec(size_t(V) * C, -1, 1));
    wpe = Buf(d.vec(size_t(T) * C, -1, 1));
    dout = Buf(d.vec(size_t(B) * T * C, -1, 1));
    dwte0 = Buf(d.vec(size_t(V) * C, -1, 1));
    dwpe0 = Buf(d.vec(size_t(T) * C, -1, 1));
    for (int i = 0; i < B * T; ++i) tokens.push_back(int32_t(d.below(V - 1)));  // row V-1 unused
    tokens[2] = tokens[5] = tokens[20] = tokens[32] = 4;  // repeats within and across rows
  }
};

TEST(OpsSimd, EmbeddingEqualsReference) {
  for (int C : kOddSizes) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const EmbedCase c(C);
    const size_t N = size_t(c.B) * c.T;
    Buf ref(N * C), fast(N * C);
    embed_forward(ref.p(), c.tokens.data(), c.wte.p(), c.wpe.p(), c.B, c.T, C);
    embed_forward_fast(fast.p(), c.tokens.data(), c.wte.p(), c.wpe.p(), c.B, c.T, C);
    expect_bits_equal("embed", fast, ref);
    token_embed_forward(ref.p(), c.tokens.data(), c.wte.p(), N, C);
    token_embed_forward_fast(fast.p(), c.tokens.data(), c.wte.p(), N, C);
    expect_bits_equal("token embed", fast, ref);
    Buf dwte_ref = c.dwte0, dwpe_ref = c.dwpe0, dwte = c.dwte0, dwpe = c.dwpe0;
    embed_backward(dwte_ref.p(), dwpe_ref.p(), c.dout.p(), c.tokens.data(), c.B, c.T, C);
    embed_backward_fast(dwte.p(), dwpe.p(), c.dout.p(), c.tokens.data(), c.B, c.T, C);
    expect_bits_equal("dwte", dwte, dwte_ref);
    expect_bits_equal("dwpe", dwpe, dwpe_ref);
    // Not vacuous: the unused row kept its value, a used row changed.
    EXPECT_EQ(dwte[size_t(c.V - 1) * C], c.dwte0[size_t(c.V - 1) * C]);
    EXPECT_NE(dwte[size_t(4) * C], c.dwte0[size_t(4) * C]);
    Buf tref = c.dwte0, tfast = c.dwte0;
    token_embed_backward(tref.p(), c.dout.p(), c.tokens.data(), N, C);
    token_embed_backward_fast(tfast.p(), c.dout.p(), c.tokens.data(), N, C);
    expect_bits_equal("token dwte", tfast, tref);
  }
}

// hs = 2·half with half = 1, 7, 33, 100: pair blocks of 16 and a scalar tail, 3 heads.
struct RopeCase {
  int B = 2, T = 9, NH = 3, hs;
  Buf x, d0;
  explicit RopeCase(int half) : hs(2 * half) {
    TestData d(uint64_t(4000 + half));
    x = Buf(d.vec(size_t(B) * T * NH * hs, -2, 2));
    d0 = Buf(d.vec(size_t(B) * T * NH * hs, -1, 1));
  }
};

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

TEST(OpsSimd, ElementwiseKernelsAreThreadCountInvariant) {
  const EmbedCase e(100);
  const RopeCase r(33);
  const ActivationCase a(3 * 4096 + 37);
  expect_thread_count_invariant([&] {
    const size_t N = size_t(e.B) * e.T;
    Buf emb(N * e.C), dwte = e.dwte0, dwpe = e.dwpe0, rope(r.x.size()), drope = r.d0;
    Buf res(a.n), da = a.d0, db = a.d1;
    embed_forward_fast(emb.p(), e.tokens.data(), e.wte.p(), e.wpe.p(), e.B, e.T, e.C);
    embed_backward_fast(dwte.p(), dwpe.p(), e.dout.p(), e.tokens.data(), e.B, e.T, e.C);
    rope_forward_fast(rope.p(), r.x.p(), r.B, r.T, r.NH, r.hs, 10000.0);
    rope_backward_fast(drope.p(), r.x.p(), r.B, r.T, r.NH, r.hs, 10000.0);
    residual_forward_fast(res.p(), a.x.p(), a.y.p(), a.n);
    residual_backward_fast(da.p(), db.p(), a.dout.p(), a.n);
    std::vector<float> all;
    for (const Buf* b : {&emb, &dwte, &dwpe, &rope, &drope, &res, &da, &db}) {
      const std::vector<float> v = b->vec();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  });
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
struct LossCase {
  int N = 9, V, Vp;
  float dloss, z;
  Buf logits;
  std::vector<int32_t> targets;
  LossCase(int v, float zloss) : V(v), Vp(v + 3), dloss(1.0f / 9.0f), z(zloss) {
    TestData d(uint64_t(5000 + v));
    std::vector<double> x = d.vec(size_t(N) * Vp, -3, 3);
    for (int i = 0; i < N; ++i) {
      for (int j = V; j < Vp; ++j) x[size_t(i) * Vp + j] = 40.0;  // padding: must be ignored
      targets.push_back(int32_t(d.below(V)));
    }
    targets[0] = 0;
    targets[1] = V - 1;
    logits = Buf(x);
  }
  double tol() const { return (V + 64) * kU; }
};

void expect_loss_close(const LossCase& c, const Buf& fast, const Buf& ref) {
  for (int i = 0; i < c.N; ++i) {
    const double bound = c.tol() * std::max(1.0, std::abs(double(ref[i])));
    EXPECT_LE(std::abs(double(fast[i]) - double(ref[i])), bound)
        << "loss[" << i << "]: fast " << fast[i] << ", reference " << ref[i];
  }
}

void expect_dlogits_close(const LossCase& c, const Buf& fast, const Buf& ref) {
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
      const LossCase c(V, z);
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
      const LossCase c(V, z);
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
  const LossCase c(385, 0.5f);
  expect_thread_count_invariant([&] {
    Buf loss(c.N), dx(size_t(c.N) * c.Vp);
    crossentropy_forward_backward_fast(loss.p(), dx.p(), c.logits.p(), c.targets.data(), c.N, c.V,
                                       c.Vp, c.dloss, c.z);
    std::vector<float> all = loss.vec(), d = dx.vec();
    all.insert(all.end(), d.begin(), d.end());
    return all;
  });
}

// ---------------------------------------------------------------------------------------------
// The cross-build identity inside one binary: the kernels with reductions or transcendentals,
// compiled for AVX2 (two 8-lane registers per Wide), give the native build's bits (one 16-lane
// AVX-512 register here). The bit-identical-to-reference kernels need no such check.

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
      const LossCase l(C, z);
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

TEST(OpsSimd, Avx2ActivationsEqualNative) {
  const ActivationCase c(4096 + 37);
  Buf gn(c.n), ga(c.n), sn(c.n), sa(c.n), dn = c.d0, da = c.d0;
  gelu_forward_fast(gn.p(), c.x.p(), c.n);
  reftrain_avx2::gelu_forward_fast(ga.p(), c.x.p(), c.n);
  expect_bits_equal("gelu", ga, gn);
  gelu_backward_fast(dn.p(), c.x.p(), c.dout.p(), c.n);
  reftrain_avx2::gelu_backward_fast(da.p(), c.x.p(), c.dout.p(), c.n);
  expect_bits_equal("gelu backward", da, dn);
  swiglu_forward_fast(sn.p(), c.x.p(), c.y.p(), c.n);
  reftrain_avx2::swiglu_forward_fast(sa.p(), c.x.p(), c.y.p(), c.n);
  expect_bits_equal("swiglu", sa, sn);
  Buf dgn = c.d0, dun = c.d1, dga = c.d0, dua = c.d1;
  swiglu_backward_fast(dgn.p(), dun.p(), c.dout.p(), c.x.p(), c.y.p(), c.n);
  reftrain_avx2::swiglu_backward_fast(dga.p(), dua.p(), c.dout.p(), c.x.p(), c.y.p(), c.n);
  expect_bits_equal("swiglu dgate", dga, dgn);
  expect_bits_equal("swiglu dup", dua, dun);
}

}  // namespace
}  // namespace reftrain
