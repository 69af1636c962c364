// The element-wise core of every AdamW kernel (adamw_update, adamw_update_f16, adamw_update_bf16,
// adamw_update_bf16_sr, adamw_update_bf16_kahan and the fp32 part of adamw_8bit_update), shared
// so that all of them do the same float operations in the same order and agree bit for bit: the
// kernels with a fused mirror differ only in the mirror's element type, a template parameter,
// bf16-pure's in rounding the new weight stochastically, and bf16-kahan's in adding the step to
// the weight with a compensation. Internal to optim/; the public API is optim/adamw.h.
//
// Bit-identity of the xsimd path with the scalar one rests on three things:
//  - both do the same float operations in the same order: products and sums are separate
//    roundings (the build has -ffp-contract=off, so neither the scalar code nor xsimd's
//    operators, which GCC sees as vector `*` and `+`, are fused into FMA);
//  - √ and ÷ are correctly rounded in IEEE 754, in sqrtss/divss as in vsqrtps/vdivps;
//  - the per-element formula has no cross-lane step, so the lane an element lands in (or the
//    scalar tail) cannot matter.
// Both run under the same MXCSR (no flush-to-zero), so subnormals are treated alike.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ops/bf16.h"
#include "ops/cast.h"
#include "optim/adamw.h"
#include "simd/bf16.h"
#include "simd/f16.h"
#include "simd/simd.h"

