// f32 <-> f16 casts for the fp16 weight mirror. GPU twin: 08_cast.wgsl,
// cast_f32_to_f16 and cast_f16_to_f32, bindings src (0), dst (1), n (2).
//   f32 -> f16:  dst = f16(clamp(src, -65504, 65504)), rounded to nearest, ties to even
//   f16 -> f32:  dst = f32(src), exact (every f16 is an f32)
// The saturating clamp means a finite f32 never becomes ±Inf: |x| > 65504 (the f16 max,
// 2^15·(2 - 2^-10)) gives ±65504, and so does ±Inf. f32 values below the f16 range become f16
// subnormals (multiples of 2^-24) or ±0, rounded to nearest-even like the rest; the sign of zero
// is kept.
//
// NaN: stays NaN in both directions, as a quiet NaN with its sign and the top bits of its payload
// kept (f32 -> f16: sign | 0x7E00 | payload bits 22..13; f16 -> f32: sign | 0x7FC00000 |
// payload << 13). This is what F16C's vcvtps2ph/vcvtph2ps do, so both paths agree bit for bit.
// The GPU twin does NOT promise this: WGSL leaves clamp(NaN, lo, hi) implementation-defined
// (Metal returns a bound in practice, others pass the NaN through), so golden tensors for parity
// tests must not contain NaN.
//
// Shapes: src/dst [n]. The plain names are the reference: integer manipulation of the bit
// patterns, one value at a time, on any CPU. The `_fast` arrays are parallel over blocks of
// elements and use the conversion instructions (simd/f16.h): F16C on x86 (8 lanes, explicit
// clamp, then _mm256_cvtps_ph with round-to-nearest-even), NEON on aarch64 (4 lanes, the same
// clamp, then fcvtn, which rounds to nearest even under the default FPCR). Tests hold them
// bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "simd/f16.h"

namespace reftrain {

// IEEE 754 binary16 (simd/f16.h: _Float16 on x86, ACLE's __fp16 on aarch64).
using simd::f16;

// The instructions the `_fast` casts use in this build.
constexpr const char* kCastInstructions = simd::kF16Instructions;

// The bit patterns of floats and halves, and back (memcpy: no aliasing tricks).
inline uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
inline uint16_t bits_of(f16 h) {
  uint16_t u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}
inline f16 f16_of(uint16_t u) {
  f16 h;
  std::memcpy(&h, &u, sizeof h);
  return h;
}

// The reference, one value at a time, by integer manipulation of the bit patterns.
uint16_t f32_to_f16_bits(float x);
float f16_bits_to_f32(uint16_t h);

// Arrays, the reference: f32_to_f16_bits / f16_bits_to_f32 on every element, in order.
void cast_f32_to_f16(f16* dst, const float* src, size_t n);
void cast_f16_to_f32(float* dst, const f16* src, size_t n);

// Same as the reference except threaded and simd::kF16Lanes elements per instruction.
void cast_f32_to_f16_fast(f16* dst, const float* src, size_t n);
void cast_f16_to_f32_fast(float* dst, const f16* src, size_t n);

}  // namespace reftrain
