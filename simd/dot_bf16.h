// The register and tile kernels of the canonical bf16 product (ops/matmul_bf16.h states the
// order; here is only how each ISA runs it). Three ways, one set of bits:
//
//   emulated  plain f32 FMAs under FlushDenormals (simd/bf16.h): AVX2, AVX-512F, NEON (xsimd);
//   dpbf16    AVX512_BF16's VDPBF16PS: per 32-bit lane, acc += a.hi·b.hi, then acc += a.lo·b.lo,
//             each an FMA with denormals read as zero and flushed after rounding (the mode is
//             built in); compiled where the build has __AVX512BF16__ (not by clang 16);
//   amx       AMX's TDPBF16PS on 16×16 f32 tiles, compiled where the build has __AMX_BF16__ and
//             run where Linux grants the tile state (amx_available()).
//
// The canonical order per output, K in blocks of 32: E = chain of FMAs over the block's even k
// ascending from +0, O likewise over the odd k, then C = C + (E + O). TDPBF16PS does exactly that
// over one 32-wide block of a row (its A tile row is 64 bytes). The other two read "pair-packed"
// operands: each 32-bit word holds two same-parity elements of one chain, the earlier k in the
// high half (VDPBF16PS multiplies the high half first), so one word is two consecutive steps of a
// chain. Per block of 32, 16 words: words 0..7 the even chain (k, k+2) for k = 0, 4, .., 28, words
// 8..15 the odd chain (k+1, k+3). The emulation widens the packed words to f32 once (each word
// split into its two values, the high half masked and the low half shifted up: exact) and runs a
// plain f32 register tile over them, the two FMAs of a word in that order.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "simd/bf16.h"
#include "simd/microkernel.h"
#include "simd/simd.h"

#if defined(__AMX_BF16__) && defined(__AMX_TILE__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace reftrain::simd::bf16dot {

constexpr int kBlock = 32;          // K per block: one AMX tile row of bf16
constexpr int kWordsPerBlock = 16;  // pair-packed words per block and row (8 even, 8 odd)

// The register tiles: MR rows × NV vectors of W lanes (NR = NV·W columns, the pair packing's
// panel width, shared by both tiles). dpbf16 (AVX-512, 4×2): 16 chains of E and O, the 8
// accumulators of C, 2 B vectors and the broadcast. The emulated tile runs the E chains, keeps them
// in memory while the O chains run, then adds, so it holds one set of chains: where there are 32
// vector registers (AVX-512, NEON) 8×2, 16 chains, so that the 2 loads and 8 broadcasts of a step
// feed 16 FMAs (4×2 fed 8 from 6 and left a core with two FMA pipes waiting on the latency of its 8
// chains and on B from L2: 0.8× fp32 on a Xeon core, bench/RESULTS.md); on AVX2 (16 ymm) 4×3, 12
// chains, 3 B vectors and the broadcast, so that the 3 loads and 4 broadcasts of a step feed 12
// FMAs (4×2 fed 8 from 6: load-bound).
constexpr int kPairMR = 4;
#if defined(__x86_64__) && !defined(__AVX512F__)
constexpr int kEmulatedMR = 4;
constexpr int kPairNV = 3;
#else
constexpr int kEmulatedMR = 8;
constexpr int kPairNV = 2;
#endif
constexpr int kPairNR = kPairNV * int(Batch<float>::size);

