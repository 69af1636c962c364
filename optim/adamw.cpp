#include "optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "optim/adamw_core.h"
#include "optim/kernel_table.h"
#include "simd/parallel.h"
#include "simd/simd.h"

namespace reftrain {

// GCC 12 reports the _mm512_undefined_* pass-through operand of unmasked AVX-512 intrinsics
// (vsqrtps, vmaxps, vminps, vcvtps2ph, ...) as maybe-uninitialized after inlining; a false
// positive (the all-ones mask writes every lane), silenced for this file's kernels only.
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

using adamw_core::adamw_element;
using adamw_core::adamw_range;
using adamw_core::Coeffs;
using adamw_core::make_coeffs;
using adamw_core::mirror_element;
using adamw_core::NoMirror;

// Elements per OpenMP block of the xsimd AdamW kernels: 64 KiB of each fp32 stream, a multiple
// of every batch width. Blocks are fixed, so the split does not depend on the thread count.
constexpr size_t kBlock = 16384;

// ----------------------------------------------------------------------------------------------
// reduce_norm_sq

// One chunk in xsimd, the same bits on every ISA. Lanes are widened to double before squaring, so
// every g² is exact (a 24-bit mantissa squared fits in 53 bits; the smallest float squared,
// 2^-298, is a normal double). The sum has kWidth = 32 logical lanes: lane l adds the elements
// begin + l, begin + l + 32, ... of the full groups in order, whatever the native vector width
// (4 batches of 8 doubles on AVX-512, 8 of 4 on AVX2); then the 32 lane sums in a fixed halving
// tree, then the < 32 leftover elements one by one in order. The order depends on the chunk's
// bounds only, never on the ISA or the thread that runs it.
double chunk_norm_sq(const float* g, size_t begin, size_t end) {
  using D = simd::Batch<double>;
  constexpr size_t kLanes = D::size;
  constexpr size_t kWidth = 32;
  constexpr size_t kAcc = kWidth / kLanes;
  static_assert(kWidth % kLanes == 0, "the logical width must be a multiple of the native one");
  const D zero(0.0);
  const D inf(std::numeric_limits<double>::infinity());
  // select(|x| < ∞, x², 0): false for ±Inf and NaN.
  const auto sq = [&](size_t i) {
    const D x = simd::load_widen(g + i);
    return xsimd::select(xsimd::abs(x) < inf, x * x, zero);
  };
  D acc[kAcc];
  for (D& a : acc) a = zero;
  size_t i = begin;
  for (; i + kWidth <= end; i += kWidth) {
#pragma GCC unroll 8
    for (size_t j = 0; j < kAcc; ++j) acc[j] += sq(i + j * kLanes);
  }
  alignas(64) double lane[kWidth];
  for (size_t j = 0; j < kAcc; ++j) acc[j].store_aligned(lane + j * kLanes);
  for (size_t w = kWidth / 2; w > 0; w /= 2) {
    for (size_t l = 0; l < w; ++l) lane[l] += lane[l + w];
  }
  double s = lane[0];
  for (; i < end; ++i) {
    if (std::isfinite(g[i])) s += double(g[i]) * double(g[i]);
  }
  return s;
}

// ----------------------------------------------------------------------------------------------
// AdamW

// The xsimd kernel, without a mirror (M = NoMirror) or with the fused f16 or bf16 one. The
// threads share fixed blocks of kBlock elements (simd::parallel_blocks), so no element's update
// depends on the thread count.
template <typename M>
void adamw_simd(float* w, float* g, float* m, float* v, M* w16, size_t n, const Coeffs& c) {
  simd::parallel_blocks(
      n, kBlock, [&](size_t begin, size_t end) { adamw_range<M>(w, g, m, v, w16, begin, end, c); });
}

// The reference with a fused mirror of element type M (f16 or bf16): each element's update, then
// the mirror of its new weight.
template <typename M>
void adamw_mirror_reference(float* w, float* g, float* m, float* v, M* w16, size_t n,
                            const GradStats& stats, const AdamWHyper& hp, int t) {
  const Coeffs c = make_coeffs(stats, hp, t);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) mirror_element(w16 + i, adamw_element(w, g, m, v, i, c));
}

}  // namespace

// ----------------------------------------------------------------------------------------------

size_t norm_chunk_begin(size_t n, int c) {
  return n * size_t(c) / kNormChunks;
}

double add_norm_partials(const double* partial) {
  double total = 0.0;
  for (int c = 0; c < kNormChunks; ++c) total += partial[c];
  return total;
}

