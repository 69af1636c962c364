// The bf16 matmul family (ops/matmul_bf16.h): the reference, the packing and the tile loops of
// the fast paths. The register and tile kernels are simd/dot_bf16.h's.
//
// A fast product packs op(A) and op(B) once, in parallel, into buffers every thread reads (BLIS
// shares its B panel between the threads of a core group the same way), then walks units of
// (a chunk of kChunkRows rows) × (one column panel): a thread's consecutive units share the A
// chunk, which stays in L2, while the panel streams. Each tile of C starts in a per-thread
// scratch tile (the init, flushed), takes every K block, and is copied out: edge tiles need no
// special kernel, since the packing's zero padding only produces results that are never stored.
#include "ops/matmul_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "simd/bf16.h"
#include "simd/dot_bf16.h"

namespace reftrain {

namespace dot = simd::bf16dot;

const char* bf16_path_name(Bf16Path p) {
  switch (p) {
    case Bf16Path::kReference:
      return "reference";
    case Bf16Path::kEmulated:
      return "emulated";
    case Bf16Path::kDpbf16:
      return "dpbf16";
    case Bf16Path::kAmx:
      return "amx";
  }
  return "?";
}

bool bf16_path_available(Bf16Path p) {
  switch (p) {
    case Bf16Path::kReference:
    case Bf16Path::kEmulated:
      return true;
    case Bf16Path::kDpbf16:
      return dot::kHaveDpbf16;
    case Bf16Path::kAmx:
      return dot::kHaveAmx && dot::amx_available();
  }
  return false;
}

Bf16Path bf16_best_path() {
  if (bf16_path_available(Bf16Path::kAmx)) return Bf16Path::kAmx;
  if (bf16_path_available(Bf16Path::kDpbf16)) return Bf16Path::kDpbf16;
  return Bf16Path::kEmulated;
}

namespace {

// op(A)(i, k) and op(B)(k, j) as bit patterns, 0 outside the matrix (the padding).
uint16_t a_bits(const GemmBf16& g, int i, int k) {
  if (i >= g.M || k >= g.K) return 0;
  return (g.ta == Trans::kNo ? g.a[size_t(i) * g.lda + k] : g.a[size_t(k) * g.lda + i]).bits;
}
uint16_t b_bits(const GemmBf16& g, int k, int j) {
  if (k >= g.K || j >= g.N) return 0;
  return (g.tb == Trans::kNo ? g.b[size_t(k) * g.ldb + j] : g.b[size_t(j) * g.ldb + k]).bits;
}

float init_of(const GemmBf16& g, int i, int j) {
  if (i >= g.M || j >= g.N) return 0.0f;
  const float v = g.accumulate ? g.c[size_t(i) * g.ldc + j] : g.bias ? g.bias[j] : 0.0f;
  return flush_subnormal(v);
}

int blocks_of(int K) {
  return (K + dot::kBlock - 1) / dot::kBlock;
}
int round_up(int n, int m) {
  return (n + m - 1) / m * m;
}

// The word of pair r (0..15) of block blk: the chain's step k in the high half, k + 2 in the low.
int pair_k(int blk, int r) {
  return blk * dot::kBlock + (r < 8 ? 4 * r : 4 * (r - 8) + 1);
}
template <typename Bits>
uint32_t pair_word(Bits bits, int k) {
  return uint32_t(bits(k)) << 16 | bits(k + 2);
}

// AMX packing of 16 rows of op(A) from row i0: row-major, zeros past M and K. A row of A is
// contiguous (kNo: a copy) or a column (kYes: 16 rows at a time, so each k reads one run).
void pack_amx_a(bf16* pa, size_t lda, const GemmBf16& g, int i0) {
  const int rows = std::max(0, std::min(16, g.M - i0));
  for (int ii = 0; ii < 16; ++ii)
    std::fill(pa + (i0 + ii) * lda, pa + (i0 + ii + 1) * lda, bf16{0});
  if (g.ta == Trans::kNo) {
    for (int ii = 0; ii < rows; ++ii) {
      std::copy(g.a + size_t(i0 + ii) * g.lda, g.a + size_t(i0 + ii) * g.lda + g.K,
                pa + (i0 + ii) * lda);
    }
  } else {
    for (int k = 0; k < g.K; ++k) {
      const bf16* src = g.a + size_t(k) * g.lda + i0;
      for (int ii = 0; ii < rows; ++ii) pa[(i0 + ii) * lda + k] = src[ii];
    }
  }
}

// One 16-column panel of op(B) in AMX's pair layout: word (pair row r, column jj) holds
// B(2r, j0 + jj) in the low half and B(2r + 1, j0 + jj) in the high half; zeros outside B.
void pack_amx_b(bf16* panel, const GemmBf16& g, int j0, int kb) {
  const int cols = std::max(0, std::min(16, g.N - j0)), pairs = kb * dot::kBlock / 2;
  std::fill(panel, panel + size_t(pairs) * 32, bf16{0});
  for (int jj = 0; jj < cols; ++jj) {
    for (int r = 0; r < pairs && 2 * r < g.K; ++r) {
      panel[r * 32 + 2 * jj] = bf16{b_bits(g, 2 * r, j0 + jj)};
      panel[r * 32 + 2 * jj + 1] = bf16{b_bits(g, 2 * r + 1, j0 + jj)};
    }
  }
}

constexpr int kChunkRows = 128;  // rows of A per unit of work: 128 × K bf16 stays in L2

}  // namespace

void gemm_bf16_reference(const GemmBf16& g, int threads) {
  const size_t as = g.ta == Trans::kNo ? 1 : g.lda, bs = g.tb == Trans::kNo ? g.ldb : 1;
  // K = 0: no operand is read, and it may be empty (a null pointer no offset may be added to).
  const bool read = g.K > 0;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, std::min(threads, omp_get_max_threads())))
  for (int i = 0; i < g.M; ++i) {
    const bf16* arow = !read ? g.a : g.ta == Trans::kNo ? g.a + size_t(i) * g.lda : g.a + i;
    for (int j = 0; j < g.N; ++j) {
      const bf16* bcol = !read ? g.b : g.tb == Trans::kNo ? g.b + j : g.b + size_t(j) * g.ldb;
      float& c = g.c[size_t(i) * g.ldc + j];
      c = dot_bf16_canonical(init_of(g, i, j), arow, as, bcol, bs, g.K);
    }
  }
}

