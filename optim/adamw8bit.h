// AdamW with 8-bit optimizer state. GPU twin: 12_optimizer.wgsl, adamw_8bit_update (bindings
// w, g, m_packed, v_packed, m_scale, v_scale, grad_stats, size, hp, bias).
//
// m and v are stored as one byte per element, four per uint32 (element 4i+j in byte j, little
// end first), with one fp32 scale per block of kQuantBlock = 256 elements for each. The kernel
// dequantizes a block, runs the fp32 AdamW formulas of adamw_update on it (same g', clip, bias
// correction, decoupled wd, g = 0; the step uses the fresh fp32 m and v), and requantizes the
// new m and v with fresh block scales, in one pass. Blocks are independent, so OpenMP splits
// over them and the bytes do not depend on the thread count. adamw_8bit_update (scalar, the
// reference) and adamw_8bit_update_fast (xsimd) do the same float operations in the same order:
// bit-identical.
//
// Quantization (docs/numerics.md, "8-bit AdamW state", chosen by measurement):
//   m, signed linear absmax: scale = absmax/127, code = round-half-even(m/scale) in −127..127
//     (stored as int8 two's complement), m̂ = code·scale. |m̂ − m| ≤ scale/2.
//   v, square root linear, rounded to nearest but never to 0: scale = √vmax/255, code =
//     round-half-even(√v/scale) clamped to 1..255 for v > 0, 0 for v = 0; v̂ = (code·scale)².
//     So v̂ = 0 only for v = 0, |code·scale − √v| ≤ scale/2 (+2^-15·scale for the float
//     quotient) where √v ≥ scale/2, and code 1 (v̂ ≥ 4v) below: √v̂ ≥ (2/3)√v, so rounding can
//     grow an element's step m̂/(√v̂+ε) by at most 1.5×, never to m̂/ε. Measured against:
//     (a) linear absmax of v, which rounds every v below vmax/510 to 0, so such an element's
//     next step is m̂/(√((1−β2)·g'²)+ε), unbounded as g' → 0 (runs diverge); (b) √v rounded UP
//     (v̂ ≥ v always), whose one-sided error the EMA v = β2·v̂ + (1−β2)·g'² amplifies by
//     1/(1−β2): steps shrink, and 300 steps of `tiny` on the CLI test text end 34 % above fp32
//     (this scheme: −0.2 %).
//     A block whose v overflowed to +Inf stores scale +Inf and code 255 throughout (its
//     weights stop moving, like that element in fp32).
//   A zero block has scale 0 and codes 0 (zero-initialised storage is the zero state).
#pragma once

#include <cstddef>
#include <cstdint>

#include "optim/adamw.h"

namespace reftrain {

constexpr size_t kQuantBlock = 256;

// Storage for n elements: ceil(n/4) uint32 codes for each of m and v, ceil(n/256) scales each.
constexpr size_t quant_words(size_t n) {
  return (n + 3) / 4;
}
constexpr size_t quant_blocks(size_t n) {
  return (n + kQuantBlock - 1) / kQuantBlock;
}

// One block (≤ 256 elements, values in, codes and scale out) and back, as described above.
// quantize_m's code byte is the int8 code's two's complement.
void quantize_m(const float* m, size_t count, uint8_t* codes, float* scale);
void dequantize_m(const uint8_t* codes, float scale, size_t count, float* m);
void quantize_v(const float* v, size_t count, uint8_t* codes, float* scale);
void dequantize_v(const uint8_t* codes, float scale, size_t count, float* v);

// One AdamW step over n elements at step t ≥ 1. n need not be a multiple of 4 or 256; the last
// block is partial. Zero-initialised codes and scales are the zero state.
void adamw_8bit_update(float* w, float* g, uint32_t* m_packed, uint32_t* v_packed, float* m_scale,
                       float* v_scale, size_t n, const GradStats& stats, const AdamWHyper& hp,
                       int t);
// Same as adamw_8bit_update except xsimd batches and OpenMP over blocks: bit-identical.
void adamw_8bit_update_fast(float* w, float* g, uint32_t* m_packed, uint32_t* v_packed,
                            float* m_scale, float* v_scale, size_t n, const GradStats& stats,
                            const AdamWHyper& hp, int t);

}  // namespace reftrain