void norm_sq_partials(const float* window, size_t window_begin, size_t n, int first, int last,
                      double* partial) {
#pragma omp parallel for schedule(static)
  for (int c = first; c < last; ++c) {
    double s = 0.0;
    for (size_t i = norm_chunk_begin(n, c); i < norm_chunk_begin(n, c + 1); ++i) {
      const float g = window[i - window_begin];
      if (std::isfinite(g)) s += double(g) * double(g);
    }
    partial[c - first] = s;
  }
}

double reduce_norm_sq(const float* g, size_t n) {
  double partial[kNormChunks];
  norm_sq_partials(g, 0, n, 0, kNormChunks, partial);
  return add_norm_partials(partial);
}

// The same 64 chunks as the reference, each summed by chunk_norm_sq, the chunk sums in order.
// Every g² is exact in both, so they differ only in the order of the additions: each term goes
// through at most ⌈n/64⌉ + 80 double additions in either, and each result is within γ_k·Σg² of
// the exact sum (k = ⌈n/64⌉ + 80, γ_k = k·2^-53 / (1 - k·2^-53)); they agree to 2·γ_k·Σg².
void norm_sq_partials_fast(const float* window, size_t window_begin, size_t n, int first, int last,
                           double* partial) {
#pragma omp parallel for schedule(static)
  for (int c = first; c < last; ++c) {
    const size_t begin = norm_chunk_begin(n, c) - window_begin;
    partial[c - first] = chunk_norm_sq(window, begin, norm_chunk_begin(n, c + 1) - window_begin);
  }
}

double reduce_norm_sq_fast(const float* g, size_t n) {
  double partial[kNormChunks];
  norm_sq_partials_fast(g, 0, n, 0, kNormChunks, partial);
  return add_norm_partials(partial);
}

GradStats finalize_grad_stats(double norm_sq, float max_norm) {
  const float grad_norm = static_cast<float>(std::sqrt(norm_sq));
  const float clip = max_norm > 0.0f ? std::min(1.0f, max_norm / std::max(grad_norm, 1e-6f)) : 1.0f;
  return {grad_norm, clip};
}

void adamw_update(float* w, float* g, float* m, float* v, size_t n, const GradStats& stats,
                  const AdamWHyper& hp, int t) {
  const Coeffs c = make_coeffs(stats, hp, t);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) adamw_element(w, g, m, v, i, c);
}

void adamw_update_fast(float* w, float* g, float* m, float* v, size_t n, const GradStats& stats,
                       const AdamWHyper& hp, int t) {
  adamw_simd<NoMirror>(w, g, m, v, nullptr, n, make_coeffs(stats, hp, t));
}

void adamw_update_f16(float* w, float* g, float* m, float* v, f16* w16, size_t n,
                      const GradStats& stats, const AdamWHyper& hp, int t) {
  adamw_mirror_reference(w, g, m, v, w16, n, stats, hp, t);
}

void adamw_update_f16_fast(float* w, float* g, float* m, float* v, f16* w16, size_t n,
                           const GradStats& stats, const AdamWHyper& hp, int t) {
  adamw_simd(w, g, m, v, w16, n, make_coeffs(stats, hp, t));
}

void adamw_update_bf16(float* w, float* g, float* m, float* v, bf16* wb16, size_t n,
                       const GradStats& stats, const AdamWHyper& hp, int t) {
  adamw_mirror_reference(w, g, m, v, wb16, n, stats, hp, t);
}

void adamw_update_bf16_fast(float* w, float* g, float* m, float* v, bf16* wb16, size_t n,
                            const GradStats& stats, const AdamWHyper& hp, int t) {
  adamw_simd(w, g, m, v, wb16, n, make_coeffs(stats, hp, t));
}

void adamw_update_bf16_sr(float* w, float* g, float* m, float* v, bf16* wb16, size_t n,
                          const GradStats& stats, const AdamWHyper& hp, int t, uint32_t seed,
                          size_t first) {
  const Coeffs c = make_coeffs(stats, hp, t);
  const adamw_core::NoiseAt at{seed, uint32_t(t), first};
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) adamw_core::adamw_stochastic_element(w, g, m, v, wb16, i, c, at);
}

void adamw_update_bf16_sr_fast(float* w, float* g, float* m, float* v, bf16* wb16, size_t n,
                               const GradStats& stats, const AdamWHyper& hp, int t, uint32_t seed,
                               size_t first) {
  const Coeffs c = make_coeffs(stats, hp, t);
  const adamw_core::NoiseAt at{seed, uint32_t(t), first};
  simd::parallel_blocks(n, kBlock, [&](size_t begin, size_t end) {
    adamw_core::adamw_stochastic_range(w, g, m, v, wb16, begin, end, c, at);
  });
}