MatmulBf16::MatmulBf16(Bf16Path path, int threads)
    : path_(path),
      // At most the OpenMP limit, as the fp32 matmul: more threads than that only oversubscribe.
      threads_(std::min(threads > 0 ? threads : omp_get_max_threads(), omp_get_max_threads())) {
  if (!bf16_path_available(path)) {
    throw std::runtime_error(std::string("bf16 matmul: the ") + bf16_path_name(path) +
                             " path is not available on this build or CPU");
  }
}

void MatmulBf16::run(const GemmBf16& g) {
  if (g.M <= 0 || g.N <= 0) return;
  switch (path_) {
    case Bf16Path::kReference:
      return gemm_bf16_reference(g, threads_);
    case Bf16Path::kEmulated:
    case Bf16Path::kDpbf16:
      return run_pairs(g);
    case Bf16Path::kAmx:
      return run_amx(g);
  }
}

namespace {

// Grows buf to n elements (never shrinks: the largest product's size is kept).
template <typename T>
T* reserve(AlignedBuffer<T>& buf, size_t n) {
  if (buf.size() < n) buf = AlignedBuffer<T>(n);
  return buf.data();
}

// tile (rows × cols, row stride ld) = the inits of C[i0.., j0..], flushed, and 0 outside C.
// (Called once per tile: a per-element init_of here cost as much as the tile's products.)
void load_tile(float* tile, size_t ld, const GemmBf16& g, int i0, int j0, int rows, int cols) {
  const int w = std::max(0, std::min(cols, g.N - j0));
  for (int i = 0; i < rows; ++i) {
    float* t = tile + i * ld;
    const float* src = g.accumulate ? g.c + size_t(i0 + i) * g.ldc + j0
                       : g.bias     ? g.bias + j0
                                    : nullptr;
    const int n = i0 + i < g.M && src ? w : 0;
    for (int j = 0; j < n; ++j)
      t[j] = std::fabs(src[j]) < 0x1p-126f ? std::copysign(0.0f, src[j]) : src[j];
    std::fill(t + n, t + cols, 0.0f);
  }
}
void store_tile(const float* tile, size_t ld, const GemmBf16& g, int i0, int j0, int rows,
                int cols) {
  const int r = std::min(rows, g.M - i0), w = std::min(cols, g.N - j0);
  for (int i = 0; i < r; ++i)
    std::copy(tile + i * ld, tile + i * ld + w, g.c + size_t(i0 + i) * g.ldc + j0);
}

}  // namespace

