// The harness of the fast kernels' tests (tests/ops/test_*.cpp): the fast float kernels (the
// *_fast functions of ops/, used by the models) against their scalar references, and against a
// scalar emulation of the fixed 16-lane order. The cases are shared because some checks (the
// thread-count and AVX2 identities) run several kernels at once.
//
// Three properties per kernel:
//  - Close to the reference: within a tolerance stated beside each test, relative to the
//    magnitude of the result, on sizes that are not multiples of 16 or 8 (1, 7, 33, 100, 385),
//    on pointers 4 bytes past an aligned address, accumulating into non-zero buffers where the
//    kernel accumulates. Kernels without reductions or transcendentals (residual, embedding,
//    RoPE, the norms' dw/db) must equal the reference bit for bit.
//  - Equal, bit for bit, to the same arithmetic written out in the tests in scalar code, in the
//    order of simd/reduce.h (16 lanes, the fixed tree, the scalar tail) and with the scalar
//    simd::fma / simd::tanh / simd::exp. What the vector code computes is thereby pinned to an
//    order that does not mention the vector width, which is what makes the AVX-512 and AVX2
//    builds agree.
//  - The same bits for 1, 2 and 3 threads.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

namespace reftrain::fast_check {

using testing::kU;
using testing::OmpThreads;
using testing::TestData;

// Sizes not multiples of 16 or 8 (385 = 24·16 + 1), and 1 (tail only).
inline const std::vector<int> kOddSizes = {1, 7, 33, 100, 385};

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

inline std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

inline void expect_bits_equal(const std::string& what, const Buf& got, const Buf& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_EQ(bits_of(got.vec()), bits_of(want.vec())) << what;
}

// |fast_i - ref_i| ≤ tol·scale(i) for every element i, where scale(i) is the magnitude the
// element's error is measured against. Reports the worst element's share of its bound.
inline void expect_within(const std::string& what, const Buf& fast, const Buf& ref, double tol,
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
inline void expect_close(const std::string& what, const Buf& fast, const Buf& ref, double tol) {
  double scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) scale = std::max(scale, std::abs(double(ref[i])));
  ASSERT_GT(scale, 0.0) << what << " is all zero: the check is vacuous";
  expect_within(what, fast, ref, tol, [scale](size_t) { return scale; });
}

// run() returns every output of a kernel call; it must give the same bits at 1, 2 and 3 threads.
inline void expect_thread_count_invariant(const std::function<std::vector<float>()>& run) {
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

// ---------------------------------------------------------------------------------------------
// The cases: shapes and data of each family's checks.

// LayerNorm and RMSNorm (tests/ops/test_norm.cpp states their tolerance).
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

// GELU, SwiGLU and the residual add.
inline const std::vector<int> kActivationSizes = {1, 7, 33, 100, 385, 4096 + 37};

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

// Cross-entropy; tests/ops/test_loss.cpp derives the tolerance tol().
struct FastLossCase {
  int N = 9, V, Vp;
  float dloss, z;
  Buf logits;
  std::vector<int32_t> targets;
  FastLossCase(int v, float zloss) : V(v), Vp(v + 3), dloss(1.0f / 9.0f), z(zloss) {
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

}  // namespace reftrain::fast_check
