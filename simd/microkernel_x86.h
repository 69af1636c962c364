// The x86-64 pieces of the matrix products (included by simd/microkernel.h alone): AVX2 and
// AVX-512 builds alike, since every x86 build has AVX2, FMA and F16C (x86-64-v3 or newer). The
// transposes and the gemv kernel work on 8 floats (ymm registers) in both.
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "simd/f16.h"
#include "simd/simd.h"

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "reftrain's x86 builds need x86-64-v3 or newer (AVX2, FMA, F16C)"
#endif

namespace reftrain::simd::microkernel {

// Pins a loaded vector in a register. Without it GCC folds each B load into all MR of the FMAs
// that use it (vfmadd231ps mem, ...): MR·NV loads per step instead of NV, and the load ports, not
// the FMA unit, become the limit (measured on the matmul: 82 % of the FMA peak instead of 9x %).
template <typename T>
inline void in_register(Batch<T>& b) {
  typename Batch<T>::register_type r = b;
  __asm__("" : "+v"(r));  // "v": any xmm/ymm/zmm register
  b = r;
}

// ap[p·MR + ii] = src[ii][p] for p below the returned count: 4×4 blocks of floats through
// registers when MR = 4 (the AVX-512 float tile); none otherwise. The caller packs the rest.
template <typename T, int MR>
int interleave_in_registers(T* ap, const T* const* src, int kc) {
  int p = 0;
  if constexpr (std::is_same_v<T, float> && MR == 4) {
    for (; p + 4 <= kc; p += 4) {
      __m128 r0 = _mm_loadu_ps(src[0] + p), r1 = _mm_loadu_ps(src[1] + p);
      __m128 r2 = _mm_loadu_ps(src[2] + p), r3 = _mm_loadu_ps(src[3] + p);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      _mm_store_ps(ap + p * 4, r0), _mm_store_ps(ap + p * 4 + 4, r1);
      _mm_store_ps(ap + p * 4 + 8, r2), _mm_store_ps(ap + p * 4 + 12, r3);
    }
  }
  return p;
}

static_assert(kF16Lanes == 8, "F16C converts 8 lanes: the transposes below are 8×8");

// 8 consecutive elements as floats (f16 widened exactly).
inline __m256 load8(const float* p) {
  return load_f32_lanes(p);
}
inline __m256 load8(const f16* p) {
  return widen_f16_lanes(p);
}

// r[k] = column k of the 8×8 matrix whose rows are r[0..7].
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
    r[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
  }
}

// panel[p·NR + jj] = rows[jj·ldb + p] (widened to T) for p < kc, jj < w, in whole 8×8 blocks of
// floats through registers (8 row loads, a transpose, 8 row stores); none for doubles. The caller
// packs the rest element by element.
template <int NR, typename T, typename BT>
Transposed transpose_in_registers(T* panel, const BT* rows, size_t ldb, int kc, int w) {
  if constexpr (!std::is_same_v<T, float>) {
    return {0, 0};
  } else {
    const int p8 = kc / 8 * 8, j8 = w / 8 * 8;
    for (int p = 0; p < p8; p += 8) {
      for (int jj = 0; jj < j8; jj += 8) {
        __m256 r[8];
        for (int k = 0; k < 8; ++k) r[k] = load8(rows + size_t(jj + k) * ldb + p);
        transpose8(r);
        for (int k = 0; k < 8; ++k) _mm256_store_ps(panel + (p + k) * NR + jj, r[k]);
      }
    }
    return {p8, j8};
  }
}