// Pair packing: A as rows of Kb·16 words; B as panels of NR columns, Kb·16 rows of NR words.
void MatmulBf16::run_pairs(const GemmBf16& g) {
  constexpr int MR = dot::kPairMR, NR = dot::kPairNR;
  const int kb = blocks_of(g.K), mp = round_up(g.M, MR), panels = round_up(g.N, NR) / NR;
  const size_t arow = size_t(kb) * dot::kWordsPerBlock, bpanel = arow * NR;
  uint32_t* pa = reserve(pa_, size_t(mp) * arow);
  uint32_t* pb = reserve(pb_, size_t(panels) * bpanel);
  float* tiles = reserve(tiles_, size_t(threads_) * MR * NR);
  const int chunks = (mp + kChunkRows - 1) / kChunkRows, units = chunks * panels;
#pragma omp parallel num_threads(threads_)
  {
#pragma omp for schedule(static)
    for (int i = 0; i < mp; ++i) {
      for (int blk = 0; blk < kb; ++blk) {
        for (int r = 0; r < dot::kWordsPerBlock; ++r) {
          pa[i * arow + blk * dot::kWordsPerBlock + r] =
              pair_word([&](int k) { return a_bits(g, i, k); }, pair_k(blk, r));
        }
      }
    }
#pragma omp for schedule(static)
    for (int q = 0; q < panels; ++q) {
      for (int blk = 0; blk < kb; ++blk) {
        for (int r = 0; r < dot::kWordsPerBlock; ++r) {
          uint32_t* row = pb + q * bpanel + (size_t(blk) * dot::kWordsPerBlock + r) * NR;
          for (int jj = 0; jj < NR; ++jj) {
            row[jj] = pair_word([&](int k) { return b_bits(g, k, q * NR + jj); }, pair_k(blk, r));
          }
        }
      }
    }
    // (the implicit barrier of the omp for: packing is complete before any tile reads it)
    const simd::FlushDenormals mode;
    float* tile = tiles + size_t(omp_get_thread_num()) * MR * NR;
#pragma omp for schedule(static)
    for (int u = 0; u < units; ++u) {
      const int chunk = u / panels, q = u % panels, j0 = q * NR;
      const int i_end = std::min(mp, (chunk + 1) * kChunkRows);
      for (int i0 = chunk * kChunkRows; i0 < i_end; i0 += MR) {
        load_tile(tile, NR, g, i0, j0, MR, NR);
        if (path_ == Bf16Path::kDpbf16) {
          dot::pair_tile_dpbf16(tile, pa + i0 * arow, arow, pb + q * bpanel, kb);
        } else {
          dot::pair_tile_emulated<MR, dot::kPairNV>(tile, pa + i0 * arow, arow, pb + q * bpanel,
                                                    kb);
        }
        store_tile(tile, NR, g, i0, j0, MR, NR);
      }
    }
  }
}

// AMX packing: A row-major bf16 [rows padded to 32][kb·32]; B per 16-column panel, per block
// 16 rows of (k = 2r, 2r + 1) pairs for 16 columns.
void MatmulBf16::run_amx(const GemmBf16& g) {
  constexpr int BR = dot::kAmxRows, BC = dot::kAmxCols;
  const int kb = blocks_of(g.K), mp = round_up(g.M, BR), np = round_up(g.N, BC);
  const size_t lda = size_t(kb) * dot::kBlock, panel = size_t(kb) * 512;  // bf16 elements
  bf16* pa = reinterpret_cast<bf16*>(reserve(pa_, (size_t(mp) * lda + 1) / 2));
  bf16* pb = reinterpret_cast<bf16*>(reserve(pb_, (size_t(np / 16) * panel + 1) / 2));
  float* tiles = reserve(tiles_, size_t(threads_) * BR * BC);
  const int chunks = (mp + kChunkRows - 1) / kChunkRows, cols = np / BC, units = chunks * cols;
#pragma omp parallel num_threads(threads_)
  {
#pragma omp for schedule(static)
    for (int i0 = 0; i0 < mp; i0 += 16) pack_amx_a(pa, lda, g, i0);
#pragma omp for schedule(static)
    for (int q = 0; q < np / 16; ++q) pack_amx_b(pb + q * panel, g, q * 16, kb);
    dot::amx_configure();
    float* tile = tiles + size_t(omp_get_thread_num()) * BR * BC;
#pragma omp for schedule(static)
    for (int u = 0; u < units; ++u) {
      const int chunk = u / cols, q = u % cols, j0 = q * BC;
      const int i_end = std::min(mp, (chunk + 1) * kChunkRows);
      for (int i0 = chunk * kChunkRows; i0 < i_end; i0 += BR) {
        load_tile(tile, BC, g, i0, j0, BR, BC);
        dot::amx_block(tile, pa + i0 * lda, lda, pb + 2 * q * panel, pb + (2 * q + 1) * panel, kb);
        store_tile(tile, BC, g, i0, j0, BR, BC);
      }
    }
    dot::amx_release();
  }
}

}  // namespace reftrain
