// Global-norm clipping and AdamW over a range of the mega-buffers. GPU twin:
// 12_optimizer.wgsl (reduce_norm_sq, finalize_grad_stats, adamw_update, adamw_update_f16; and
// tests/webgpu's optimizer_bf16.wgsl for adamw_update_bf16), whose formulas are written out below
// and in docs/kernels/12_optimizer.md. A call on the wd range and one on the no-wd range are the
// CPU twin of the two dispatches.
//
// Each kernel has a scalar reference (the plain name: the teaching version, the oracle, and the
// name of its fixture and GPU entry point) and a `_fast` version, the same except for xsimd
// batches that OpenMP splits over fixed blocks. The AdamW kernels do the same IEEE operations in
// the same order in both (no FMA), so they agree bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/bf16.h"
#include "ops/cast.h"

namespace reftrain {

struct GradStats {
  float grad_norm;  // √Σg² over finite g
  float clip;       // the factor applied to every gradient, ≤ 1
};

struct AdamWHyper {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float wd;  // 0 in the no-wd range
};

// Σ g² over finite g only. The range is cut into kNormChunks fixed chunks (not one per thread);
// each chunk and then the chunk sums are added in order in double precision, so the result is
// identical for any thread count.
double reduce_norm_sq(const float* g, size_t n);
// Same as reduce_norm_sq except that the chunks run on OpenMP threads, 16 lanes at a time.
double reduce_norm_sq_fast(const float* g, size_t n);

// The chunks are a property of the buffer: chunk c of n elements is [norm_chunk_begin(n, c),
// norm_chunk_begin(n, c + 1)). A data-parallel run computes some chunks' sums on each rank and
// adds all kNormChunks of them in order (add_norm_partials), which gives the bits of the call
// above. partial[c - first] = Σ g² of chunk c for c in [first, last), where element i of the
// buffer is window[i - window_begin] (the window must hold those chunks).
constexpr int kNormChunks = 64;
size_t norm_chunk_begin(size_t n, int c);
void norm_sq_partials(const float* window, size_t window_begin, size_t n, int first, int last,
                      double* partial);
void norm_sq_partials_fast(const float* window, size_t window_begin, size_t n, int first, int last,
                           double* partial);
double add_norm_partials(const double* partial);  // the kNormChunks sums, in order

// grad_norm = √norm_sq; clip = min(1, max_norm / max(grad_norm, 1e-6)), or 1 when max_norm is 0
// (clipping off).
GradStats finalize_grad_stats(double norm_sq, float max_norm);

// One AdamW step at step number t ≥ 1 (fp32, element-wise, in place), then g = 0:
//   g' = isfinite(g) ? g·clip : 0;  m = β1·m + (1-β1)·g';  v = β2·v + (1-β2)·g'²
//   m̂ = m / max(1-β1ᵗ, 1e-12);  v̂ = v / max(1-β2ᵗ, 1e-12);  w -= lr·(m̂/(√v̂+ε) + wd·w)
void adamw_update(float* w, float* g, float* m, float* v, size_t n, const GradStats& stats,
                  const AdamWHyper& hp, int t);
// Same as adamw_update except xsimd batches split over OpenMP threads: bit-identical.
void adamw_update_fast(float* w, float* g, float* m, float* v, size_t n, const GradStats& stats,
                       const AdamWHyper& hp, int t);

// adamw_update, then in the same pass the fp16 forward mirror of the new weight:
//   w16 = f16(clamp(w, ±65504)), round-to-nearest-even (ops/cast.h's cast_f32_to_f16).
void adamw_update_f16(float* w, float* g, float* m, float* v, f16* w16, size_t n,
                      const GradStats& stats, const AdamWHyper& hp, int t);
// Same as adamw_update_f16 except xsimd batches (F16C for the mirror) split over OpenMP threads:
// bit-identical.
void adamw_update_f16_fast(float* w, float* g, float* m, float* v, f16* w16, size_t n,
                           const GradStats& stats, const AdamWHyper& hp, int t);

// adamw_update, then in the same pass the bf16 forward mirror of the new weight:
//   wb16 = bf16(w), round to nearest even, a bf16-subnormal result ±0, any NaN 0x7FC0
//   (ops/bf16.h's cast_f32_to_bf16: the bits a separate cast pass would write).
// The same update code as adamw_update_f16; only the mirror's type differs.
void adamw_update_bf16(float* w, float* g, float* m, float* v, bf16* wb16, size_t n,
                       const GradStats& stats, const AdamWHyper& hp, int t);
// Same as adamw_update_bf16 except xsimd batches (the fast bf16 cast's integer rounding for the
// mirror) split over OpenMP threads: bit-identical.
void adamw_update_bf16_fast(float* w, float* g, float* m, float* v, bf16* wb16, size_t n,
                            const GradStats& stats, const AdamWHyper& hp, int t);

// adamw_update, then the new weight rounded to bf16 stochastically (--precision bf16-pure, whose
// weights are bf16 values only): per element i of the range, which is element first + i of the
// mega-buffer,
//   wb16 = bf16_stochastic(w, stochastic_noise(seed, t, first + i));  w = f32(wb16)
// (ops/bf16.h: rounds up in magnitude with probability (w's low 16 bits)/2^16; the index taken
// mod 2^32). So w is always the widening of the mirror, and the noise of an element depends on
// the seed, the step and its place in the buffer alone.
void adamw_update_bf16_sr(float* w, float* g, float* m, float* v, bf16* wb16, size_t n,
                          const GradStats& stats, const AdamWHyper& hp, int t, uint32_t seed,
                          size_t first);
// Same as adamw_update_bf16_sr except xsimd batches (the noise hash and the rounding in integer
// lanes) split over OpenMP threads: bit-identical.
void adamw_update_bf16_sr_fast(float* w, float* g, float* m, float* v, bf16* wb16, size_t n,
                               const GradStats& stats, const AdamWHyper& hp, int t, uint32_t seed,
                               size_t first);

// adamw_update's step added to a bf16 weight with Kahan compensation (--precision bf16-kahan,
// whose weights are bf16 values only, and comp the compensation, bf16 per weight): per element,
// with δ = lr·(m̂/(√v̂ + ε) + wd·w) from adamw_update's formula,
//   s = f32(comp) − δ;  wb16 = bf16(w + s);  comp = bf16(s − (f32(wb16) − w));  w = f32(wb16)
// (every bf16(·) cast_f32_to_bf16's rounding: to nearest even, a bf16-subnormal ±0, NaN 0x7FC0).
// So w stays the widening of the mirror, and the part of each step the rounding loses is carried
// into the next step instead of being dropped.
void adamw_update_bf16_kahan(float* w, float* g, float* m, float* v, bf16* wb16, bf16* comp,
                             size_t n, const GradStats& stats, const AdamWHyper& hp, int t);
// Same as adamw_update_bf16_kahan except xsimd batches split over OpenMP threads: bit-identical.
void adamw_update_bf16_kahan_fast(float* w, float* g, float* m, float* v, bf16* wb16, bf16* comp,
                                  size_t n, const GradStats& stats, const AdamWHyper& hp, int t);

}  // namespace reftrain