// One row against a transposed B: c[j] = (accumulate ? c[j] : 0) + Σ_p a[p]·B(p, j) (+ bias[j]),
// B(p, j) = b[j·ldb + p] (the linear forward of one token, each decoding step of text
// generation). The loop nest would pack all of B to use each element once, which costs as much
// as the product; here each thread reads its rows of the weight directly: 8 rows × 8 p through
// registers (transpose_in_registers' 8×8 transpose), then 8 FMA steps into one vector whose lane jj
// is output j + jj, 4 such vectors at once to hide the FMA latency (the FMAs still run in
// ascending p: the 16 p of a step go through the two transposes in order). Each output is still one
// FMA chain over p in ascending order, the bias added after it: the blocked product's bits.
constexpr int kGemvRows = 32;  // outputs per unit of work: 4 vectors of 8

// Outputs j0..j0+8·G-1. Per step, 16 p of each row (a whole cache line of f32 weights) as two
// 8×8 transposes, with the next step's lines prefetched: 8·G row streams at once.
template <int G, typename BT>
void gemv_block(const GemvRows<BT>& g, int j0) {
  __m256 acc[G];
#pragma GCC unroll 4
  for (int q = 0; q < G; ++q) {
    acc[q] = g.accumulate ? _mm256_loadu_ps(g.c + j0 + 8 * q) : _mm256_setzero_ps();
  }
  const BT* rows = g.b + size_t(j0) * g.ldb;
  int p = 0;
  for (; p + 16 <= g.K; p += 16) {
    __m256 a[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) a[k] = _mm256_set1_ps(g.a[p + k]);
#pragma GCC unroll 4
    for (int q = 0; q < G; ++q) {
#pragma GCC unroll 2
      for (int half = 0; half < 16; half += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const BT* row = rows + size_t(8 * q + k) * g.ldb + p;
          if (half == 0) _mm_prefetch(reinterpret_cast<const char*>(row + 64), _MM_HINT_T0);
          r[k] = load8(row + half);
        }
        transpose8(r);  // r[k]: B(p + half + k, j0 + 8q ..)
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) acc[q] = _mm256_fmadd_ps(a[half + k], r[k], acc[q]);
      }
    }
  }
  for (; p < g.K; ++p) {
#pragma GCC unroll 4
    for (int q = 0; q < G; ++q) {
      alignas(32) float col[8];
      for (int k = 0; k < 8; ++k) col[k] = static_cast<float>(rows[size_t(8 * q + k) * g.ldb + p]);
      acc[q] = _mm256_fmadd_ps(_mm256_set1_ps(g.a[p]), _mm256_load_ps(col), acc[q]);
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < G; ++q) {
    const __m256 r = g.bias ? _mm256_add_ps(acc[q], _mm256_loadu_ps(g.bias + j0 + 8 * q)) : acc[q];
    _mm256_storeu_ps(g.c + j0 + 8 * q, r);
  }
}

// Outputs j0..j1-1 (fewer than kGemvRows): whole vectors of 8, then one output at a time.
template <typename BT>
void gemv_tail(const GemvRows<BT>& g, int j0, int j1) {
  for (; j0 + 8 <= j1; j0 += 8) gemv_block<1>(g, j0);
  for (; j0 < j1; ++j0) {
    float acc = g.accumulate ? g.c[j0] : 0.0f;
    const BT* row = g.b + size_t(j0) * g.ldb;
    for (int p = 0; p < g.K; ++p) acc = std::fma(g.a[p], static_cast<float>(row[p]), acc);
    g.c[j0] = g.bias ? acc + g.bias[j0] : acc;
  }
}

// Runs the product (every output j < g.N) on up to `threads` threads; true: x86 has the kernel.
template <typename BT>
bool gemv_transposed(const GemvRows<BT>& g, int threads) {
  const int units = (g.N + kGemvRows - 1) / kGemvRows;
  threads = std::max(1, std::min({threads, omp_get_max_threads(), units}));
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int u = 0; u < units; ++u) {
    const int j0 = u * kGemvRows;
    if (j0 + kGemvRows <= g.N) {
      gemv_block<kGemvRows / 8>(g, j0);
    } else {
      gemv_tail(g, j0, g.N);
    }
  }
  return true;
}

}  // namespace reftrain::simd::microkernel
