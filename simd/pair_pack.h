// The vector pieces of the bf16 pair packing (ops/matmul_bf16.cpp: pair_run, pair_across and the
// packers that call them), for AVX-512BW (every build that has the VDPBF16PS tile has it) and
// AVX2 (the x86-64-v3 build, whose emulated path reads the same packing). The
// packers' scalar loops define the layout and pack whatever these do not cover (partial blocks of
// K, partial groups of 16 rows or columns) and everything on the other ISAs; these pieces write
// the same words, 16 at a time, so the packed operands and the products keep their bits.
//
// The layout (simd/dot_bf16.h): per block of 32 k, 16 words; word r < 8 holds x[4r] (high half)
// and x[4r + 2] (low half), word 8 + r holds x[4r + 1] and x[4r + 3].
#pragma once

#include <cstddef>
#include <cstdint>

#include "simd/bf16.h"

#if defined(__AVX512BW__) || defined(__AVX2__)
#include <immintrin.h>

#include "simd/microkernel.h"
#endif

namespace reftrain::simd::bf16dot {

#if defined(__AVX512BW__)
// (GCC 12 warns falsely about the undefined pass-through operand of the unmasked AVX-512 unpacks
// as (maybe-)uninitialized: every lane is written.)
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

constexpr int kPackCols = 16;  // columns of a B panel one pair_runs call packs

// The 16 words of one block of 32 consecutive bf16 x[0..32), as one vector (word w in lane w):
// a permutation of the block's 16-bit halves, lane 2w taking word w's low half, 2w + 1 its high.
inline __m512i pair_words(const bf16* x) {
  alignas(64) static const uint16_t kHalves[32] = {2,  0,  6,  4,  10, 8,  14, 12, 18, 16, 22,
                                                   20, 26, 24, 30, 28, 3,  1,  7,  5,  11, 9,
                                                   15, 13, 19, 17, 23, 21, 27, 25, 31, 29};
  const __m512i idx = _mm512_load_si512(kHalves);
  return _mm512_permutexvar_epi16(idx, _mm512_loadu_si512(x));
}

// One word for each of 16 consecutive indices x (lane x): hi[x] in the high half, lo[x] in the
// low (two rows of a chain, k and k + 2, read across).
inline __m512i across_words(const bf16* hi, const bf16* lo) {
  const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi)));
  const __m512i l = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo)));
  return _mm512_or_si512(_mm512_slli_epi32(h, 16), l);
}

// r[i] lane j becomes r[j] lane i (a 16×16 transpose of 32-bit words): pairs of rows interleaved,
// then quads (each 128-bit lane then holds a transposed 4×4), then the 128-bit lanes gathered.
inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // u[i + c], 128-bit lane L: rows i..i+3 at column 4L + c
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i p01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);  // lanes 0, 1 of each
    const __m512i q01 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i p23 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);  // lanes 2, 3 of each
    const __m512i q23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_i32x4(p01, q01, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(p01, q01, 0xDD);
    r[8 + c] = _mm512_shuffle_i32x4(p23, q23, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(p23, q23, 0xDD);
  }
}

// Blocks [0, blocks) of a run of consecutive bf16 x (all full blocks of 32) into w, 16
// contiguous words per block (a row of a packed A). Returns the blocks packed.
inline int pair_run_blocks(uint32_t* w, const bf16* x, int blocks) {
  for (int blk = 0; blk < blocks; ++blk) {
    _mm512_storeu_si512(w + size_t(blk) * 16, pair_words(x + size_t(blk) * 32));
  }
  return blocks;
}

// Full blocks [0, blocks) of 16 runs (columns of a B panel: column c at x + c·ld), word r of
// block blk of column c at panel[(blk·16 + r)·NR + c]: per block, each column's words, then a
// transpose so that each word row is one store. Returns the blocks packed.
inline int pair_runs(uint32_t* panel, size_t NR, const bf16* x, size_t ld, int blocks) {
  for (int blk = 0; blk < blocks; ++blk) {
    __m512i v[16];
    for (int c = 0; c < 16; ++c) v[c] = pair_words(x + size_t(c) * ld + size_t(blk) * 32);
    transpose16(v);
    uint32_t* rows = panel + size_t(blk) * 16 * NR;
    for (int r = 0; r < 16; ++r) _mm512_storeu_si512(rows + size_t(r) * NR, v[r]);
  }
  return blocks;
}

