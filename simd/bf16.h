// bfloat16 storage and the ISA pieces of its conversions: the bf16 type of the bf16 weight mirror
// and activations, a lane-parallel f32 -> bf16 narrowing and bf16 -> f32 widening, and the
// floating-point mode the canonical bf16 product runs under (ops/matmul_bf16.h).
//
// bf16 is the top half of an IEEE binary32: sign, the same 8 exponent bits, 7 mantissa bits. So
// widening is a 16-bit shift (exact), and narrowing is rounding away the low 16 bits. The rules,
// the same as ops/bf16.h's scalar reference:
//   round to nearest, ties to even (a carry may bump the exponent, up to ±Inf);
//   a result whose exponent field is 0 (a bf16 subnormal, after rounding) becomes ±0;
//   any NaN becomes the one quiet NaN 0x7FC0 (sign and payload dropped, so no two ISAs differ).
// The narrowing is integer arithmetic on 32-bit lanes (xsimd), then one per-ISA instruction to
// pack the lanes to 16 bits: no ISA conversion instruction is used (AVX512_BF16's vcvtneps2bf16
// keeps NaN payloads), so every build gives the same bits by construction.
#pragma once

#include <cstddef>
#include <cstdint>

#include "simd/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace reftrain::simd {

// One bfloat16, stored as its bit pattern (C++17 has no bf16 arithmetic type; none is needed:
// every operation widens to f32 first).
struct bf16 {
  uint16_t bits;
};
static_assert(sizeof(bf16) == 2, "bf16 is two bytes");

using U32 = Batch<uint32_t>;
constexpr size_t kBf16Lanes = U32::size;

// (GCC 12 warns falsely about _mm512_undefined_epi32, the pass-through operand of the unmasked
// shifts and conversions below and in xsimd's, as (maybe-)uninitialized: every lane is written.)
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

// The bf16 bits r = (u + carry) >> 16 of f32 bits u, given its rounding's carry, finished: a
// subnormal result ±0, a NaN u the one quiet NaN.
inline U32 finish_bf16_bits(const U32& u, const U32& r) {
  using I32 = Batch<int32_t>;
  const U32 flushed = xsimd::select((r & U32(0x7F80u)) == U32(0u), r & U32(0x8000u), r);
  // NaN: |u| above the infinity's bits. |u| < 2^31, so a signed compare orders it as an unsigned
  // one would (AVX2 has only signed compares; an unsigned one costs it five more instructions).
  const I32 abs = xsimd::bitwise_cast<I32>(u & U32(0x7FFFFFFFu));
  return xsimd::bitwise_cast<U32>(
      xsimd::select(abs > I32(0x7F800000), I32(0x7FC0), xsimd::bitwise_cast<I32>(flushed)));
}

// The narrowing of one batch of f32 bit patterns to bf16 bit patterns (still in 32-bit lanes).
inline U32 round_to_bf16_bits(const U32& u) {
  const U32 lsb = (u >> 16) & U32(1u);
  return finish_bf16_bits(u, (u + U32(0x7FFFu) + lsb) >> 16);
}

// ops/bf16.h's stochastic rounding and its noise hash, lane by lane: the same integer operations.
inline U32 hash_mix32_lanes(U32 x) {
  x ^= x >> 16;
  x *= U32(0x7FEB352Du);
  x ^= x >> 15;
  x *= U32(0x846CA68Bu);
  x ^= x >> 16;
  return x;
}
inline U32 round_to_bf16_bits_stochastic(const U32& u, const U32& noise) {
  return finish_bf16_bits(u, (u + noise) >> 16);
}

// dst[0..kBf16Lanes) = the low 16 bits of each lane of r.
inline void store_low_halves(bf16* dst, const U32& r) {
#if defined(__AVX512F__)
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi32_epi16(r));
#elif defined(__AVX2__)
  // packus saturates to u16: the lanes are below 2^16 already. It packs within 128-bit halves,
  // so the 64-bit quarters 0 and 2 hold the result.
  const __m256i p = _mm256_packus_epi32(r, r);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08)));
#elif defined(__aarch64__)
  vst1_u16(reinterpret_cast<uint16_t*>(dst), vmovn_u32(r));
#else
#error "reftrain's bf16 narrowing is written for x86-64 (AVX2, AVX-512) and aarch64"
#endif
}

// kBf16Lanes bf16 values as f32 bit patterns (<< 16).
inline U32 load_widened_bits(const bf16* src) {
#if defined(__AVX512F__)
  return U32(_mm512_slli_epi32(
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))), 16));
#elif defined(__AVX2__)
  return U32(_mm256_slli_epi32(
      _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))), 16));
#elif defined(__aarch64__)
  return U32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(src)), 16));
#endif
}

// dst[0..kBf16Lanes) = bf16(x): one float batch is one batch of 32-bit lanes (the AdamW kernels'
// fused bf16 mirror stores its new weights with it).
inline void store_bf16(bf16* dst, const Batch<float>& x) {
  static_assert(Batch<float>::size == kBf16Lanes, "a float batch is one batch of u32 lanes");
  store_low_halves(dst, round_to_bf16_bits(xsimd::bitwise_cast<U32>(x)));
}
inline void narrow_bf16_lanes(bf16* dst, const float* src) {
  store_bf16(dst, Batch<float>::load_unaligned(src));
}
inline void widen_bf16_lanes(float* dst, const bf16* src) {
  xsimd::bitwise_cast<Batch<float>>(load_widened_bits(src)).store_unaligned(dst);
}
#pragma GCC diagnostic pop

// The floating-point mode of the canonical bf16 product's fast paths: subnormal inputs read as
// zero and subnormal results flushed to zero, the behaviour AMX and VDPBF16PS have built in
// (they ignore the mode), set for the emulation's plain FMAs and adds. x86: MXCSR's DAZ and FTZ;
// FTZ there flushes when the result rounded to 24 bits with an unbounded exponent is below
// 2^-126 (tininess after rounding), as AMX does. aarch64: FPCR.FZ, which flushes inputs and
// results but detects tininess before rounding: an exact result in [2^-126 - 2^-151, 2^-126),
// which x86 rounds up to 2^-126 and keeps, becomes 0 there (docs/numerics.md, "bf16").
// Restores the previous mode when it goes out of scope, so callers' fp32 code never sees it.
class FlushDenormals {
 public:
#if defined(__x86_64__)
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }  // FTZ | DAZ
  ~FlushDenormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#elif defined(__aarch64__)
  FlushDenormals() {
    __asm__ volatile("mrs %0, fpcr" : "=r"(saved_));
    const uint64_t fz = saved_ | (uint64_t(1) << 24);
    __asm__ volatile("msr fpcr, %0" : : "r"(fz));
  }
  ~FlushDenormals() { __asm__ volatile("msr fpcr, %0" : : "r"(saved_)); }

 private:
  uint64_t saved_;
#endif
 public:
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;
};

}  // namespace reftrain::simd
