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
// elements and use the conversion instructions: F16C on x86 (8 lanes, explicit clamp, then
// _mm256_cvtps_ph with round-to-nearest-even), NEON on aarch64 (4 lanes, the same clamp, then
// fcvtn, which rounds to nearest even under the default FPCR); the reference's integer path on
// anything else. Tests hold them bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace reftrain {

// IEEE 754 binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits. On aarch64 it is
// ACLE's __fp16 (GCC 12 has no _Float16 in C++ there; clang has both): the same format, converted
// by the same round-to-nearest-even instructions, used only for storage and conversions here.
#if defined(__aarch64__)
using f16 = __fp16;
#else
using f16 = _Float16;
#endif

// The instructions the `_fast` casts use in this build.
#if defined(__F16C__)
constexpr const char* kCastInstructions = "F16C";
#elif defined(__aarch64__)
constexpr const char* kCastInstructions = "NEON";
#else
constexpr const char* kCastInstructions = "none (the reference's integer path)";
#endif

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

#if defined(__aarch64__)
// Four lanes to f16 on NEON: clamp (fmax/fmin return the NaN when either operand is NaN, so a
// NaN stays NaN), then fcvtn. The fast casts and the optimizer's fused mirror both store
// through it. (f16 is _Float16 and float16x4_t holds __fp16: the same bits, hence the memcpy.)
inline void store_f16x4(f16* dst, float32x4_t x) {
  const float32x4_t lo = vdupq_n_f32(-65504.0f), hi = vdupq_n_f32(65504.0f);
  const float16x4_t h = vcvt_f16_f32(vminq_f32(hi, vmaxq_f32(lo, x)));
  std::memcpy(dst, &h, sizeof h);
}
#endif

// The reference, one value at a time, by integer manipulation of the bit patterns.
uint16_t f32_to_f16_bits(float x);
float f16_bits_to_f32(uint16_t h);

// Arrays, the reference: f32_to_f16_bits / f16_bits_to_f32 on every element, in order.
void cast_f32_to_f16(f16* dst, const float* src, size_t n);
void cast_f16_to_f32(float* dst, const f16* src, size_t n);

// Same as the reference except threaded and, where the build has F16C, 8 lanes per instruction.
void cast_f32_to_f16_fast(f16* dst, const float* src, size_t n);
void cast_f16_to_f32_fast(float* dst, const f16* src, size_t n);

}  // namespace reftrain
