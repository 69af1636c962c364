#include "optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "simd/simd.h"

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

// Bit-identity of adamw_update and adamw_update_ref rests on three things:
//  - both do the same float operations in the same order: products and sums are separate
//    roundings (the build has -ffp-contract=off, so neither the scalar code nor xsimd's
//    operators, which GCC sees as vector `*` and `+`, are fused into FMA);
//  - √ and ÷ are correctly rounded in IEEE 754, in sqrtss/divss as in vsqrtps/vdivps;
//  - the per-element formula has no cross-lane step, so the lane an element lands in (or the
//    scalar tail) cannot matter.
// Both run under the same MXCSR (no flush-to-zero), so subnormals are treated alike.

namespace reftrain {

// GCC 12 reports the _mm512_undefined_* pass-through operand of unmasked AVX-512 intrinsics
// (vsqrtps, vmaxps, vminps, vcvtps2ph, ...) as maybe-uninitialized after inlining; a false
// positive (the all-ones mask writes every lane), silenced for this file's kernels only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

constexpr int kNormChunks = 64;

// Elements per OpenMP block of the xsimd AdamW kernels: 64 KiB of each fp32 stream, a multiple
// of every batch width. Blocks are fixed, so the split does not depend on the thread count.
constexpr size_t kBlock = 16384;

// ----------------------------------------------------------------------------------------------
// reduce_norm_sq

size_t chunk_begin(size_t n, int c) {
  return n * size_t(c) / kNormChunks;
}

// One chunk in xsimd. Lanes are widened to double before squaring, so every g² is exact (a
// 24-bit mantissa squared fits in 53 bits; the smallest float squared, 2^-298, is a normal
// double). kAcc accumulators of Batch<double>::size lanes each take every kAcc-th group of
// lanes; at the end they are added as (a0 + a1) + (a2 + a3), then the lanes by reduce_add (a
// fixed shuffle tree), then the < kAcc·lanes leftover elements one by one in order. The order
// depends on the chunk's bounds only, never on the thread that runs it.
double chunk_norm_sq(const float* g, size_t begin, size_t end) {
  using D = simd::Batch<double>;
  constexpr size_t kLanes = D::size;
  constexpr size_t kAcc = 4;
  const D zero(0.0);
  const D inf(std::numeric_limits<double>::infinity());
  D a0 = zero, a1 = zero, a2 = zero, a3 = zero;
  // select(|x| < ∞, x², 0): false for ±Inf and NaN.
  const auto sq = [&](size_t i) {
    const D x = simd::load_widen(g + i);
    return xsimd::select(xsimd::abs(x) < inf, x * x, zero);
  };
  size_t i = begin;
  for (; i + kAcc * kLanes <= end; i += kAcc * kLanes) {
    a0 += sq(i);
    a1 += sq(i + kLanes);
    a2 += sq(i + 2 * kLanes);
    a3 += sq(i + 3 * kLanes);
  }
  double s = simd::reduce_add((a0 + a1) + (a2 + a3));
  for (; i < end; ++i) {
    if (std::isfinite(g[i])) s += double(g[i]) * double(g[i]);
  }
  return s;
}

// ----------------------------------------------------------------------------------------------
// AdamW

// The step's constants, computed once on the host as the GPU twin receives them in its uniforms.
struct Coeffs {
  float clip, beta1, one_minus_beta1, beta2, one_minus_beta2, b1_corr, b2_corr, eps, lr, wd;
};

Coeffs make_coeffs(const GradStats& stats, const AdamWHyper& hp, int t) {
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

// One element, in float, every operation a separate rounding, in this order. Returns the new w.
// The reference loops over it; the xsimd kernel does the same operations lane-wise and calls it
// for the tail.
inline float adamw_element(float* w, float* g, float* m, float* v, size_t i, const Coeffs& c) {
  const float grad = std::isfinite(g[i]) ? g[i] * c.clip : 0.0f;
  const float m_new = c.beta1 * m[i] + c.one_minus_beta1 * grad;
  const float v_new = c.beta2 * v[i] + c.one_minus_beta2 * grad * grad;  // ((1-β2)·g')·g'
  const float m_hat = m_new * c.b1_corr;
  const float v_hat = v_new * c.b2_corr;
  const float w_new = w[i] - c.lr * (m_hat / (std::sqrt(v_hat) + c.eps) + c.wd * w[i]);
  w[i] = w_new;
  m[i] = m_new;
  v[i] = v_new;
  g[i] = 0.0f;
  return w_new;
}

f16 f16_of(uint16_t u) {
  f16 h;
  std::memcpy(&h, &u, sizeof h);
  return h;
}

// The mirror of one element: the portable bit path of ops/cast.h (clamp to ±65504, then
// round-to-nearest-even), bit-identical to F16C's vcvtps2ph after the same clamp.
inline f16 mirror_scalar(float x) {
  return f16_of(f32_to_f16_bits_portable(x));
}

// The mirror of one batch: clamp to ±65504, then vcvtps2ph with round-to-nearest-even, as
// ops/cast.cpp does. max/min return their SECOND operand when either is NaN, so putting x second
// keeps a NaN a NaN (quiet, payload bits 22..13 kept), as the portable path does.
inline void store_mirror(f16* dst, const simd::Batch<float>& x) {
#if defined(__F16C__) && defined(__AVX512F__)
  static_assert(simd::Batch<float>::size == 16, "xsimd's arch does not match __AVX512F__");
  const __m512 lo = _mm512_set1_ps(-65504.0f), hi = _mm512_set1_ps(65504.0f);
  const __m512 clamped = _mm512_min_ps(hi, _mm512_max_ps(lo, __m512(x)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm512_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__)
  static_assert(simd::Batch<float>::size == 8, "F16C without AVX-512: expected 8 float lanes");
  const __m256 lo = _mm256_set1_ps(-65504.0f), hi = _mm256_set1_ps(65504.0f);
  const __m256 clamped = _mm256_min_ps(hi, _mm256_max_ps(lo, __m256(x)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm256_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT));
#else
  constexpr size_t kLanes = simd::Batch<float>::size;
  alignas(64) float lanes[kLanes];
  x.store_aligned(lanes);
  for (size_t k = 0; k < kLanes; ++k) dst[k] = mirror_scalar(lanes[k]);
#endif
}

// The xsimd kernel, with or without the fused fp16 mirror. OpenMP takes fixed blocks of kBlock
// elements; in each, full batches, then the < lanes leftover elements through adamw_element.
template <bool kMirror>
void adamw_simd(float* w, float* g, float* m, float* v, f16* w16, size_t n, const Coeffs& c) {
  using B = simd::Batch<float>;
  constexpr size_t kLanes = B::size;
  const B zero(0.0f), clip(c.clip), beta1(c.beta1), one_minus_beta1(c.one_minus_beta1),
      beta2(c.beta2), one_minus_beta2(c.one_minus_beta2), b1_corr(c.b1_corr), b2_corr(c.b2_corr),
      eps(c.eps), lr(c.lr), wd(c.wd);
  const size_t nblocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (size_t blk = 0; blk < nblocks; ++blk) {
    const size_t end = std::min(n, blk * kBlock + kBlock);
    size_t i = blk * kBlock;
    for (; i + kLanes <= end; i += kLanes) {
      const B gi = B::load_unaligned(g + i);
      const B mi = B::load_unaligned(m + i);
      const B vi = B::load_unaligned(v + i);
      const B wi = B::load_unaligned(w + i);
      const B grad = xsimd::select(xsimd::isfinite(gi), gi * clip, zero);
      const B m_new = beta1 * mi + one_minus_beta1 * grad;
      const B v_new = beta2 * vi + one_minus_beta2 * grad * grad;
      const B m_hat = m_new * b1_corr;
      const B v_hat = v_new * b2_corr;
      const B w_new = wi - lr * (m_hat / (xsimd::sqrt(v_hat) + eps) + wd * wi);
      w_new.store_unaligned(w + i);
      m_new.store_unaligned(m + i);
      v_new.store_unaligned(v + i);
      zero.store_unaligned(g + i);
      if constexpr (kMirror) store_mirror(w16 + i, w_new);
    }
    for (; i < end; ++i) {
      const float w_new = adamw_element(w, g, m, v, i, c);
      if constexpr (kMirror) w16[i] = mirror_scalar(w_new);
    }
  }
}

}  // namespace

// ----------------------------------------------------------------------------------------------

double reduce_norm_sq_ref(const float* g, size_t n) {
  double partial[kNormChunks];
#pragma omp parallel for schedule(static)
  for (int c = 0; c < kNormChunks; ++c) {
    const size_t begin = chunk_begin(n, c);
    const size_t end = chunk_begin(n, c + 1);
    double s = 0.0;
    for (size_t i = begin; i < end; ++i) {
      if (std::isfinite(g[i])) s += double(g[i]) * double(g[i]);
    }
    partial[c] = s;
  }
  double total = 0.0;
  for (int c = 0; c < kNormChunks; ++c) total += partial[c];
  return total;
}

// The same 64 chunks as the reference, each summed by chunk_norm_sq, the chunk sums in order.
// Every g² is exact in both, so they differ only in the order of the additions: each term goes
// through at most ⌈n/64⌉ + 80 double additions in either, and each result is within γ_k·Σg² of
// the exact sum (k = ⌈n/64⌉ + 80, γ_k = k·2^-53 / (1 - k·2^-53)); they agree to 2·γ_k·Σg².
double reduce_norm_sq(const float* g, size_t n) {
  double partial[kNormChunks];
#pragma omp parallel for schedule(static)
  for (int c = 0; c < kNormChunks; ++c) {
    partial[c] = chunk_norm_sq(g, chunk_begin(n, c), chunk_begin(n, c + 1));
  }
  double total = 0.0;
  for (int c = 0; c < kNormChunks; ++c) total += partial[c];
  return total;
}

GradStats finalize_grad_stats(double norm_sq, float max_norm) {
  const float grad_norm = static_cast<float>(std::sqrt(norm_sq));
  const float clip = max_norm > 0.0f ? std::min(1.0f, max_norm / std::max(grad_norm, 1e-6f)) : 1.0f;
  return {grad_norm, clip};
}

void adamw_update_ref(float* w, float* g, float* m, float* v, size_t n, const GradStats& stats,
                      const AdamWHyper& hp, int t) {
  const Coeffs c = make_coeffs(stats, hp, t);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) adamw_element(w, g, m, v, i, c);
}

void adamw_update(float* w, float* g, float* m, float* v, size_t n, const GradStats& stats,
                  const AdamWHyper& hp, int t) {
  adamw_simd<false>(w, g, m, v, nullptr, n, make_coeffs(stats, hp, t));
}

void adamw_update_f16_ref(float* w, float* g, float* m, float* v, f16* w16, size_t n,
                          const GradStats& stats, const AdamWHyper& hp, int t) {
  const Coeffs c = make_coeffs(stats, hp, t);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) w16[i] = mirror_scalar(adamw_element(w, g, m, v, i, c));
}

void adamw_update_f16(float* w, float* g, float* m, float* v, f16* w16, size_t n,
                      const GradStats& stats, const AdamWHyper& hp, int t) {
  adamw_simd<true>(w, g, m, v, w16, n, make_coeffs(stats, hp, t));
}

#pragma GCC diagnostic pop

}  // namespace reftrain
