// bf16: the conversions (GPU twin: bf16.wgsl) and the scalar arithmetic of the canonical bf16
// product (ops/matmul_bf16.h), written out one value at a time as the teaching version.
//
//   f32 -> bf16:  round to nearest, ties to even, on the top 16 bits of the f32; a result that is
//                 a bf16 subnormal (exponent field 0, after rounding) becomes ±0; any NaN
//                 becomes the one quiet NaN 0x7FC0. ±Inf stay; a finite value may round to ±Inf.
//   bf16 -> f32:  exact (the bits shifted up by 16).
// bf16 has f32's exponent range, so no clamp is needed (unlike f16): training values that fit f32
// fit bf16, with 8 significant bits instead of 24. The NaN rule drops sign and payload so that
// no ISA's conversion instruction can make two builds differ; the subnormal rule matches the
// products, which read bf16 subnormals as zero anyway.
//
// Shapes: src/dst [n]. cast_f32_to_bf16 / cast_bf16_to_f32 are the reference (integer operations
// on the bit patterns, element by element); the _fast arrays are threaded over blocks and convert
// simd::kBf16Lanes at a time (simd/bf16.h). Tests hold them bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>

#include "simd/bf16.h"

namespace reftrain {

using simd::bf16;

// One value, the reference.
bf16 f32_to_bf16(float x);
float bf16_to_f32(bf16 x);

void cast_f32_to_bf16(bf16* dst, const float* src, size_t n);
void cast_bf16_to_f32(float* dst, const bf16* src, size_t n);

// Stochastic rounding (the weights of --precision bf16-pure): x rounds up in magnitude with
// probability (its low 16 bits) / 2^16, else down, so that the rounding is unbiased on average;
// noise is 16 random bits, added to x's bits before they are cut. The other rules are
// f32_to_bf16's: a bf16-subnormal result becomes ±0, any NaN 0x7FC0, a carry may reach ±Inf.
// The noise is a hash of (seed, step, element index), never of a thread or a lane, so any split
// of the work over threads, and a GPU's, gives the same bits:
//   mix(x) = lowbias32 (x ^= x >> 16; x *= 0x7FEB352D; x ^= x >> 15; x *= 0x846CA68B; x ^= x >> 16)
//   noise  = mix(index ^ mix(step ^ mix(seed))) >> 16
// mix is a bijection of 32-bit words, so within a step no two indices share an input to the
// last mix.
uint32_t hash_mix32(uint32_t x);
uint32_t stochastic_noise(uint32_t seed, uint32_t step, uint32_t index);
bf16 f32_to_bf16_stochastic(float x, uint32_t noise);
void cast_f32_to_bf16_fast(bf16* dst, const float* src, size_t n);
void cast_bf16_to_f32_fast(float* dst, const bf16* src, size_t n);

// The f32 arithmetic of the canonical product, as AMX and VDPBF16PS do it: inputs that are
// subnormal read as zero, results that are subnormal become ±0, rounding to nearest even.
// "Subnormal result" means tininess after rounding: the exact result rounded to 24 significant
// bits with an unbounded exponent is below 2^-126 in magnitude (x86's rule).
float flush_subnormal(float x);
// fma(a, b, c) with the rule above; a and b are bf16 values (8 significant bits), c any f32.
float fma_flush(float a, float b, float c);
// a + b with the rule above.
float add_flush(float a, float b);

// The canonical bf16 dot product, c0 + Σ a[k·as]·b[k·bs] for k < K, in the canonical order
// (ops/matmul_bf16.h): the reference every bf16 product kernel is held to.
float dot_bf16_canonical(float c0, const bf16* a, size_t as, const bf16* b, size_t bs, int K);

}  // namespace reftrain
