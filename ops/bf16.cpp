#include "ops/bf16.h"

#include <cmath>
#include <cstring>

#include "ops/cast.h"
#include "ops/cast_blocks.h"
#include "ops/kernel_record.h"
#include "simd/bf16.h"

namespace reftrain {

namespace {

constexpr uint16_t kBf16QuietNaN = 0x7FC0;
constexpr float kMinNormal = 0x1p-126f;
// Half an ulp below 2^-126 at 24 bits: an exact result at or above it rounds (unbounded
// exponent) up to 2^-126 and is kept; below it, it is tiny and flushed.
constexpr double kTinyBound = 0x1p-126 - 0x1p-151;

}  // namespace

// Adding 0x7FFF plus the lowest kept bit, then dropping 16 bits, rounds to nearest with ties to
// even: below half an ulp nothing carries, above it one does, and at exactly half the carry
// happens only when the kept part is odd. A carry out of the mantissa bumps the exponent, which
// is the correct rounding too (up to 0x7F80, +Inf).
bf16 f32_to_bf16(float x) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return bf16{kBf16QuietNaN};
  const uint32_t r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16;
  if ((r & 0x7F80) == 0) return bf16{uint16_t(r & 0x8000)};  // subnormal after rounding: ±0
  return bf16{uint16_t(r)};
}

uint32_t hash_mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

uint32_t stochastic_noise(uint32_t seed, uint32_t step, uint32_t index) {
  return hash_mix32(index ^ hash_mix32(step ^ hash_mix32(seed))) >> 16;
}

// The noise replaces f32_to_bf16's 0x7FFF + lsb: a carry out of the low 16 bits happens for
// `low` of the 2^16 noise values. The magnitude bits take the carry (the sign bit cannot: a
// non-NaN magnitude is at most 0x7F800000), so negative values round alike in magnitude.
bf16 f32_to_bf16_stochastic(float x, uint32_t noise) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return bf16{kBf16QuietNaN};
  const uint32_t r = (u + (noise & 0xFFFFu)) >> 16;
  if ((r & 0x7F80) == 0) return bf16{uint16_t(r & 0x8000)};  // subnormal after rounding: ±0
  return bf16{uint16_t(r)};
}

float bf16_to_f32(bf16 x) {
  return float_of(uint32_t(x.bits) << 16);
}

void cast_f32_to_bf16(bf16* dst, const float* src, size_t n) {
  cast_elements(dst, src, n, f32_to_bf16);
}

void cast_bf16_to_f32(float* dst, const bf16* src, size_t n) {
  cast_elements(dst, src, n, bf16_to_f32);
}

void cast_f32_to_bf16_fast(bf16* dst, const float* src, size_t n) {
  cast_lanes<simd::kBf16Lanes, simd::narrow_bf16_lanes>(dst, src, n);
}

void cast_bf16_to_f32_fast(float* dst, const bf16* src, size_t n) {
  cast_lanes<simd::kBf16Lanes, simd::widen_bf16_lanes>(dst, src, n);
}

// ---- the canonical product's arithmetic ------------------------------------------------

float flush_subnormal(float x) {
  return std::fabs(x) < kMinNormal ? std::copysign(0.0f, x) : x;
}

// std::fma rounds with gradual underflow; the hardware decides tininess on the result rounded
// with an unbounded exponent. The two disagree only when std::fma gives exactly ±2^-126: then the
// exact value may lie in [2^-126 - 2^-150, 2^-126 - 2^-151), tiny for the hardware. a·b has at
// most 16 significant bits (two bf16), so in double a·b is exact and a·b + c is within 2^-179 of
// the exact sum, whose distance from the bound is 0 or at least 2^-167: the comparison is exact.
float fma_flush(float a, float b, float c) {
  a = flush_subnormal(a), b = flush_subnormal(b), c = flush_subnormal(c);
  const float r = std::fma(a, b, c);
  if (!(std::fabs(r) <= kMinNormal)) return r;  // normal, ±Inf or NaN (as the hardware: 0·Inf)
  if (std::fabs(r) == kMinNormal && std::fabs(double(a) * double(b) + double(c)) >= kTinyBound) {
    return r;
  }
  return std::copysign(0.0f, r);
}

// The sum of two f32 below 2^-126 is exact (both are multiples of 2^-149), so the rounded
// result is tiny exactly when the exact one is.
float add_flush(float a, float b) {
  return flush_subnormal(flush_subnormal(a) + flush_subnormal(b));
}

// Blocks of 32 (the last padded with zeros, which the padding's FMAs see: fma(0, 0, -0) is +0);
// per block an even chain and an odd chain from +0, then c = c + (even + odd).
float dot_bf16_canonical(float c0, const bf16* a, size_t as, const bf16* b, size_t bs, int K) {
  auto at = [&](const bf16* x, size_t stride, int k) {
    return k < K ? bf16_to_f32(x[size_t(k) * stride]) : 0.0f;
  };
  float c = flush_subnormal(c0);
  for (int k0 = 0; k0 < K; k0 += 32) {
    float even = 0.0f, odd = 0.0f;
    for (int k = k0; k < k0 + 32; k += 2) {
      even = fma_flush(at(a, as, k), at(b, bs, k), even);
      odd = fma_flush(at(a, as, k + 1), at(b, bs, k + 1), odd);
    }
    c = add_flush(c, add_flush(even, odd));
  }
  return c;
}

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> cast_bf16_records() {
  using namespace record;
  return {
      {"cast_f32_to_bf16",
       "dst = bf16(src): round to nearest, ties to even; a bf16-subnormal result → ±0; any NaN "
       "→ 0x7FC0",
       {out("dst", "bf16", "[n]"), in("src", "f32", "[n]"), scalar("n")},
       "",
       "",
       "ops/bf16.h",
       "cast_f32_to_bf16, f32_to_bf16",
       "cast_f32_to_bf16_fast",
       "threaded, simd::kBf16Lanes at a time in integer lanes (simd/bf16.h); bit-identical",
       "",
       "bf16.wgsl:cast_f32_to_bf16",
       "docs/kernels/14_bf16.md",
       "bf16_dot",
       "tests/ops/test_bf16.cpp, tests/golden/test_golden_bf16.cpp",
       ""},
  };
}

}  // namespace reftrain
