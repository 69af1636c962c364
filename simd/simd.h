// The thin layer over xsimd. Debian 12 ships xsimd 8.1, where the horizontal sum is `hadd`;
// xsimd 9 renamed it `reduce_add`. Kernels include this header, never <xsimd/xsimd.hpp>, so
// the spelling lives in one place.
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>
#include <xsimd/xsimd.hpp>

namespace reftrain::simd {

// The instruction set xsimd targets in this build (chosen by -march at compile time).
using Arch = xsimd::default_arch;
template <typename T>
using Batch = xsimd::batch<T, Arch>;

inline const char* arch_name() {
  return Arch::name();
}

// Sum of a batch's lanes. (GCC 12 warns falsely about _mm512_undefined_ps/_pd inside xsimd 8's
// AVX-512 hadd, as maybe-uninitialized or, depending on the caller, uninitialized; the lanes it
// calls undefined are overwritten before use.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
template <typename T>
T reduce_add(const Batch<T>& b) {
#if XSIMD_VERSION_MAJOR >= 9
  return xsimd::reduce_add(b);
#else
  return xsimd::hadd(b);
#endif
}
#pragma GCC diagnostic pop

// a·b + c rounded once (a fused multiply-add), lane by lane: the same bits as std::fma on every
// ISA. xsimd 8's own xsimd::fma is fused on fma3 targets but computes a*b + c with two roundings
// on AVX-512 (no avx512f overload), so the AVX-512 case calls the intrinsic itself.
template <typename T>
Batch<T> fma(const Batch<T>& a, const Batch<T>& b, const Batch<T>& c) {
#if defined(__AVX512F__)
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "float or double");
  if constexpr (std::is_same_v<T, float>) {
    return Batch<T>(_mm512_fmadd_ps(a, b, c));
  } else {
    return Batch<T>(_mm512_fmadd_pd(a, b, c));
  }
#elif defined(__FMA__)
  return xsimd::fma(a, b, c);
#else
  static_assert(sizeof(T) == 0, "simd::fma needs FMA (build for x86-64-v3 or newer)");
#endif
}
inline float fma(float a, float b, float c) {
  return std::fma(a, b, c);
}
inline double fma(double a, double b, double c) {
  return std::fma(a, b, c);
}

// Batch<double>::size consecutive floats from p (unaligned), each widened to double (exact: every
// float is a double). One vcvtps2pd on AVX-512 and AVX; the generic path goes through memory.
// (GCC 12 warns falsely about _mm512_undefined_pd, the pass-through operand of the unmasked
// vcvtps2pd, as maybe-uninitialized: every lane is written.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
inline Batch<double> load_widen(const float* p) {
  constexpr size_t kLanes = Batch<double>::size;
#if defined(__AVX512F__)
  static_assert(kLanes == 8, "xsimd's arch does not match __AVX512F__");
  return Batch<double>(_mm512_cvtps_pd(_mm256_loadu_ps(p)));
#elif defined(__AVX__)
  static_assert(kLanes == 4, "xsimd's arch does not match __AVX__");
  return Batch<double>(_mm256_cvtps_pd(_mm_loadu_ps(p)));
#else
  alignas(64) double lanes[kLanes];
  for (size_t i = 0; i < kLanes; ++i) lanes[i] = double(p[i]);
  return Batch<double>::load_aligned(lanes);
#endif
}
#pragma GCC diagnostic pop

}  // namespace reftrain::simd
