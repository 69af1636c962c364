#include "optim/adamw8bit.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "optim/adamw_core.h"
#include "simd/simd.h"

namespace reftrain {

namespace {

// ---------------------------------------------------------------------------------------------
// Packing: element 4i+j lives in byte j (bits 8j..8j+7) of word i. Written with shifts, not
// memcpy, so the layout does not depend on the host's byte order. Blocks start at multiples of
// 256, hence at word boundaries; the unused bytes of a partial last word are written as 0.

void unpack_codes(const uint32_t* words, size_t count, uint8_t* codes) {
  for (size_t i = 0; i < count; ++i) codes[i] = uint8_t(words[i / 4] >> (8 * (i % 4)));
}

void pack_codes(const uint8_t* codes, size_t count, uint32_t* words) {
  for (size_t wi = 0; wi < quant_words(count); ++wi) {
    uint32_t word = 0;
    for (size_t j = 0; j < 4 && 4 * wi + j < count; ++j)
      word |= uint32_t(codes[4 * wi + j]) << (8 * j);
    words[wi] = word;
  }
}

// The dequantized v of code c at block scale s, exactly as dequantize_v computes it.
inline float v_of_code(unsigned c, float s) {
  const float r = float(c) * s;
  return r * r;
}

using adamw_core::adamw_element;
using adamw_core::adamw_range;
using adamw_core::Coeffs;
using adamw_core::make_coeffs;

// One AdamW step over blocks of 256: dequantize the block's m and v, run adamw_update's fp32
// formulas on it (scalar in the reference, xsimd otherwise — bit-identical), requantize with
// fresh scales. Blocks are independent (each owns its elements, its words and its two scales),
// so OpenMP may hand them to any thread: the bytes do not depend on the thread count.
template <bool kSimd>
void adamw_8bit_blocks(float* w, float* g, uint32_t* m_packed, uint32_t* v_packed, float* m_scale,
                       float* v_scale, size_t n, const Coeffs& c) {
  const size_t blocks = quant_blocks(n);
#pragma omp parallel for schedule(static)
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kQuantBlock;
    const size_t count = std::min(kQuantBlock, n - begin);
    uint8_t codes[kQuantBlock];
    float m[kQuantBlock], v[kQuantBlock];
    unpack_codes(m_packed + begin / 4, count, codes);
    dequantize_m(codes, m_scale[b], count, m);
    unpack_codes(v_packed + begin / 4, count, codes);
    dequantize_v(codes, v_scale[b], count, v);
    if constexpr (kSimd) {
      adamw_range<false>(w + begin, g + begin, m, v, nullptr, 0, count, c);
    } else {
      for (size_t i = 0; i < count; ++i) adamw_element(w + begin, g + begin, m, v, i, c);
    }
    quantize_m(m, count, codes, &m_scale[b]);
    pack_codes(codes, count, m_packed + begin / 4);
    quantize_v(v, count, codes, &v_scale[b]);
    pack_codes(codes, count, v_packed + begin / 4);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// m: signed linear absmax. scale = absmax/127 (float); code = nearest integer to m/scale, ties
// to even, computed as double(m)·(1/double(scale)): a quotient of two floats is either exactly
// a half-integer or at least 2^-26 away from one, and the double product errs by < 2^-44, so
// the code is a nearest integer to the exact quotient and |code·scale − m| ≤ scale/2 exactly
// (for a normal scale). Codes are clamped to ±127 (only reachable when the scale is subnormal
// or the block holds ±Inf, whose scale is then FLT_MAX/127).

void quantize_m(const float* m, size_t count, uint8_t* codes, float* scale) {
  float absmax = 0.0f;
  for (size_t i = 0; i < count; ++i) absmax = std::max(absmax, std::abs(m[i]));
  float s = absmax / 127.0f;
  if (!std::isfinite(s)) s = FLT_MAX / 127.0f;
  *scale = s;
  if (s == 0.0f) {
    std::fill(codes, codes + count, uint8_t{0});
    return;
  }
  const double inv = 1.0 / double(s);
  for (size_t i = 0; i < count; ++i) {
    const double q = std::clamp(std::nearbyint(double(m[i]) * inv), -127.0, 127.0);
    codes[i] = uint8_t(int8_t(q));
  }
}

void dequantize_m(const uint8_t* codes, float scale, size_t count, float* m) {
  for (size_t i = 0; i < count; ++i) m[i] = float(int8_t(codes[i])) * scale;
}

// v: its square root stored linearly, rounded to nearest, but never to 0. scale =
// √vmax/255 (float ops); code = round-half-even(√v/scale) clamped to 1..255 for v > 0, 0 for
// v = 0. So v̂ = 0 only when v = 0; |code·scale − √v| ≤ scale·(1/2 + 2^-15) (the float quotient
// errs by ≤ 2 roundings, ≤ 2^-15 at codes ≤ 256) where √v ≥ scale/2; below that the code is 1,
// i.e. v̂ ≥ 4v. Hence √v̂ ≥ (2/3)·√v: rounding can grow an element's step m̂/(√v̂+ε) by at most
// 1.5×, never to m̂/ε. Rounding up instead (v̂ ≥ v always) was measured and rejected: the EMA
// v = β2·v̂ + (1−β2)·g'² amplifies a one-sided rounding error by 1/(1−β2) (see
// docs/numerics.md). A block whose vmax is +Inf stores scale +Inf and code 255 everywhere
// (v̂ = +Inf: those weights stop moving, as the one with v = +Inf does in fp32 AdamW).

void quantize_v(const float* v, size_t count, uint8_t* codes, float* scale) {
  float vmax = 0.0f;
  for (size_t i = 0; i < count; ++i) vmax = std::max(vmax, v[i]);
  if (vmax == 0.0f) {
    *scale = 0.0f;
    std::fill(codes, codes + count, uint8_t{0});
    return;
  }
  if (std::isinf(vmax)) {
    *scale = vmax;
    std::fill(codes, codes + count, uint8_t{255});
    return;
  }
  // √vmax ≥ 2^-74.5 for any positive float, so s is a normal float.
  const float s = std::sqrt(vmax) / 255.0f;
  *scale = s;
  for (size_t i = 0; i < count; ++i) {
    codes[i] = v[i] > 0.0f ? uint8_t(std::clamp(std::nearbyint(std::sqrt(v[i]) / s), 1.0f, 255.0f))
                           : uint8_t{0};
  }
}

void dequantize_v(const uint8_t* codes, float scale, size_t count, float* v) {
  for (size_t i = 0; i < count; ++i) v[i] = v_of_code(codes[i], scale);
}

// ---------------------------------------------------------------------------------------------

void adamw_8bit_update_ref(float* w, float* g, uint32_t* m_packed, uint32_t* v_packed,
                           float* m_scale, float* v_scale, size_t n, const GradStats& stats,
                           const AdamWHyper& hp, int t) {
  adamw_8bit_blocks<false>(w, g, m_packed, v_packed, m_scale, v_scale, n,
                           make_coeffs(stats, hp, t));
}

void adamw_8bit_update(float* w, float* g, uint32_t* m_packed, uint32_t* v_packed, float* m_scale,
                       float* v_scale, size_t n, const GradStats& stats, const AdamWHyper& hp,
                       int t) {
  adamw_8bit_blocks<true>(w, g, m_packed, v_packed, m_scale, v_scale, n, make_coeffs(stats, hp, t));
}

}  // namespace reftrain