namespace reftrain::adamw_core {

// GCC 12 reports the _mm512_undefined_* pass-through operand of unmasked AVX-512 intrinsics
// (vsqrtps, behind xsimd::sqrt) as maybe-uninitialized after inlining; a false positive (the
// all-ones mask writes every lane), silenced for these kernels only.
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The step's constants, computed once on the host as the GPU twin receives them in its uniforms.
struct Coeffs {
  float clip, beta1, one_minus_beta1, beta2, one_minus_beta2, b1_corr, b2_corr, eps, lr, wd;
};

inline Coeffs make_coeffs(const GradStats& stats, const AdamWHyper& hp, int t) {
  // β^t in double, rounded to float (the `bias` uniform is f32).
  const float beta1_t = static_cast<float>(std::pow(double(hp.beta1), t));
  const float beta2_t = static_cast<float>(std::pow(double(hp.beta2), t));
  Coeffs c;
  c.clip = stats.clip;
  c.beta1 = hp.beta1;
  c.one_minus_beta1 = 1.0f - hp.beta1;
  c.beta2 = hp.beta2;
  c.one_minus_beta2 = 1.0f - hp.beta2;
  c.b1_corr = 1.0f / std::max(1.0f - beta1_t, 1e-12f);
  c.b2_corr = 1.0f / std::max(1.0f - beta2_t, 1e-12f);
  c.eps = hp.eps;
  c.lr = hp.lr;
  c.wd = hp.wd;
  return c;
}

// One element's step δ = lr·(m̂/(√v̂ + ε) + wd·w), in float, every operation a separate rounding,
// in this order; stores m and v and zeroes g (w is the caller's). The new weight is w − δ.
inline float adamw_delta(const float* w, float* g, float* m, float* v, size_t i, const Coeffs& c) {
  const float grad = std::isfinite(g[i]) ? g[i] * c.clip : 0.0f;
  const float m_new = c.beta1 * m[i] + c.one_minus_beta1 * grad;
  const float v_new = c.beta2 * v[i] + c.one_minus_beta2 * grad * grad;  // ((1-β2)·g')·g'
  const float m_hat = m_new * c.b1_corr;
  const float v_hat = v_new * c.b2_corr;
  m[i] = m_new;
  v[i] = v_new;
  g[i] = 0.0f;
  return c.lr * (m_hat / (std::sqrt(v_hat) + c.eps) + c.wd * w[i]);
}

// One element's update, w −= δ. Returns the new w. The reference loops over it; the xsimd kernel
// does the same operations lane-wise and calls it for the tail.
inline float adamw_element(float* w, float* g, float* m, float* v, size_t i, const Coeffs& c) {
  const float w_new = w[i] - adamw_delta(w, g, m, v, i, c);
  w[i] = w_new;
  return w_new;
}

// The mirror's element type of the kernels that write none (adamw_update, the 8-bit kernel).
struct NoMirror {};

// The mirror of one new weight, the reference conversion of its type, so that a fused mirror has
// the bits of a separate cast pass: f16 by ops/cast.h's portable bit path (clamp to ±65504,
// round to nearest even), bf16 by ops/bf16.h's (round to nearest even, a subnormal result ±0,
// NaN 0x7FC0).
inline void mirror_element(f16* dst, float x) {
  *dst = f16_of(f32_to_f16_bits(x));
}
inline void mirror_element(bf16* dst, float x) {
  *dst = f32_to_bf16(x);
}

// The mirror of a batch of new weights, bit-identical to mirror_element: the f16 conversion
// instructions of the fast f16 cast (simd/f16.h), and the integer rounding of the fast bf16 cast
// (simd/bf16.h).
inline void mirror_batch(f16* dst, const simd::Batch<float>& x) {
  simd::store_f16(dst, x);
}
inline void mirror_batch(bf16* dst, const simd::Batch<float>& x) {
  simd::store_bf16(dst, x);
}

// The step's constants as batches, built once per range.
struct Lanes {
  using B = simd::Batch<float>;
  explicit Lanes(const Coeffs& c)
      : zero(0.0f),
        clip(c.clip),
        beta1(c.beta1),
        one_minus_beta1(c.one_minus_beta1),
        beta2(c.beta2),
        one_minus_beta2(c.one_minus_beta2),
        b1_corr(c.b1_corr),
        b2_corr(c.b2_corr),
        eps(c.eps),
        lr(c.lr),
        wd(c.wd) {}
  B zero, clip, beta1, one_minus_beta1, beta2, one_minus_beta2, b1_corr, b2_corr, eps, lr, wd;
};

// adamw_delta on the batch of elements from i, whose weights are wi, lane-wise: stores m and v,
// zeroes g, and returns the step δ.
inline simd::Batch<float> adamw_delta_batch(const simd::Batch<float>& wi, float* g, float* m,
                                            float* v, size_t i, const Lanes& k) {
  using B = simd::Batch<float>;
  const B gi = B::load_unaligned(g + i);
  const B mi = B::load_unaligned(m + i);
  const B vi = B::load_unaligned(v + i);
  const B grad = xsimd::select(xsimd::isfinite(gi), gi * k.clip, k.zero);
  const B m_new = k.beta1 * mi + k.one_minus_beta1 * grad;
  const B v_new = k.beta2 * vi + k.one_minus_beta2 * grad * grad;
  const B m_hat = m_new * k.b1_corr;
  const B v_hat = v_new * k.b2_corr;
  m_new.store_unaligned(m + i);
  v_new.store_unaligned(v + i);
  k.zero.store_unaligned(g + i);
  return k.lr * (m_hat / (xsimd::sqrt(v_hat) + k.eps) + k.wd * wi);
}

// adamw_element on the batch of elements from i: returns the new w (the caller stores it, or its
// rounding).
inline simd::Batch<float> adamw_batch(const float* w, float* g, float* m, float* v, size_t i,
                                      const Lanes& k) {
  const simd::Batch<float> wi = simd::Batch<float>::load_unaligned(w + i);
  return wi - adamw_delta_batch(wi, g, m, v, i, k);
}

// Elements [begin, end) of one range: full xsimd batches, then the < lanes leftover elements
// through adamw_element; unless M is NoMirror, the mirror (f16 or bf16) of each new weight too.
template <typename M>
inline void adamw_range(float* w, float* g, float* m, float* v, M* w16, size_t begin, size_t end,
                        const Coeffs& c) {
  constexpr bool kMirror = !std::is_same_v<M, NoMirror>;
  constexpr size_t kLanes = simd::Batch<float>::size;
  const Lanes k(c);
  size_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    const simd::Batch<float> w_new = adamw_batch(w, g, m, v, i, k);
    w_new.store_unaligned(w + i);
    if constexpr (kMirror) mirror_batch(w16 + i, w_new);
  }
  for (; i < end; ++i) {
    const float w_new = adamw_element(w, g, m, v, i, c);
    if constexpr (kMirror) mirror_element(w16 + i, w_new);
  }
}

// Where the stochastic rounding's noise comes from: the run's seed and the step t, and the
// mega-buffer index of the range's first element (so that a range's noise does not depend on
// how the buffer is cut into ranges, shards or thread blocks).
struct NoiseAt {
  uint32_t seed, step;
  size_t first;
};

