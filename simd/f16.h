// IEEE binary16 and the instructions that convert it: the f16 type of the fp16 weight mirror, and
// the one clamp-and-narrow (f32 -> f16) and the one widen (f16 -> f32) that every fast path uses
// (ops/cast.cpp's fast casts, the blocked matmul's packing, the optimizer's fused mirror).
//
// The conversions work on kF16Lanes floats in one F32Lanes register, the width of the ISA's
// conversion instructions: F16C on x86 (8 lanes, vcvtps2ph / vcvtph2ps, on AVX2 and AVX-512 alike),
// NEON on aarch64 (4 lanes, fcvtn / fcvtl). Both round to nearest even (F16C by the immediate,
// NEON under Linux's and macOS's default FPCR), so they give the bits of ops/cast.h's integer
// reference, clamp included. Every build reftrain supports has one of them (x86-64-v3 has F16C).
#pragma once

#include <cstddef>
#include <cstring>

#include "simd/simd.h"

#if defined(__F16C__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#else
#error "reftrain's f16 conversions need F16C (x86-64-v3 or newer) or NEON (aarch64)"
#endif

namespace reftrain::simd {

// 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits. On aarch64 it is ACLE's __fp16 (GCC 12
// has no _Float16 in C++ there; clang has both): the same format, converted by the same
// round-to-nearest-even instructions, used only for storage and conversions here.
#if defined(__aarch64__)
using f16 = __fp16;
#else
using f16 = _Float16;
#endif

// The clamp before the narrowing keeps a finite f32 finite (|x| > 65504 and ±Inf give ±65504)
// and a NaN a NaN: x86's max_ps/min_ps return their SECOND operand when either is NaN (so x goes
// second), NEON's fmax/fmin return the NaN itself. The NaN then converts to a quiet NaN with its
// sign and payload bits 22..13, as the reference does.
#if defined(__F16C__)
constexpr const char* kF16Instructions = "F16C";
constexpr size_t kF16Lanes = 8;
using F32Lanes = __m256;

inline F32Lanes load_f32_lanes(const float* src) {
  return _mm256_loadu_ps(src);
}
inline void store_f32_lanes(float* dst, F32Lanes x) {
  _mm256_storeu_ps(dst, x);
}
inline F32Lanes widen_f16_lanes(const f16* src) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
}
inline void narrow_f16_lanes(f16* dst, F32Lanes x) {
  const __m256 lo = _mm256_set1_ps(-65504.0f), hi = _mm256_set1_ps(65504.0f);
  const __m256 clamped = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm256_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT));
}
#else
// (f16 is __fp16 and float16x4_t holds __fp16 lanes: the same bits, moved by memcpy.)
constexpr const char* kF16Instructions = "NEON";
constexpr size_t kF16Lanes = 4;
using F32Lanes = float32x4_t;

inline F32Lanes load_f32_lanes(const float* src) {
  return vld1q_f32(src);
}
inline void store_f32_lanes(float* dst, F32Lanes x) {
  vst1q_f32(dst, x);
}
inline F32Lanes widen_f16_lanes(const f16* src) {
  float16x4_t h;
  std::memcpy(&h, src, sizeof h);
  return vcvt_f32_f16(h);
}
inline void narrow_f16_lanes(f16* dst, F32Lanes x) {
  const float32x4_t lo = vdupq_n_f32(-65504.0f), hi = vdupq_n_f32(65504.0f);
  const float16x4_t h = vcvt_f16_f32(vminq_f32(hi, vmaxq_f32(lo, x)));
  std::memcpy(dst, &h, sizeof h);
}
#endif

// A whole float batch narrowed to Batch<float>::size halves at dst: one F32Lanes register on AVX2
// and NEON, the two halves of a zmm register on AVX-512.
inline void store_f16(f16* dst, const Batch<float>& x) {
#if defined(__AVX512F__)
  static_assert(Batch<float>::size == 2 * kF16Lanes, "xsimd's arch does not match __AVX512F__");
  const __m512 v = x;
  narrow_f16_lanes(dst, _mm512_castps512_ps256(v));
  narrow_f16_lanes(dst + kF16Lanes,
                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
#else
  static_assert(Batch<float>::size == kF16Lanes, "a float batch is one conversion register");
  narrow_f16_lanes(dst, x);
#endif
}

}  // namespace reftrain::simd