// A word's two values as f32 (each bf16 widened: exact).
inline float high_of(uint32_t w) {
  const uint32_t u = w & 0xFFFF0000u;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
inline float low_of(uint32_t w) {
  const uint32_t u = w << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// (GCC 12's false (maybe-)uninitialized warning on the AVX-512 shifts: see simd/bf16.h.)
#pragma GCC diagnostic push
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
// The emulated path reads the pair-packed operands widened to f32 once, after packing ("chain
// order": each word's high half, then its low half), so that its tile is a plain f32 register
// tile: per block of 32 k, steps 0..15 are the even chain (k = 0, 2, .., 30) and steps 16..31
// the odd chain (k = 1, 3, .., 31). Splitting the words inside the tile instead cost more
// integer work than FMAs (AVX2: bf16 at 0.4× fp32).
constexpr int kChainSteps = kBlock;  // f32 values per block and row of A (or row of B panel)

// MR rows of words (row i at src + i·rs, n words each) widened into a micro-panel in chain order:
// step 2w of row i (the high half of word w) at dst[2w·MR + i], step 2w + 1 (its low half) at
// dst[(2w + 1)·MR + i]. The tile then reads one step of its MR rows from one place, so the A
// operand is a single stream, as the fp32 kernel's packed A is.
template <int MR>
inline void widen_word_panel(float* dst, const uint32_t* src, size_t rs, size_t n) {
  constexpr size_t W = U32::size;
  const U32 hi_mask(0xFFFF0000u);
  size_t w = 0;
  for (; w + W <= n; w += W) {
    alignas(64) float hi[MR][W], lo[MR][W];
    for (int i = 0; i < MR; ++i) {
      const U32 x = U32::load_unaligned(src + i * rs + w);
      xsimd::bitwise_cast<Batch<float>>(x & hi_mask).store_aligned(hi[i]);
      xsimd::bitwise_cast<Batch<float>>(x << 16).store_aligned(lo[i]);
    }
    float* out = dst + 2 * w * MR;
    for (size_t l = 0; l < W; ++l) {
      for (int i = 0; i < MR; ++i)
        out[2 * l * MR + i] = hi[i][l], out[(2 * l + 1) * MR + i] = lo[i][l];
    }
  }
  for (; w < n; ++w) {
    for (int i = 0; i < MR; ++i) {
      dst[2 * w * MR + i] = high_of(src[i * rs + w]);
      dst[(2 * w + 1) * MR + i] = low_of(src[i * rs + w]);
    }
  }
}

// rows 2r and 2r + 1 of dst (nr floats each) = the high and the low halves of row r of src (nr
// words), for r < rows: a B panel in chain order.
inline void widen_word_rows(float* dst, const uint32_t* src, size_t rows, size_t nr) {
  const U32 hi_mask(0xFFFF0000u);
  for (size_t r = 0; r < rows; ++r) {
    const uint32_t* in = src + r * nr;
    float *hi = dst + 2 * r * nr, *lo = hi + nr;
    size_t j = 0;
    for (; j + U32::size <= nr; j += U32::size) {
      const U32 x = U32::load_unaligned(in + j);
      xsimd::bitwise_cast<Batch<float>>(x & hi_mask).store_unaligned(hi + j);
      xsimd::bitwise_cast<Batch<float>>(x << 16).store_unaligned(lo + j);
    }
    for (; j < nr; ++j) hi[j] = high_of(in[j]), lo[j] = low_of(in[j]);
  }
}

// c (an MR×NR tile, row stride ldc) = the canonical product over `blocks` blocks, added to its
// init: init's NR values (the same for every row) where init is given, else c itself, read
// through the first add, whose DAZ reads a subnormal C as its signed zero, as the flushed init
// the order asks for. a: the MR rows' micro-panel in chain order (widen_word_panel), from the
// first block; b: the panel in chain order, per block 32 rows of NR floats. Per block the even
// chain's 16 steps, then the odd chain's, each from +0, then c = c + (E + O). Must run under
// FlushDenormals (inputs read as zero, results flushed).
template <int MR, int NV>
inline void chain_tile_emulated(float* c, size_t ldc, const float* a, const float* b, int blocks,
                                const float* init) {
  using V = Batch<float>;
  constexpr int W = int(V::size), NR = NV * W, H = kChainSteps / 2;
  for (int blk = 0; blk < blocks; ++blk) {
    const float* ab = a + size_t(blk) * kChainSteps * MR;
    const float* bb = b + size_t(blk) * kChainSteps * NR;
    alignas(64) float even[MR][NR];  // E, while the O chains run (registers hold one set)
    V acc[MR][NV];
    for (int half = 0; half < 2; ++half) {
      for (int i = 0; i < MR; ++i) {
        for (int v = 0; v < NV; ++v) acc[i][v] = V(0.0f);
      }
      for (int s = half * H; s < half * H + H; ++s) {
        V bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {
          bv[v] = V::load_aligned(bb + s * NR + v * W);
          microkernel::in_register(bv[v]);
        }
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
          const V av(ab[s * MR + i]);
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) acc[i][v] = simd::fma(av, bv[v], acc[i][v]);
        }
      }
      if (half == 0) {
        for (int i = 0; i < MR; ++i) {
          for (int v = 0; v < NV; ++v) acc[i][v].store_aligned(&even[i][v * W]);
        }
      }
    }
    const bool from_init = blk == 0 && init;
    for (int i = 0; i < MR; ++i) {
      for (int v = 0; v < NV; ++v) {
        const V cv = V::load_unaligned(from_init ? init + v * W : c + i * ldc + v * W);
        const V e = V::load_aligned(&even[i][v * W]);
        (cv + (e + acc[i][v])).store_unaligned(c + i * ldc + v * W);
      }
    }
  }
}