void adamw_update_bf16_kahan(float* w, float* g, float* m, float* v, bf16* wb16, bf16* comp,
                             size_t n, const GradStats& stats, const AdamWHyper& hp, int t) {
  const Coeffs c = make_coeffs(stats, hp, t);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) adamw_core::adamw_kahan_element(w, g, m, v, wb16, comp, i, c);
}

void adamw_update_bf16_kahan_fast(float* w, float* g, float* m, float* v, bf16* wb16, bf16* comp,
                                  size_t n, const GradStats& stats, const AdamWHyper& hp, int t) {
  const Coeffs c = make_coeffs(stats, hp, t);
  simd::parallel_blocks(n, kBlock, [&](size_t begin, size_t end) {
    adamw_core::adamw_kahan_range(w, g, m, v, wb16, comp, begin, end, c);
  });
}

#pragma GCC diagnostic pop

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> grad_norm_records() {
  using namespace record;
  const std::string page = "docs/kernels/12_optimizer.md", tests = "tests/optim/test_adamw.cpp";
  return {
      {"reduce_norm_sq",
       "result = Σ data² over finite data (reftrain sums in double, rounds once)",
       {in("data", "f32", "[n]"), out("result", "f32", "[1]"), scalar("n")},
       "12_optimizer.wgsl",
       "",
       "optim/adamw.h",
       "reduce_norm_sq, norm_sq_partials",
       "reduce_norm_sq_fast, norm_sq_partials_fast",
       "the fixed chunks on OpenMP threads, 16 lanes; within a bound",
       "",
       "optimizer.wgsl optimizer.wgsl:reduce_norm_sq_final",
       page,
       "reduce_norm_sq",
       tests,
       "bench/bench_optimizer.cpp BM_reduce_norm_sq, BM_reduce_norm_sq_fast"},
      {"finalize_grad_stats",
       "grad_norm = √norm_sq; clip = min(1, max_norm / max(grad_norm, 1e-6))",
       {in("norm_sq", "f32", "[1]"), out("grad_stats", "f32", "[2]"), scalar("max_norm", "f32")},
       "12_optimizer.wgsl",
       "",
       "optim/adamw.h",
       "finalize_grad_stats",
       "",
       "two scalars a step: the reference runs",
       "",
       "optimizer.wgsl",
       page,
       "finalize_grad_stats",
       tests,
       ""},
  };
}

namespace {

// The GPU study's bindings in order; the tensors keep the short names (w, g, m, v, ...), and
// `wgsl` names the study's variable: m_buf, v_buf, and a _mp suffix on every name of
// adamw_update_f16 (adamw_update_bf16, which the study lacks, takes a _bf suffix in our twin,
// optimizer_bf16.wgsl). t is what reftrain's kernels take; a GPU reads bias = (β1^t, β2^t, ε, 0).
std::vector<KernelBinding> adamw_bindings(const std::string& sfx) {
  using namespace record;
  std::vector<KernelBinding> b = {
      inout("w", "f32", "[size]"), inout("g", "f32", "[size]"),    inout("m", "f32", "[size]"),
      inout("v", "f32", "[size]"), in("grad_stats", "f32", "[2]"), scalar("size"),
      in("hp", "f32", "[4]"),      in("bias", "f32", "[4]"),       in("t", "i32", "[1]")};
  for (KernelBinding& x : b) {
    const std::string base = x.name == "m" ? "m_buf" : x.name == "v" ? "v_buf" : x.name;
    if (x.name != "t" && base + sfx != x.name) x.wgsl = base + sfx;
  }
  b.back().wgsl = "(not bound: the host turns t into bias)";
  return b;
}

}  // namespace