// adamw_element, then its new weight rounded stochastically to bf16 (ops/bf16.h): the bits into
// wb16[i], their widening into w[i].
inline void adamw_stochastic_element(float* w, float* g, float* m, float* v, bf16* wb16, size_t i,
                                     const Coeffs& c, const NoiseAt& at) {
  const float w_new = adamw_element(w, g, m, v, i, c);
  const uint32_t noise = stochastic_noise(at.seed, at.step, uint32_t(at.first + i));
  wb16[i] = f32_to_bf16_stochastic(w_new, noise);
  w[i] = bf16_to_f32(wb16[i]);
}

// Elements [begin, end) of one range as adamw_stochastic_element, a batch at a time: the hash's
// first two mixes are the same for every element of a step, so they are done once.
inline void adamw_stochastic_range(float* w, float* g, float* m, float* v, bf16* wb16, size_t begin,
                                   size_t end, const Coeffs& c, const NoiseAt& at) {
  using simd::U32;
  constexpr size_t kLanes = simd::Batch<float>::size;
  static_assert(U32::size == kLanes, "a float batch is one batch of u32 lanes");
  const Lanes k(c);
  const U32 key(hash_mix32(at.step ^ hash_mix32(at.seed)));
  alignas(64) uint32_t lane[kLanes];
  for (size_t l = 0; l < kLanes; ++l) lane[l] = uint32_t(l);
  const U32 iota = U32::load_aligned(lane);
  size_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    const U32 index = U32(uint32_t(at.first + i)) + iota;
    const U32 noise = simd::hash_mix32_lanes(index ^ key) >> 16;
    const U32 bits = simd::round_to_bf16_bits_stochastic(
        xsimd::bitwise_cast<U32>(adamw_batch(w, g, m, v, i, k)), noise);
    simd::store_low_halves(wb16 + i, bits);
    xsimd::bitwise_cast<simd::Batch<float>>(bits << 16).store_unaligned(w + i);
  }
  for (; i < end; ++i) adamw_stochastic_element(w, g, m, v, wb16, i, c, at);
}

// The step added to a bf16 weight with Kahan compensation (--precision bf16-kahan): the sum
// s = comp − δ of the carried compensation and this step, then the weight rounded to the nearest
// bf16, and what that rounding lost, s − (w_new − w), kept as the next compensation (rounded to
// bf16 too). w_new − w is exact in f32 whenever the two bf16 values' exponents differ by less
// than 16, as a step's do. The bits of w_new into wb16[i], its widening into w[i].
inline void adamw_kahan_element(float* w, float* g, float* m, float* v, bf16* wb16, bf16* comp,
                                size_t i, const Coeffs& c) {
  const float w_old = w[i];
  const float s = bf16_to_f32(comp[i]) - adamw_delta(w, g, m, v, i, c);
  wb16[i] = f32_to_bf16(w_old + s);
  const float w_new = bf16_to_f32(wb16[i]);
  comp[i] = f32_to_bf16(s - (w_new - w_old));
  w[i] = w_new;
}

// Elements [begin, end) of one range as adamw_kahan_element, a batch at a time.
inline void adamw_kahan_range(float* w, float* g, float* m, float* v, bf16* wb16, bf16* comp,
                              size_t begin, size_t end, const Coeffs& c) {
  using B = simd::Batch<float>;
  using simd::U32;
  constexpr size_t kLanes = B::size;
  const Lanes k(c);
  size_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    const B w_old = B::load_unaligned(w + i);
    const B comp_in = xsimd::bitwise_cast<B>(simd::load_widened_bits(comp + i));
    const B s = comp_in - adamw_delta_batch(w_old, g, m, v, i, k);
    const U32 bits = simd::round_to_bf16_bits(xsimd::bitwise_cast<U32>(w_old + s));
    simd::store_low_halves(wb16 + i, bits);
    const B w_new = xsimd::bitwise_cast<B>(bits << 16);
    simd::store_bf16(comp + i, s - (w_new - w_old));
    w_new.store_unaligned(w + i);
  }
  for (; i < end; ++i) adamw_kahan_element(w, g, m, v, wb16, comp, i, c);
}

#pragma GCC diagnostic pop

}  // namespace reftrain::adamw_core