// One row of C over one pair-packed panel (per block 16 rows of NR = NV·W words): the path of
// emulated products with a few rows (MatmulBf16, decoding's one-token products), which widens each
// packed word in registers as it reads it, since a row of A uses each word once. x: the row of A in
// chain order (kChainSteps floats per block, zeros past K); c: the row's NR outputs, holding
// their flushed inits. Per block the even chain (words 0..7) and the odd chain (words 8..15),
// each from +0 and in its own order, interleaved, then c = c + (E + O). Must run under
// FlushDenormals.
template <int NV>
inline void chain_row_words(float* c, const float* x, const uint32_t* panel, int blocks) {
  using V = Batch<float>;
  constexpr int W = int(V::size), NR = NV * W;
  const U32 hi_mask(0xFFFF0000u);
  V acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = V::load_unaligned(c + v * W);
  for (int blk = 0; blk < blocks; ++blk) {
    const uint32_t* wb = panel + size_t(blk) * kWordsPerBlock * NR;
    const float* xb = x + size_t(blk) * kChainSteps;
    V e[NV], o[NV];
    for (int v = 0; v < NV; ++v) e[v] = o[v] = V(0.0f);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      const V xe_hi(xb[2 * r]), xe_lo(xb[2 * r + 1]), xo_hi(xb[16 + 2 * r]), xo_lo(xb[17 + 2 * r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const U32 we = U32::load_unaligned(wb + r * NR + v * W);
        const U32 wo = U32::load_unaligned(wb + (r + 8) * NR + v * W);
        e[v] = simd::fma(xe_hi, xsimd::bitwise_cast<V>(we & hi_mask), e[v]);
        o[v] = simd::fma(xo_hi, xsimd::bitwise_cast<V>(wo & hi_mask), o[v]);
        e[v] = simd::fma(xe_lo, xsimd::bitwise_cast<V>(we << 16), e[v]);
        o[v] = simd::fma(xo_lo, xsimd::bitwise_cast<V>(wo << 16), o[v]);
      }
    }
    for (int v = 0; v < NV; ++v) acc[v] = acc[v] + (e[v] + o[v]);
  }
  for (int v = 0; v < NV; ++v) acc[v].store_unaligned(c + v * W);
}

#pragma GCC diagnostic pop

// clang 16 crashes (a segfault in its optimizer, at -O1 and above) compiling this tile; the
// sanitizer and fuzzer builds use clang, and run the emulated path instead (the same bits).
#if defined(__AVX512BF16__) && !(defined(__clang__) && __clang_major__ < 17)
constexpr bool kHaveDpbf16 = true;
static_assert(kPairNR == 32, "the dpbf16 tile reads the AVX-512 pair packing");

