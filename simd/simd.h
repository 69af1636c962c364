// The thin layer over xsimd 8 (Debian 12 ships 8.1; CMakeLists.txt refuses 9 and newer, which
// renamed `hadd` to `reduce_add` and retyped `bitwise_cast`). Kernels include this header, never
// <xsimd/xsimd.hpp>, so the spelling and the fixes below live in one place.
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>
#include <xsimd/xsimd.hpp>

// xsimd 8's NEON float division and square root are not IEEE: both are reciprocal estimates
// (frecpe, frsqrte) refined by two Newton steps, a few ulp from the correctly rounded result
// that divps/sqrtps give on x86, and aarch64 keeps them for float (it overrides only double). On
// aarch64 every float batch division and square root of reftrain goes through FDIV and FSQRT
// instead, correctly rounded like the scalar `/` and std::sqrt, by specialising xsimd's two
// kernels for neon64 before anything uses them. (tests/simd/test_simd.cpp holds batch `/` and
// xsimd::sqrt to the scalar operations bit for bit on every ISA.)
#if defined(__aarch64__)
namespace xsimd::kernel {
template <>
inline batch<float, neon64> div<neon64>(batch<float, neon64> const& lhs,
                                        batch<float, neon64> const& rhs,
                                        requires_arch<neon>) noexcept {
  return vdivq_f32(lhs, rhs);
}
template <>
inline batch<float, neon64> sqrt<neon64>(batch<float, neon64> const& arg,
                                         requires_arch<neon>) noexcept {
  return vsqrtq_f32(arg);
}
}  // namespace xsimd::kernel
#endif

namespace reftrain::simd {

// The instruction set xsimd targets in this build (chosen by -march at compile time).
using Arch = xsimd::default_arch;
template <typename T>
using Batch = xsimd::batch<T, Arch>;

inline const char* arch_name() {
  return Arch::name();
}

// The vector registers of the ISA, for sizing register tiles: 32 zmm on AVX-512, 32 v on aarch64
// (NEON), 16 ymm on AVX2.
#if defined(__AVX512F__) || defined(__aarch64__)
constexpr int kVectorRegisters = 32;
#else
constexpr int kVectorRegisters = 16;
#endif

// Sum of a batch's lanes. (GCC 12 warns falsely about _mm512_undefined_ps/_pd inside xsimd 8's
// AVX-512 hadd, as maybe-uninitialized or, depending on the caller, uninitialized; the lanes it
// calls undefined are overwritten before use.)
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
template <typename T>
T reduce_add(const Batch<T>& b) {
  return xsimd::hadd(b);
}
#pragma GCC diagnostic pop

// a·b + c rounded once (a fused multiply-add), lane by lane: the same bits as std::fma on every
// ISA. xsimd 8's own xsimd::fma is fused on fma3 targets but computes a*b + c with two roundings
// on AVX-512 (no avx512f overload), so the AVX-512 and NEON cases call the intrinsic themselves:
// on aarch64 that is FMLA (vfmaq_f32/vfmaq_f64, accumulator first), fused like vfmadd231ps.
template <typename T>
Batch<T> fma(const Batch<T>& a, const Batch<T>& b, const Batch<T>& c) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "float or double");
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    return Batch<T>(_mm512_fmadd_ps(a, b, c));
  } else {
    return Batch<T>(_mm512_fmadd_pd(a, b, c));
  }
#elif defined(__FMA__)
  return xsimd::fma(a, b, c);
#elif defined(__aarch64__)
  static_assert(std::is_same_v<Arch, xsimd::neon64>, "aarch64 builds use xsimd's neon64");
  if constexpr (std::is_same_v<T, float>) {
    return Batch<T>(vfmaq_f32(c, a, b));
  } else {
    return Batch<T>(vfmaq_f64(c, a, b));
  }
#else
  static_assert(sizeof(T) == 0,
                "simd::fma needs FMA: build for x86-64-v3 or newer, or for aarch64 (NEON)");
#endif
}
inline float fma(float a, float b, float c) {
  return std::fma(a, b, c);
}
inline double fma(double a, double b, double c) {
  return std::fma(a, b, c);
}

// Batch<double>::size consecutive floats from p (unaligned), each widened to double (exact: every
// float is a double). One vcvtps2pd on AVX-512 and AVX, one fcvtl on NEON; the generic path goes
// through memory.
// (GCC 12 warns falsely about _mm512_undefined_pd, the pass-through operand of the unmasked
// vcvtps2pd, as maybe-uninitialized: every lane is written.)
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
inline Batch<double> load_widen(const float* p) {
  constexpr size_t kLanes = Batch<double>::size;
#if defined(__AVX512F__)
  static_assert(kLanes == 8, "xsimd's arch does not match __AVX512F__");
  return Batch<double>(_mm512_cvtps_pd(_mm256_loadu_ps(p)));
#elif defined(__AVX__)
  static_assert(kLanes == 4, "xsimd's arch does not match __AVX__");
  return Batch<double>(_mm256_cvtps_pd(_mm_loadu_ps(p)));
#elif defined(__aarch64__)
  static_assert(kLanes == 2, "xsimd's arch does not match __aarch64__");
  return Batch<double>(vcvt_f64_f32(vld1_f32(p)));
#else
  alignas(64) double lanes[kLanes];
  for (size_t i = 0; i < kLanes; ++i) lanes[i] = double(p[i]);
  return Batch<double>::load_aligned(lanes);
#endif
}
#pragma GCC diagnostic pop

// n rounded up to a multiple of m: padded tile and panel sizes.
constexpr int round_up(int n, int m) {
  return (n + m - 1) / m * m;
}

// Fetches rows × cols elements at c (row stride ld) into the cache for writing, one prefetch per
// 64-byte line: a hint, no value changes. The products call it for the next tile's C while a tile
// computes. Always inlined: GCC 12 finds a function whose only effect is prefetches free of side
// effects and deletes its calls; a wrapper that only calls this must be always inlined too.
template <typename T>
[[gnu::always_inline]] inline void prefetch_rows_for_writing(const T* c, size_t ld, int rows,
                                                             int cols) {
  constexpr int kLine = 64 / int(sizeof(T));
  for (int i = 0; i < rows; ++i) {
    const T* row = c + size_t(i) * ld;
    for (int j = 0; j < cols; j += kLine) __builtin_prefetch(row + j, 1, 3);
    __builtin_prefetch(row + cols - 1, 1, 3);
  }
}

}  // namespace reftrain::simd
