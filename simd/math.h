// exp, tanh and sigmoid for float, written once for both a scalar float and a SIMD batch, with
// every multiply-add an explicit FMA: the same bits in the scalar tail, on AVX2 and on
// AVX-512, so a kernel's result does not depend on which ISA the build targets (libm's expf
// and xsimd's own exp are each free to differ between ISAs and versions).
//
// exp: Cephes' expf. n = round(x·log2 e), r = x − n·ln 2 (ln 2 split in two for exactness),
// e^r ≈ 1 + r + r²·P(r) with P of degree 5 on |r| ≤ ln2/2, then scaled by 2^n as two factors
// 2^⌊n/2⌋ · 2^(n−⌊n/2⌋) so the subnormal range and x near the overflow limit come out right.
// Accuracy: within 2 ulp of the correctly rounded exp (tests/simd/test_simd_math.cpp measures it).
// exp(NaN) = NaN, exp(x > 88.73) = +inf, exp(x < −104) = +0.
//
// tanh: Cephes' odd polynomial for |x| < 0.625, 1 − 2/(e^{2|x|} + 1) with the sign of x above.
// sigmoid: 1/(1 + e^{−x}).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "simd/simd.h"

namespace reftrain::simd {

// (GCC 12 warns falsely about the undefined pass-through operand of unmasked AVX-512
// intrinsics inside xsimd — rndscale, cvtt, shifts — as (maybe-)uninitialized.)
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace detail {

// The handful of operations the formulas need, for a scalar float and for Batch<float>.
struct ScalarOps {
  using V = float;
  using I = int32_t;
  static V fma(V a, V b, V c) { return std::fma(a, b, c); }
  static V round_even(V x) { return std::nearbyint(x); }  // default rounding mode: to even
  static V min(V a, V b) { return a < b ? a : b; }
  static V max(V a, V b) { return a > b ? a : b; }
  static V abs(V x) { return std::fabs(x); }
  static V select_lt(V a, V b, V yes, V no) { return a < b ? yes : no; }
  static V nan_to(V x, V r) { return x != x ? x : r; }
  static V copysign(V mag, V sgn) { return std::copysign(mag, sgn); }
  static I to_int(V x) { return static_cast<I>(x); }  // x is integral and in range
  // 2^n for n in [-126, 127], built from its exponent bits.
  static V pow2(I n) {
    const uint32_t bits = uint32_t(n + 127) << 23;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  static I half(I n) { return n >> 1; }  // ⌊n/2⌋ (arithmetic shift)
};

struct BatchOps {
  using V = Batch<float>;
  using I = Batch<int32_t>;
  static V fma(V a, V b, V c) { return simd::fma(a, b, c); }
  static V round_even(V x) { return xsimd::nearbyint(x); }
  static V min(V a, V b) { return xsimd::select(a < b, a, b); }
  static V max(V a, V b) { return xsimd::select(a > b, a, b); }
  static V abs(V x) { return xsimd::abs(x); }
  static V select_lt(V a, V b, V yes, V no) { return xsimd::select(a < b, yes, no); }
  static V nan_to(V x, V r) { return xsimd::select(xsimd::isnan(x), x, r); }
  static V copysign(V mag, V sgn) { return xsimd::copysign(mag, sgn); }
  static I to_int(V x) { return xsimd::batch_cast<int32_t>(x); }
  static V pow2(I n) { return xsimd::bitwise_cast<V>((n + I(127)) << 23); }
  static I half(I n) { return n >> 1; }
};

template <typename Ops>
typename Ops::V exp_impl(typename Ops::V x) {
  using V = typename Ops::V;
  const V xc = Ops::min(Ops::max(x, V(-104.0f)), V(88.73f));
  const V n = Ops::round_even(xc * V(1.44269504088896341f));
  V r = Ops::fma(n, V(-0.693359375f), xc);
  r = Ops::fma(n, V(2.12194440e-4f), r);
  V p = V(1.9875691500e-4f);
  p = Ops::fma(p, r, V(1.3981999507e-3f));
  p = Ops::fma(p, r, V(8.3334519073e-3f));
  p = Ops::fma(p, r, V(4.1665795894e-2f));
  p = Ops::fma(p, r, V(1.6666665459e-1f));
  p = Ops::fma(p, r, V(5.0000001201e-1f));
  const V e = Ops::fma(p, r * r, r) + V(1.0f);
  const auto ni = Ops::to_int(n);
  const auto n1 = Ops::half(ni);
  return Ops::nan_to(x, e * Ops::pow2(n1) * Ops::pow2(ni - n1));
}

template <typename Ops>
typename Ops::V tanh_impl(typename Ops::V x) {
  using V = typename Ops::V;
  const V a = Ops::abs(x);
  const V z = x * x;
  V p = V(-5.70498872745e-3f);
  p = Ops::fma(p, z, V(2.06390887954e-2f));
  p = Ops::fma(p, z, V(-5.37397155531e-2f));
  p = Ops::fma(p, z, V(1.33314422036e-1f));
  p = Ops::fma(p, z, V(-3.33332819422e-1f));
  const V small = Ops::fma(p * z, x, x);
  const V large = V(1.0f) - V(2.0f) / (exp_impl<Ops>(a + a) + V(1.0f));
  return Ops::nan_to(x, Ops::select_lt(a, V(0.625f), small, Ops::copysign(large, x)));
}

template <typename Ops>
typename Ops::V sigmoid_impl(typename Ops::V x) {
  using V = typename Ops::V;
  return V(1.0f) / (V(1.0f) + exp_impl<Ops>(V(0.0f) - x));
}

}  // namespace detail

inline float exp(float x) {
  return detail::exp_impl<detail::ScalarOps>(x);
}
inline Batch<float> exp(const Batch<float>& x) {
  return detail::exp_impl<detail::BatchOps>(x);
}
inline float tanh(float x) {
  return detail::tanh_impl<detail::ScalarOps>(x);
}
inline Batch<float> tanh(const Batch<float>& x) {
  return detail::tanh_impl<detail::BatchOps>(x);
}
inline float sigmoid(float x) {
  return detail::sigmoid_impl<detail::ScalarOps>(x);
}
inline Batch<float> sigmoid(const Batch<float>& x) {
  return detail::sigmoid_impl<detail::BatchOps>(x);
}

// The double versions, for the float64 oracle instantiations of the kernels, are libm's.
inline double exp(double x) {
  return std::exp(x);
}
inline double tanh(double x) {
  return std::tanh(x);
}
inline double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

#pragma GCC diagnostic pop

}  // namespace reftrain::simd