// The same tile through VDPBF16PS: one instruction per word and chain. C (from init, or from c
// through the adds' DAZ, as the emulated tile reads it) stays in registers across the blocks (8
// of them, beside the 16 chains). The adds into C still need FlushDenormals
// (plain vaddps). A is the second operand: the products are the same either way round, and the
// compiler can fold its broadcast into the instruction.
inline void pair_tile_dpbf16(float* c, size_t ldc, const uint32_t* a, size_t as, const uint32_t* b,
                             int blocks, const float* init) {
  constexpr int MR = 4, NV = 2, NR = 32;
  __m512 acc[MR][NV];
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < NV; ++v)
      acc[i][v] = _mm512_loadu_ps(init ? init + v * 16 : c + i * ldc + v * 16);
  }
  for (int blk = 0; blk < blocks; ++blk) {
    const uint32_t* ab = a + size_t(blk) * kWordsPerBlock;
    const uint32_t* bb = b + size_t(blk) * kWordsPerBlock * NR;
    __m512 e[MR][NV], o[MR][NV];
    for (int i = 0; i < MR; ++i) {
      for (int v = 0; v < NV; ++v) e[i][v] = o[i][v] = _mm512_setzero_ps();
    }
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      __m512bh we[NV], wo[NV];
      for (int v = 0; v < NV; ++v) {
        we[v] = (__m512bh)_mm512_load_si512(bb + r * NR + v * 16);
        wo[v] = (__m512bh)_mm512_load_si512(bb + (r + 8) * NR + v * 16);
      }
      for (int i = 0; i < MR; ++i) {
        const __m512bh ae = (__m512bh)_mm512_set1_epi32(int(ab[i * as + r]));
        const __m512bh ao = (__m512bh)_mm512_set1_epi32(int(ab[i * as + r + 8]));
        for (int v = 0; v < NV; ++v) {
          e[i][v] = _mm512_dpbf16_ps(e[i][v], we[v], ae);
          o[i][v] = _mm512_dpbf16_ps(o[i][v], wo[v], ao);
        }
      }
    }
    for (int i = 0; i < MR; ++i) {
      for (int v = 0; v < NV; ++v)
        acc[i][v] = _mm512_add_ps(acc[i][v], _mm512_add_ps(e[i][v], o[i][v]));
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + i * ldc + v * 16, acc[i][v]);
  }
}

// Seconds for `rounds` rounds of 12 independent chains of VDPBF16PS (dpbf16) or of 512-bit FMAs:
// 12 in flight covers latency × pipes for either on every core we know. The values stay normal
// and finite; their sum goes to an empty asm, so no chain can be dropped.
template <bool kDpbf16>
double chain_seconds(int rounds) {
  constexpr int kChains = 12;
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(float(c));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  const __m512bh one = (__m512bh)_mm512_set1_epi32(0x3F803F80),
                 tiny = (__m512bh)_mm512_set1_epi32(0x33D633D6);
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c)
      acc[c] = kDpbf16 ? _mm512_dpbf16_ps(acc[c], one, tiny) : _mm512_fmadd_ps(acc[c], x, y);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  asm volatile("" : : "v"(sum));
  return s;
}

// Products per second of one core: VDPBF16PS's (32 bf16 pairs an instruction) and 512-bit FMAs'
// (16 floats), each the best of three alternating runs of `rounds` rounds of chain_seconds.
struct ProductRates {
  double dpbf16, fma;
};
inline ProductRates product_rates(int rounds) {
  double dp = 1e30, fma = 1e30;
  for (int i = 0; i < 3; ++i) {
    dp = std::min(dp, chain_seconds<true>(rounds));
    fma = std::min(fma, chain_seconds<false>(rounds));
  }
  const double instructions = 12.0 * rounds;
  return {32 * instructions / dp, 16 * instructions / fma};
}

// Whether VDPBF16PS multiplies more bf16 pairs per second than 512-bit FMAs multiply floats, which
// is what the emulated tile runs on. One instruction is 32 products against an FMA's 16, and on
// AMD's Zen 4 both issue once a cycle: the dpbf16 tile is the faster. On Intel's Sapphire and
// Emerald Rapids cores it issues every other cycle against two FMAs a cycle, half the products,
// and the emulated tile is the faster (bench/RESULTS.md); those cores have AMX, but a hypervisor
// may hide it. Measured once (about a millisecond): the two rates differ by 2× either way, far
// beyond a busy machine's noise. Which path runs moves no bit.
inline bool dpbf16_outruns_fma() {
  static const bool faster = [] {
    const ProductRates r = product_rates(20000);
    return r.dpbf16 > r.fma;
  }();
  return faster;
}
#else
constexpr bool kHaveDpbf16 = false;
inline void pair_tile_dpbf16(float*, size_t, const uint32_t*, size_t, const uint32_t*, int,
                             const float*) {}