// Words for indices x < n (16 at a time: lanes across) of one chain pair: hi[x] high, lo[x] low,
// into w[x]. Returns the count written (a multiple of 16).
inline int across_run(uint32_t* w, const bf16* hi, const bf16* lo, int n) {
  int x = 0;
  for (; x + 16 <= n; x += 16) _mm512_storeu_si512(w + x, across_words(hi + x, lo + x));
  return x;
}

// One full block of 16 rows of an A read across (row x's element k at src[k·ld + x]): the 16
// words of row x into rows[x·stride .. + 16). True: packed.
inline bool across_block16(uint32_t* rows, size_t stride, const bf16* src, size_t ld, int k0) {
  __m512i v[16];
  for (int r = 0; r < 16; ++r) {
    const int k = k0 + (r < 8 ? 4 * r : 4 * (r - 8) + 1);
    v[r] = across_words(src + size_t(k) * ld, src + size_t(k + 2) * ld);
  }
  transpose16(v);
  for (int x = 0; x < 16; ++x) _mm512_storeu_si512(rows + size_t(x) * stride, v[x]);
  return true;
}

// ---- AMX's layouts (simd/dot_bf16.h, amx_block) ----------------------------------------------
// The AMX packers of ops/matmul_bf16.cpp (pack_amx_rows, pack_amx_panel) define these layouts
// and pack what these leave (partial groups of 16 rows or columns, the last odd k or partial
// block); each returns how many k it packed.

// 16 rows of an A read across (row x's element k at src[k·ld + x]) into AMX's row-major A (row
// x at rows[x·stride]), whole blocks of 32 k: a word pairs k = 2w (low half) with 2w + 1, so a
// block is 16 words per row, transposed from 16 words per k pair.
inline int amx_rows_across(bf16* rows, size_t stride, const bf16* src, size_t ld, int K) {
  int k0 = 0;
  for (; k0 + 32 <= K; k0 += 32) {
    __m512i v[16];
    for (int w = 0; w < 16; ++w) {
      v[w] = across_words(src + size_t(k0 + 2 * w + 1) * ld, src + size_t(k0 + 2 * w) * ld);
    }
    transpose16(v);
    for (int x = 0; x < 16; ++x) _mm512_storeu_si512(rows + size_t(x) * stride + k0, v[x]);
  }
  return k0;
}

// A 16-column AMX B panel (pair row r of 16 words at panel[r·32]) from 16 columns contiguous
// along k (column c at x + c·ld), whole blocks of 32 k: a column's own 32-bit words are its
// pairs, so each block is a 16×16 transpose of words.
inline int amx_panel_from_columns(bf16* panel, const bf16* x, size_t ld, int K) {
  int k0 = 0;
  for (; k0 + 32 <= K; k0 += 32) {
    __m512i v[16];
    for (int c = 0; c < 16; ++c) v[c] = _mm512_loadu_si512(x + size_t(c) * ld + k0);
    transpose16(v);
    for (int r = 0; r < 16; ++r) _mm512_storeu_si512(panel + size_t(k0 / 2 + r) * 32, v[r]);
  }
  return k0;
}

// The same panel from rows contiguous along its 16 columns (row k at x + k·ld): pair row r
// interleaves rows 2r (low halves) and 2r + 1, one store per pair; every whole pair of k.
inline int amx_panel_from_rows(bf16* panel, const bf16* x, size_t ld, int K) {
  int k0 = 0;
  for (; k0 + 2 <= K; k0 += 2) {
    _mm512_storeu_si512(panel + size_t(k0 / 2) * 32,
                        across_words(x + size_t(k0 + 1) * ld, x + size_t(k0) * ld));
  }
  return k0;
}
#pragma GCC diagnostic pop
#elif defined(__AVX2__)
// AVX2 (the x86-64-v3 build): 8 words at a time. A block's 16 words come from two in-lane byte
// shuffles (each 8-byte group x[4r..4r+4) becomes its even word and its odd word), a dword
// permute per half and a swap of halves; where words land in 8 rows or columns, the 8×8
// transposes of simd/microkernel_x86.h.
constexpr int kPackCols = 8;