std::vector<KernelRecord> adamw_records() {
  const std::string page = "docs/kernels/12_optimizer.md";
  const std::string tests = "tests/optim/test_adamw.cpp, tests/model/test_torch_parity.cpp";
  KernelRecord a{"adamw_update",
                 "g' = isfinite(g) ? g·clip : 0; m = β1·m + (1−β1)·g'; v = β2·v + ((1−β2)·g')·g'; "
                 "m̂ = m·(1/max(1−β1^t, 1e-12)); v̂ = v·(1/max(1−β2^t, 1e-12)); "
                 "w −= lr·(m̂/(√v̂ + ε) + wd·w); g = 0",
                 adamw_bindings(""),
                 "12_optimizer.wgsl",
                 "",
                 "optim/adamw.h",
                 "adamw_update",
                 "adamw_update_fast",
                 "xsimd batches over OpenMP blocks; bit-identical",
                 "",
                 "optimizer.wgsl",
                 page,
                 "adamw_update",
                 tests,
                 "bench/bench_optimizer.cpp BM_adamw_update, BM_adamw_update_fast"};
  KernelRecord f = a;
  f.name = f.reference = "adamw_update_f16";
  f.fast = "adamw_update_f16_fast";
  f.math = "adamw_update, then w16 = f16(clamp(w, ±65504)) in the same pass";
  f.bindings = adamw_bindings("_mp");
  f.bindings.push_back(record::out("w16", "f16", "[size]"));
  f.bindings.back().wgsl = "dst_w16";
  f.fast_how = "as adamw_update_fast's, the ISA's f16 conversion for the mirror; bit-identical";
  f.bench = "bench/bench_optimizer.cpp BM_adamw_update_f16_fast, BM_adamw_update_fast_then_cast";
  f.wgsl = "optimizer_f16.wgsl";  // a module of its own: only it needs shader-f16
  KernelRecord b = a;
  b.name = b.reference = "adamw_update_bf16";
  b.fast = "adamw_update_bf16_fast";
  b.math = "adamw_update, then wb16 = bf16(w) in the same pass (cast_f32_to_bf16's rounding)";
  b.bindings = adamw_bindings("_bf");
  b.bindings.push_back(record::out("wb16", "bf16", "[size]"));
  b.bindings.back().wgsl = "dst_wb16";
  b.twin_file = "";  // the GPU study has no bf16 kernel: our twin alone
  b.fast_how =
      "as adamw_update_fast's, the fast bf16 cast's integer rounding for the mirror; "
      "bit-identical";
  b.bench = "bench/bench_optimizer.cpp BM_adamw_update_bf16_fast, BM_adamw_update_fast_then_bf16";
  b.wgsl = "optimizer_bf16.wgsl";  // a module of its own, after prelude/bf16.wgsl
  KernelRecord s = b;
  s.name = s.reference = "adamw_update_bf16_sr";
  s.fast = "adamw_update_bf16_sr_fast";
  s.math =
      "adamw_update, then wb16 = bf16 of the new w rounded stochastically, noise = "
      "mix(first + i ^ mix(t ^ mix(seed))) >> 16 (mix: lowbias32), and w = f32(wb16), in the "
      "same pass (--precision bf16-pure)";
  s.bindings = adamw_bindings("_sr");
  s.bindings.back().wgsl = "t_sr";  // the noise needs the step itself, not only bias
  s.bindings.push_back(record::out("wb16", "bf16", "[size]"));
  s.bindings.back().wgsl = "dst_wb16_sr";
  s.bindings.push_back(record::scalar("seed"));
  s.bindings.back().wgsl = "seed_sr";
  s.bindings.push_back(record::scalar("first"));
  s.bindings.back().wgsl = "first_sr";
  s.fast_how =
      "as adamw_update_bf16_fast's, the noise hash and the rounding in integer lanes; "
      "bit-identical";
  s.tests = "tests/optim/test_adamw_sr.cpp, tests/optim/test_adamw_bf16_oracle.cpp";
  s.bench = "bench/bench_optimizer.cpp BM_adamw_update_bf16_sr_fast";
  s.wgsl = "optimizer_bf16_sr.wgsl";
  KernelRecord k = b;
  k.name = k.reference = "adamw_update_bf16_kahan";
  k.fast = "adamw_update_bf16_kahan_fast";
  k.math =
      "δ = lr·(m̂/(√v̂ + ε) + wd·w) (adamw_update's); s = f32(comp) − δ; wb16 = bf16(w + s); "
      "comp = bf16(s − (f32(wb16) − w)); w = f32(wb16) (--precision bf16-kahan)";
  k.bindings = adamw_bindings("_kh");
  k.bindings.push_back(record::out("wb16", "bf16", "[size]"));
  k.bindings.back().wgsl = "dst_wb16_kh";
  k.bindings.push_back(record::inout("comp", "bf16", "[size]"));
  k.bindings.back().wgsl = "comp_kh";
  k.fast_how =
      "as adamw_update_bf16_fast's, the compensation widened and narrowed in integer lanes; "
      "bit-identical";
  k.tests = "tests/optim/test_adamw_kahan.cpp, tests/optim/test_adamw_bf16_oracle.cpp";
  k.bench = "bench/bench_optimizer.cpp BM_adamw_update_bf16_kahan_fast";
  k.wgsl = "optimizer_bf16_kahan.wgsl";
  return {a, f, b, s, k};
}

}  // namespace reftrain
