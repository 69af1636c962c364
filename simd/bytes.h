// Bytes to float lanes and back, a batch at a time: the 8-bit optimizer's codes
// (optim/adamw8bit.cpp). xsimd 8.1 has no widening or narrowing casts between bytes and 32-bit
// lanes, so AVX-512 uses its intrinsics (vpmovsxbd / vpmovzxbd, vcvttps2dq / vcvttpd2dq,
// vpmovdb) and every other ISA a lane loop through memory; both convert each lane on its own, so
// the lane loop gives the intrinsics' bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "simd/simd.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace reftrain::simd {

// GCC 12 reports the _mm512_undefined_* pass-through operand of unmasked AVX-512 intrinsics as
// maybe-uninitialized after inlining; a false positive (the all-ones mask writes every lane).
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Batch<float>::size bytes from p, as int8 (kSigned) or uint8, converted to float (exact).
template <bool kSigned>
inline Batch<float> load_bytes(const uint8_t* p) {
  constexpr size_t kF = Batch<float>::size;
#if defined(__AVX512F__)
  static_assert(kF == 16, "xsimd's arch does not match __AVX512F__");
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return Batch<float>(
      _mm512_cvtepi32_ps(kSigned ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes)));
#else
  alignas(64) float lanes[kF];
  for (size_t k = 0; k < kF; ++k) lanes[k] = kSigned ? float(int8_t(p[k])) : float(p[k]);
  return Batch<float>::load_aligned(lanes);
#endif
}

// Batch<float>::size bytes at p from integral values in −128..255: the low byte of each (two's
// complement) after truncation to int.
inline void store_bytes(uint8_t* p, const Batch<float>& q) {
#if defined(__AVX512F__)
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(q)));
#else
  constexpr size_t kF = Batch<float>::size;
  alignas(64) float lanes[kF];
  q.store_aligned(lanes);
  for (size_t k = 0; k < kF; ++k) p[k] = uint8_t(int(lanes[k]));
#endif
}

// The same from two double batches (lo's lanes first): 2·Batch<double>::size bytes at p.
inline void store_bytes(uint8_t* p, const Batch<double>& lo, const Batch<double>& hi) {
#if defined(__AVX512F__)
  const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvttpd_epi32(lo)),
                                       _mm512_cvttpd_epi32(hi), 1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(q));
#else
  constexpr size_t kD = Batch<double>::size;
  alignas(64) double lanes[2 * kD];
  lo.store_aligned(lanes);
  hi.store_aligned(lanes + kD);
  for (size_t k = 0; k < 2 * kD; ++k) p[k] = uint8_t(int(lanes[k]));
#endif
}

#pragma GCC diagnostic pop

}  // namespace reftrain::simd