// The even words (0..7) and the odd words (8..15) of one block of 32 consecutive bf16.
inline void pair_words(const bf16* x, __m256i& even, __m256i& odd) {
  const __m256i shuf = _mm256_setr_epi8(4, 5, 0, 1, 6, 7, 2, 3, 12, 13, 8, 9, 14, 15, 10, 11, 4, 5,
                                        0, 1, 6, 7, 2, 3, 12, 13, 8, 9, 14, 15, 10, 11);
  const __m256i perm = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i* p = reinterpret_cast<const __m256i*>(x);
  // [e0 e1 e2 e3 | o0 o1 o2 o3] and [e4 .. e7 | o4 .. o7]
  const __m256i y0 =
      _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(_mm256_loadu_si256(p), shuf), perm);
  const __m256i y1 =
      _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(_mm256_loadu_si256(p + 1), shuf), perm);
  even = _mm256_permute2x128_si256(y0, y1, 0x20);
  odd = _mm256_permute2x128_si256(y0, y1, 0x31);
}

inline __m256i across_words(const bf16* hi, const bf16* lo) {
  const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)));
  const __m256i l = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo)));
  return _mm256_or_si256(_mm256_slli_epi32(h, 16), l);
}

// r[k] = column k of the 8×8 matrix of 32-bit words whose rows are r[0..7].
inline void transpose8(__m256i r[8]) {
  __m256 f[8];
  for (int k = 0; k < 8; ++k) f[k] = _mm256_castsi256_ps(r[k]);
  microkernel::transpose8(f);
  for (int k = 0; k < 8; ++k) r[k] = _mm256_castps_si256(f[k]);
}

inline void store8(uint32_t* w, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w), v);
}

inline int pair_run_blocks(uint32_t* w, const bf16* x, int blocks) {
  for (int blk = 0; blk < blocks; ++blk) {
    __m256i even, odd;
    pair_words(x + size_t(blk) * 32, even, odd);
    store8(w + size_t(blk) * 16, even);
    store8(w + size_t(blk) * 16 + 8, odd);
  }
  return blocks;
}

// As the AVX-512 version, for kPackCols = 8 columns.
inline int pair_runs(uint32_t* panel, size_t NR, const bf16* x, size_t ld, int blocks) {
  for (int blk = 0; blk < blocks; ++blk) {
    __m256i even[8], odd[8];
    for (int c = 0; c < 8; ++c) pair_words(x + size_t(c) * ld + size_t(blk) * 32, even[c], odd[c]);
    transpose8(even);
    transpose8(odd);
    uint32_t* rows = panel + size_t(blk) * 16 * NR;
    for (int r = 0; r < 8; ++r) store8(rows + size_t(r) * NR, even[r]);
    for (int r = 0; r < 8; ++r) store8(rows + size_t(r + 8) * NR, odd[r]);
  }
  return blocks;
}

inline int across_run(uint32_t* w, const bf16* hi, const bf16* lo, int n) {
  int x = 0;
  for (; x + 8 <= n; x += 8) store8(w + x, across_words(hi + x, lo + x));
  return x;
}

// As the AVX-512 version (16 rows), as two halves of 8 rows.
inline bool across_block16(uint32_t* rows, size_t stride, const bf16* src, size_t ld, int k0) {
  for (int x0 = 0; x0 < 16; x0 += 8) {
    __m256i v[16];
    for (int r = 0; r < 16; ++r) {
      const int k = k0 + (r < 8 ? 4 * r : 4 * (r - 8) + 1);
      v[r] = across_words(src + size_t(k) * ld + x0, src + size_t(k + 2) * ld + x0);
    }
    transpose8(v);      // v[x]: words 0..7 of row x0 + x
    transpose8(v + 8);  // v[8 + x]: words 8..15
    for (int x = 0; x < 8; ++x) {
      store8(rows + size_t(x0 + x) * stride, v[x]);
      store8(rows + size_t(x0 + x) * stride + 8, v[8 + x]);
    }
  }
  return true;
}
#else
// Elsewhere the packers' scalar loops pack everything.
constexpr int kPackCols = 16;
inline int pair_run_blocks(uint32_t*, const bf16*, int) {
  return 0;
}
inline int pair_runs(uint32_t*, size_t, const bf16*, size_t, int) {
  return 0;
}
inline int across_run(uint32_t*, const bf16*, const bf16*, int) {
  return 0;
}
inline bool across_block16(uint32_t*, size_t, const bf16*, size_t, int) {
  return false;
}
#endif

#if !defined(__AVX512BW__)
// AMX exists only beside AVX-512: its packers' scalar loops are the whole packing elsewhere.
inline int amx_rows_across(bf16*, size_t, const bf16*, size_t, int) {
  return 0;
}
inline int amx_panel_from_columns(bf16*, const bf16*, size_t, int) {
  return 0;
}
inline int amx_panel_from_rows(bf16*, const bf16*, size_t, int) {
  return 0;
}
#endif

}  // namespace reftrain::simd::bf16dot
