#include "optim/adamw8bit.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "optim/adamw_core.h"
#include "optim/kernel_table.h"
#include "simd/bytes.h"
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
using adamw_core::NoMirror;

// ---------------------------------------------------------------------------------------------
// The xsimd path's block quantizers. They do the scalar functions' operations lane-wise and give
// the same bytes: every conversion between a code and a float is exact; ·, ÷, √ and the
// round-half-even of vroundps/vroundpd (xsimd::nearbyint, under the same MXCSR as std::nearbyint)
// are correctly rounded; the block maxima are a fold of `(acc < x) ? x : acc`, std::max's rule,
// whose result (NaNs skipped, no −0 among |m| or v) does not depend on the order; the clamps are
// std::clamp's selects. A partial block goes through the scalar functions. A NaN m (only from a
// corrupt Inf/NaN m scale or clip: dequantized m is finite) makes the reference convert a NaN to
// int8, formally undefined; this build's scalar code gives x86's integer indefinite 0x80000000,
// byte 0, and so does vcvttpd2dq here (a NaN v gets code 0 in both, from v > 0 being false).
// The codes go to and from float lanes through simd/bytes.h. GCC 12's false
// -Wmaybe-uninitialized inside AVX-512 intrinsics: see adamw_core.h.
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

using BF = simd::Batch<float>;
using BD = simd::Batch<double>;
constexpr size_t kF = BF::size;
constexpr size_t kD = BD::size;
static_assert(kF == 2 * kD, "a float batch is two double batches");
static_assert(kQuantBlock % kF == 0, "a block is whole float batches");

// The packed words of a full block are its codes in order on a little-endian host.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr bool kLittleEndian = true;
#else
constexpr bool kLittleEndian = false;
#endif

// std::max(acc, x), lane-wise.
inline BF max_step(const BF& acc, const BF& x) {
  return xsimd::select(acc < x, x, acc);
}

// std::clamp(x, lo, hi), lane-wise: (x < lo) ? lo : (hi < x) ? hi : x, so a NaN stays NaN.
template <typename T>
inline simd::Batch<T> clamp(const simd::Batch<T>& x, T lo, T hi) {
  const simd::Batch<T> l(lo), h(hi);
  return xsimd::select(x < l, l, xsimd::select(h < x, h, x));
}

// The fold of std::max over a batch's lanes, starting from 0.
inline float max_lanes(const BF& acc) {
  alignas(64) float lanes[kF];
  acc.store_aligned(lanes);
  float r = 0.0f;
  for (size_t k = 0; k < kF; ++k) r = std::max(r, lanes[k]);
  return r;
}

void dequantize_m_block(const uint8_t* codes, float scale, float* m) {
  const BF s(scale);
  for (size_t i = 0; i < kQuantBlock; i += kF)
    (simd::load_bytes<true>(codes + i) * s).store_aligned(m + i);
}

void dequantize_v_block(const uint8_t* codes, float scale, float* v) {
  const BF s(scale);
  for (size_t i = 0; i < kQuantBlock; i += kF) {
    const BF r = simd::load_bytes<false>(codes + i) * s;
    (r * r).store_aligned(v + i);
  }
}

void quantize_m_block(const float* m, uint8_t* codes, float* scale) {
  BF acc(0.0f);
  for (size_t i = 0; i < kQuantBlock; i += kF)
    acc = max_step(acc, xsimd::abs(BF::load_aligned(m + i)));
  float s = max_lanes(acc) / 127.0f;
  if (!std::isfinite(s)) s = FLT_MAX / 127.0f;
  *scale = s;
  if (s == 0.0f) {
    std::fill(codes, codes + kQuantBlock, uint8_t{0});
    return;
  }
  const BD inv(1.0 / double(s)), zero(0.0);
  for (size_t i = 0; i < kQuantBlock; i += kF) {
    BD q0 = clamp(xsimd::nearbyint(simd::load_widen(m + i) * inv), -127.0, 127.0);
    BD q1 = clamp(xsimd::nearbyint(simd::load_widen(m + i + kD) * inv), -127.0, 127.0);
    q0 = xsimd::select(xsimd::isnan(q0), zero, q0);  // as quantize_m: NaN → code 0
    q1 = xsimd::select(xsimd::isnan(q1), zero, q1);
    simd::store_bytes(codes + i, q0, q1);
  }
}