inline bool dpbf16_outruns_fma() {
  return false;
}
#endif

// ---- AMX ------------------------------------------------------------------------------------
// Operands: A row-major bf16, rows padded to 32 and K to whole blocks (row stride lda elements);
// B in AMX's pair layout per 16-column panel: for each block, 16 rows (k pairs 2r, 2r+1) of 16
// columns × 2 bf16 (1 KiB per block). One call computes a 32×32 block of C as 2×2 tiles (tmm0-3),
// A in tmm4-5, B in tmm6-7.
constexpr int kAmxRows = 32, kAmxCols = 32;

#if defined(__AMX_BF16__) && defined(__AMX_TILE__)
constexpr bool kHaveAmx = true;

// Linux keeps the 8 KiB tile state off until a process asks (ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA); a kernel without AMX support refuses, and the caller falls back.
inline bool amx_available() {
  static const bool granted =
      syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
  return granted;
}

// Each thread loads the configuration before its first tile instruction.
inline void amx_configure() {
  alignas(64) unsigned char cfg[64] = {};
  cfg[0] = 1;  // palette 1
  for (int t = 0; t < 8; ++t) {
    cfg[16 + 2 * t] = 64;  // colsb: 16 f32 (C), 32 bf16 (A), 16 pairs (B)
    cfg[48 + t] = 16;      // rows
  }
  _tile_loadconfig(cfg);
}
inline void amx_release() {
  _tile_release();
}

// c: a 32×32 f32 block (row stride ldc floats), updated in place. a: the block's first row
// (stride lda elements) at its first block; b0, b1: two 16-column panels at their first block.
// init: null, the block's C itself; else its 32 inits, the same for every row (a bias or zeros,
// loaded with row stride 0), so a product that does not accumulate never reads C. next: where
// the caller's next 32×32 block of C starts (same ldc), or null.
inline void amx_block(float* c, size_t ldc, const bf16* a, size_t lda, const bf16* b0,
                      const bf16* b1, int blocks, const float* init = nullptr,
                      const float* next = nullptr) {
  const size_t sa = lda * sizeof(bf16), sc = ldc * sizeof(float);
  if (init) {
    _tile_loadd(0, init, 0);
    _tile_loadd(1, init + 16, 0);
    _tile_loadd(2, init, 0);
    _tile_loadd(3, init + 16, 0);
  } else {
    _tile_loadd(0, c, sc);
    _tile_loadd(1, c + 16, sc);
    _tile_loadd(2, c + 16 * ldc, sc);
    _tile_loadd(3, c + 16 * ldc + 16, sc);
  }
  // Rows of C fetched for writing while the blocks run, a share per block. With init, C is
  // written only by the stores at the end: its own rows, so that the stores do not wait on them.
  // Else the next block's, which its tile loads read first thing (a C larger than the L2 has
  // left the cache between two visits).
  const float* fetch = init ? c : next;
  const int prefetched = fetch ? (kAmxRows + blocks - 1) / blocks : 0;
  for (int blk = 0; blk < blocks; ++blk) {
    for (int r = blk * prefetched; r < std::min(kAmxRows, (blk + 1) * prefetched); ++r) {
      __builtin_prefetch(fetch + r * ldc, 1, 3);
      __builtin_prefetch(fetch + r * ldc + 16, 1, 3);
    }
    _tile_loadd(4, a + blk * kBlock, sa);
    _tile_loadd(5, a + 16 * lda + blk * kBlock, sa);
    _tile_loadd(6, b0 + size_t(blk) * 512, 64);
    _tile_loadd(7, b1 + size_t(blk) * 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, sc);
  _tile_stored(1, c + 16, sc);
  _tile_stored(2, c + 16 * ldc, sc);
  _tile_stored(3, c + 16 * ldc + 16, sc);
}
#else
constexpr bool kHaveAmx = false;
inline bool amx_available() {
  return false;
}
inline void amx_configure() {}
inline void amx_release() {}
inline void amx_block(float*, size_t, const bf16*, size_t, const bf16*, const bf16*, int,
                      const float* = nullptr, const float* = nullptr) {}
#endif

}  // namespace reftrain::simd::bf16dot