void quantize_v_block(const float* v, uint8_t* codes, float* scale) {
  BF acc(0.0f);
  for (size_t i = 0; i < kQuantBlock; i += kF) acc = max_step(acc, BF::load_aligned(v + i));
  const float vmax = max_lanes(acc);
  if (vmax == 0.0f) {
    *scale = 0.0f;
    std::fill(codes, codes + kQuantBlock, uint8_t{0});
    return;
  }
  if (std::isinf(vmax)) {
    *scale = vmax;
    std::fill(codes, codes + kQuantBlock, uint8_t{255});
    return;
  }
  const float s = std::sqrt(vmax) / 255.0f;
  *scale = s;
  const BF sb(s), zero(0.0f);
  for (size_t i = 0; i < kQuantBlock; i += kF) {
    const BF x = BF::load_aligned(v + i);
    const BF q = clamp(xsimd::nearbyint(xsimd::sqrt(x) / sb), 1.0f, 255.0f);
    simd::store_bytes(codes + i, xsimd::select(x > zero, q, zero));
  }
}

#pragma GCC diagnostic pop

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
    if constexpr (kSimd) {
      if (count == kQuantBlock && kLittleEndian) {
        alignas(64) uint8_t mc[kQuantBlock], vc[kQuantBlock];
        alignas(64) float m[kQuantBlock], v[kQuantBlock];
        std::memcpy(mc, m_packed + begin / 4, kQuantBlock);
        std::memcpy(vc, v_packed + begin / 4, kQuantBlock);
        dequantize_m_block(mc, m_scale[b], m);
        dequantize_v_block(vc, v_scale[b], v);
// GCC 12 warns that the scalar tail loop of adamw_range, dead for a full block, would overrun.
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Waggressive-loop-optimizations"
#endif
        adamw_range<NoMirror>(w + begin, g + begin, m, v, nullptr, 0, kQuantBlock, c);
#pragma GCC diagnostic pop
        quantize_m_block(m, mc, &m_scale[b]);
        quantize_v_block(v, vc, &v_scale[b]);
        std::memcpy(m_packed + begin / 4, mc, kQuantBlock);
        std::memcpy(v_packed + begin / 4, vc, kQuantBlock);
        continue;
      }
    }
    uint8_t codes[kQuantBlock];
    float m[kQuantBlock], v[kQuantBlock];
    unpack_codes(m_packed + begin / 4, count, codes);
    dequantize_m(codes, m_scale[b], count, m);
    unpack_codes(v_packed + begin / 4, count, codes);
    dequantize_v(codes, v_scale[b], count, v);
    if constexpr (kSimd) {
      adamw_range<NoMirror>(w + begin, g + begin, m, v, nullptr, 0, count, c);
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
    // A NaN m (reachable only from a corrupted state: a NaN scale or clip) is stored as 0,
    // rather than left to the undefined NaN → int conversion.
    codes[i] = std::isnan(q) ? uint8_t{0} : uint8_t(int8_t(q));
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

void adamw_8bit_update(float* w, float* g, uint32_t* m_packed, uint32_t* v_packed, float* m_scale,
                       float* v_scale, size_t n, const GradStats& stats, const AdamWHyper& hp,
                       int t) {
  adamw_8bit_blocks<false>(w, g, m_packed, v_packed, m_scale, v_scale, n,
                           make_coeffs(stats, hp, t));
}

void adamw_8bit_update_fast(float* w, float* g, uint32_t* m_packed, uint32_t* v_packed,
                            float* m_scale, float* v_scale, size_t n, const GradStats& stats,
                            const AdamWHyper& hp, int t) {
  adamw_8bit_blocks<true>(w, g, m_packed, v_packed, m_scale, v_scale, n, make_coeffs(stats, hp, t));
}

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> adamw_8bit_records() {
  using namespace record;
  KernelBinding t = in("t", "i32", "[1]");
  t.wgsl = "(not bound: the host turns t into bias)";
  return {
      {"adamw_8bit_update",
       "per block of 256: dequantize m (code·scale) and v ((code·scale)²), the adamw_update "
       "step, requantize (docs/numerics.md: m signed absmax/127, v as √v/(√vmax/255), never 0)",
       {inout("w", "f32", "[size]"), inout("g", "f32", "[size]"),
        inout("m_packed", "u8 (u32 words)", "[4·ceil(size/4)]"),
        inout("v_packed", "u8 (u32 words)", "[4·ceil(size/4)]"),
        inout("m_scale", "f32", "[ceil(size/256)]"), inout("v_scale", "f32", "[ceil(size/256)]"),
        in("grad_stats", "f32", "[2]"), scalar("size"), in("hp", "f32", "[4]"),
        in("bias", "f32", "[4]"), t},
       "12_optimizer.wgsl",
       "",
       "optim/adamw8bit.h",
       "adamw_8bit_update, quantize_m, dequantize_m, quantize_v, dequantize_v",
       "adamw_8bit_update_fast",
       "xsimd batches, OpenMP over blocks; bit-identical",
       "",
       "optimizer.wgsl",
       "docs/kernels/12_optimizer.md",
       "adamw_8bit_update",
       "tests/optim/test_adamw8bit.cpp",
       "bench/bench_optimizer.cpp BM_gpt2_124m_step_adamw8bit"},
  };
}

}  // namespace reftrain
