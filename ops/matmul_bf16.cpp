// The bf16 matmul family (ops/matmul_bf16.h): the reference, the packing and the tile loops of
// the fast paths. The register and tile kernels are simd/dot_bf16.h's.
//
// A fast product packs op(A) and op(B) once, in parallel, into buffers every thread reads (BLIS
// shares its B panel between the threads of a core group the same way), then walks units of
// (a chunk of kChunkRows rows) × (one column panel): a thread's consecutive units share the A
// chunk, which stays in L2, while the panel streams. A tile of C inside C accumulates in place
// (its init written there first, flushed); an edge tile goes through a per-thread scratch tile,
// so edges need no special kernel: the packing's zero padding only produces results that are
// never stored. Causal products (Bf16Causal) skip tiles and +0 blocks per tile.
#include "ops/matmul_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "simd/bf16.h"
#include "simd/dot_bf16.h"
#include "simd/pair_pack.h"

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
  if (bf16_path_available(Bf16Path::kDpbf16) && dot::dpbf16_outruns_fma()) return Bf16Path::kDpbf16;
  return Bf16Path::kEmulated;
}

namespace {

float init_of(const GemmBf16& g, int i, int j) {
  if (i >= g.M || j >= g.N) return 0.0f;
  const float v = g.accumulate ? g.c[size_t(i) * g.ldc + j] : g.bias ? g.bias[j] : 0.0f;
  return flush_subnormal(v);
}

int blocks_of(int K) {
  return (K + dot::kBlock - 1) / dot::kBlock;
}

// Words of one pair-packed panel of op(B) over kb blocks: kb·16 rows of kPairNR words.
size_t pair_panel_words(int kb) {
  return size_t(kb) * dot::kWordsPerBlock * dot::kPairNR;
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

size_t MatmulBf16::kept_weight_bytes(Bf16Path path, int N, int K) {
  if (path == Bf16Path::kReference) return 0;
  constexpr int NR = dot::kPairNR;
  return size_t(simd::round_up(N, NR) / NR) * pair_panel_words(blocks_of(K)) * sizeof(uint32_t);
}

size_t MatmulBf16::kept_bytes() const {
  size_t bytes = 0;
  for (const KeptB& k : kept_) bytes += k.words.size() * sizeof(uint32_t);
  return bytes;
}

void MatmulBf16::forget_weights() {
  for (KeptB& k : kept_) k.valid = false;
}

std::vector<MatmulBf16>& MatmulBf16::single_thread_engines() {
  if (singles_.empty()) {
    singles_.reserve(size_t(threads_));
    for (int i = 0; i < threads_; ++i) singles_.emplace_back(path_, 1);
  }
  return singles_;
}

void MatmulBf16::run(const GemmBf16& g) {
  if (g.M <= 0 || g.N <= 0) return;
  switch (route(path_, keep_, g)) {
    case Route::kReference:
      return gemm_bf16_reference(g, threads_);
    case Route::kRows:
      return run_rows(g);
    case Route::kPairs:
      return run_pairs(g);
    case Route::kAmx:
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

// x with a subnormal value replaced by its signed zero (flush_subnormal, branch-free so that a
// row of inits vectorises).
inline float flushed(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u = (u & 0x7F800000u) ? u : u & 0x80000000u;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// ---- one tile of C ------------------------------------------------------------------------
// Rows [i0, i0 + rows) × columns [j0, j0 + cols). A tile inside C accumulates in C itself
// (stride ldc); an edge tile goes through scratch, since the packing's zero padding produces
// results outside C that are never stored.
struct TileC {
  float* c;
  size_t ldc;
  bool inside;
};

// The tile's init (C, the bias or +0; flushed), 0 outside C.
TileC begin_tile(const GemmBf16& g, float* scratch, int i0, int j0, int rows, int cols) {
  const bool inside = i0 + rows <= g.M && j0 + cols <= g.N;
  const TileC t{inside ? g.c + size_t(i0) * g.ldc + j0 : scratch, inside ? g.ldc : size_t(cols),
                inside};
  const int r = std::max(0, std::min(rows, g.M - i0)), w = std::max(0, std::min(cols, g.N - j0));
  for (int i = 0; i < rows; ++i) {
    float* dst = t.c + i * t.ldc;
    const float* src = g.accumulate ? g.c + size_t(i0 + i) * g.ldc + j0
                       : g.bias     ? g.bias + j0
                                    : nullptr;
    const int n = i < r && src ? w : 0;
    for (int j = 0; j < n; ++j) dst[j] = flushed(src[j]);
    std::fill(dst + n, dst + cols, 0.0f);
  }
  return t;
}

void end_tile(const TileC& t, const GemmBf16& g, int i0, int j0, int rows, int cols) {
  if (t.inside) return;
  const int r = std::min(rows, g.M - i0), w = std::min(cols, g.N - j0);
  for (int i = 0; i < r; ++i)
    std::copy(t.c + i * t.ldc, t.c + i * t.ldc + w, g.c + size_t(i0 + i) * g.ldc + j0);
}

// C + (+0) for every output: −0 becomes +0, the one effect of the +0 blocks a causal product
// skips (Bf16Causal).
void add_plus_zero(const TileC& t, int rows, int cols) {
  for (int i = 0; i < rows; ++i) {
    float* c = t.c + i * t.ldc;
    for (int j = 0; j < cols; ++j) c[j] = c[j] == 0.0f ? 0.0f : c[j];
  }
}

// Whether none of a tile's outputs is wanted (kLowerOutput: every column past every row).
bool tile_unwanted(const GemmBf16& g, int i0, int rows, int j0) {
  return g.causal == Bf16Causal::kLowerOutput && j0 > std::min(i0 + rows, g.M) - 1;
}

// The K blocks [first, last) a tile of rows [i0, i0 + rows) runs; the others are +0 blocks.
struct Blocks {
  int first, last;
};
Blocks blocks_for(const GemmBf16& g, int kb, int i0, int rows) {
  const int last_row = std::min(i0 + rows, g.M) - 1;
  if (g.causal == Bf16Causal::kLowerA) return {0, std::min(kb, last_row / dot::kBlock + 1)};
  if (g.causal == Bf16Causal::kUpperA) return {std::min(kb, i0 / dot::kBlock), kb};
  return {0, kb};
}

// One tile: its init, kernel(c, ldc, first, last, row_init) over the blocks it runs, the skipped
// blocks' +0 (before, for leading blocks: C = init + 0 comes first), and the store. A tile inside
// C whose first block runs lets the kernel start from its init, so that C is not written (or
// flushed in place) before the kernel reads it: row_init, the product's inits as one row, every
// row's the same (a product that does not accumulate; null where the kernel cannot take it), or
// C itself where reads_c_flushed (the kernel reads C through an add under DAZ, which reads a
// subnormal as the flushed init the order asks for; a product that accumulates).
template <typename Kernel>
void run_tile(const GemmBf16& g, float* scratch, int kb, int i0, int j0, int rows, int cols,
              const float* row_init, bool reads_c_flushed, Kernel&& kernel) {
  if (tile_unwanted(g, i0, rows, j0)) return;
  const Blocks b = blocks_for(g, kb, i0, rows);
  const bool from_init = g.accumulate ? reads_c_flushed : row_init != nullptr;
  if (from_init && b.first == 0 && b.last > 0 && i0 + rows <= g.M && j0 + cols <= g.N) {
    const TileC t{g.c + size_t(i0) * g.ldc + j0, g.ldc, true};
    kernel(t.c, t.ldc, b.first, b.last, g.accumulate ? nullptr : row_init + j0);
    if (b.last < kb) add_plus_zero(t, rows, cols);
    return;
  }
  const TileC t = begin_tile(g, scratch, i0, j0, rows, cols);
  if (b.first > 0) add_plus_zero(t, rows, cols);
  if (b.first < b.last) kernel(t.c, t.ldc, b.first, b.last, nullptr);
  if (b.last < kb) add_plus_zero(t, rows, cols);
  end_tile(t, g, i0, j0, rows, cols);
}

// The inits of a product that does not accumulate, the same for every row: the bias flushed, or
// +0; +0 past N (row is rounded up to whole tiles).
const float* row_of_inits(const GemmBf16& g, float* row) {
  const int n = simd::round_up(g.N, dot::kAmxCols);
  for (int j = 0; j < n; ++j) row[j] = j < g.N && g.bias ? flushed(g.bias[j]) : 0.0f;
  return row;
}

// Fetches a tile's part of C (clipped to C) into the cache for writing while the tile before it
// computes. Every tile reads or writes its C once, and a column panel's tiles lie rows apart in a
// C larger than the L2, so without the hint the first access stalls on memory (a write-allocate
// when the tile starts from its inits). A hint: no bit moves. Always inlined, as the helper it
// calls and for the same reason: a function whose only effect is prefetches loses its calls.
[[gnu::always_inline]] inline void prefetch_tile_c(const GemmBf16& g, int i0, int j0, int rows,
                                                   int cols) {
  const int r = std::min(rows, g.M - i0), w = std::min(cols, g.N - j0);
  if (r > 0 && w > 0) simd::prefetch_rows_for_writing(g.c + size_t(i0) * g.ldc + j0, g.ldc, r, w);
}

// ---- pair packing (emulated, dpbf16) --------------------------------------------------------
// Per block of 32 k, 16 words: word r < 8 holds x[4r] in the high half and x[4r + 2] in the low
// (the even chain, two steps), word 8 + r holds x[4r + 1] and x[4r + 3] (the odd chain).
int pair_k(int blk, int r) {
  return blk * dot::kBlock + (r < 8 ? 4 * r : 4 * (r - 8) + 1);
}

// The full blocks of K: those whose 32 k all lie below K.
int full_blocks(int K, int kb) {
  return std::min(kb, K / dot::kBlock);
}

// A run along k, contiguous (x[0..K); null: a padding row or column), as kb blocks of words,
// word r of block blk at w[(blk·16 + r)·ws]. Blocks from `first` on, here element by element
// (the ones before it the vector packers did).
void pair_run(uint32_t* w, size_t ws, const bf16* x, int K, int kb, int first = 0) {
  for (int blk = first; blk < kb; ++blk) {
    uint16_t v[dot::kBlock] = {};
    const int n = x ? std::min(dot::kBlock, K - blk * dot::kBlock) : 0;
    for (int k = 0; k < n; ++k) v[k] = x[blk * dot::kBlock + k].bits;
    uint32_t* wb = w + size_t(blk) * dot::kWordsPerBlock * ws;
    for (int r = 0; r < 8; ++r) {
      wb[r * ws] = uint32_t(v[4 * r]) << 16 | v[4 * r + 2];
      wb[(r + 8) * ws] = uint32_t(v[4 * r + 1]) << 16 | v[4 * r + 3];
    }
  }
}

// Word r of block blk for `total` consecutive indices (rows of A, columns of B) whose elements
// along k lie at src[k·ld + x], x < n (zeros past n and past K): w[x·ws].
void pair_across(uint32_t* w, size_t ws, const bf16* src, size_t ld, int blk, int r, int K, int n,
                 int total) {
  const int k = pair_k(blk, r);
  const bf16* hi = k < K ? src + size_t(k) * ld : nullptr;
  const bf16* lo = k + 2 < K ? src + size_t(k + 2) * ld : nullptr;
  int x = 0;
  if (hi && lo) {
    if (ws == 1) x = dot::across_run(w, hi, lo, n);
    for (; x < n; ++x) w[x * ws] = uint32_t(hi[x].bits) << 16 | lo[x].bits;
  } else if (hi) {
    for (; x < n; ++x) w[x * ws] = uint32_t(hi[x].bits) << 16;
  }
  for (; x < total; ++x) w[x * ws] = 0;
}

// Rows [i0, i0 + 16) of op(A) into rows of kb·16 words (stride arow).
void pack_pair_rows(uint32_t* pa, size_t arow, const GemmBf16& g, int i0, int kb) {
  const int n = std::max(0, std::min(16, g.M - i0)), full = full_blocks(g.K, kb);
  uint32_t* rows = pa + i0 * arow;
  if (g.ta == Trans::kNo) {
    for (int i = 0; i < 16; ++i) {
      const bf16* x = i < n ? g.a + size_t(i0 + i) * g.lda : nullptr;
      const int done = x ? dot::pair_run_blocks(rows + i * arow, x, full) : 0;
      pair_run(rows + i * arow, 1, x, g.K, kb, done);
    }
    return;
  }
  for (int blk = 0; blk < kb; ++blk) {
    uint32_t* words = rows + blk * dot::kWordsPerBlock;
    if (n == 16 && blk < full &&
        dot::across_block16(words, arow, g.a + i0, g.lda, blk * dot::kBlock)) {
      continue;
    }
    for (int r = 0; r < dot::kWordsPerBlock; ++r)
      pair_across(words + r, arow, g.a + i0, g.lda, blk, r, g.K, n, 16);
  }
}

// Columns [q·NR, q·NR + NR) of a transposed op(B) (column j contiguous along k) into one panel:
// per block, 16 rows of NR words.
void pack_pair_panel(uint32_t* panel, const GemmBf16& g, int q, int kb) {
  constexpr int NR = dot::kPairNR, G = dot::kPackCols;
  const int j0 = q * NR, n = std::max(0, std::min(NR, g.N - j0)), full = full_blocks(g.K, kb);
  for (int c0 = 0; c0 < NR; c0 += G) {
    const int done =
        c0 + G <= n ? dot::pair_runs(panel + c0, NR, g.b + size_t(j0 + c0) * g.ldb, g.ldb, full)
                    : 0;
    for (int jj = c0; jj < c0 + G && jj < NR; ++jj) {
      const bf16* x = jj < n ? g.b + size_t(j0 + jj) * g.ldb : nullptr;
      pair_run(panel + jj, NR, x, g.K, kb, done);
    }
  }
}

// Panels [q0, q1) of an untransposed op(B) (row k contiguous along j), each bpanel words from
// pb (panel q at pb + (q − q0)·bpanel): word row r of block blk of panel q from rows
// pair_k(blk, r) and + 2, columns [q·NR, q·NR + NR).
// One word row goes across all the panels, and a block's words in the order that reads B's rows
// ascending (k = 0 and 2, 1 and 3, 4 and 6, ..): each row of B is then read as one run, not as
// a cache line per panel and block, which waited on memory (a weight gradient's B is the layer
// input, 2,048+ rows). Bf16 weight gradients took about 0.94x their time on Zen 4.
void pack_pair_panels_across(uint32_t* pb, size_t bpanel, const GemmBf16& g, int q0, int q1, int kb,
                             int blk0 = 0) {
  constexpr int NR = dot::kPairNR;
  for (int blk = blk0; blk < kb; ++blk) {
    for (int i = 0; i < dot::kWordsPerBlock; ++i) {
      const int r = i / 2 + (i % 2) * 8;  // words 0, 8, 1, 9, ..: rows k = 0, 2, 1, 3, 4, 6, ..
      const size_t row = (size_t(blk) * dot::kWordsPerBlock + r) * NR;
      for (int q = q0; q < q1; ++q) {
        const int j0 = q * NR, n = std::max(0, std::min(NR, g.N - j0));
        pair_across(pb + (q - q0) * bpanel + row, 1, g.b + j0, g.ldb, blk, r, g.K, n, NR);
      }
    }
  }
}

// ---- AMX packing --------------------------------------------------------------------------
// 16 rows of op(A) from row i0, row-major with row stride lda (kb·32), zeros past M and K.
void pack_amx_rows(bf16* pa, size_t lda, const GemmBf16& g, int i0) {
  const int rows = std::max(0, std::min(16, g.M - i0));
  std::fill(pa + i0 * lda, pa + (i0 + 16) * lda, bf16{0});
  if (g.ta == Trans::kNo) {
    for (int i = 0; i < rows; ++i) {
      const bf16* src = g.a + size_t(i0 + i) * g.lda;
      std::copy(src, src + g.K, pa + (i0 + i) * lda);
    }
    return;
  }
  // 16 rows at a time, so each k reads one run; with all 16 rows, whole blocks of 32 k by
  // register transposes first
  const int done = rows == 16 ? dot::amx_rows_across(pa + i0 * lda, lda, g.a + i0, g.lda, g.K) : 0;
  for (int k = done; k < g.K; ++k) {
    const bf16* src = g.a + size_t(k) * g.lda + i0;
    for (int i = 0; i < rows; ++i) pa[(i0 + i) * lda + k] = src[i];
  }
}

// One 16-column panel of op(B) in AMX's pair layout: per block, 16 pair rows of 16 columns ×
// (B(2r, j) in the low half, B(2r + 1, j) in the high half); zeros outside B.
void pack_amx_panel(bf16* panel, const GemmBf16& g, int j0, int kb) {
  const int cols = std::max(0, std::min(16, g.N - j0)), pairs = kb * dot::kBlock / 2;
  std::fill(panel, panel + size_t(pairs) * 32, bf16{0});
  const bf16* b = g.b + (g.tb == Trans::kYes ? size_t(j0) * g.ldb : size_t(j0));
  if (g.tb == Trans::kYes) {  // column j is contiguous along k: each pair is one 32-bit word
    const int done = cols == 16 ? dot::amx_panel_from_columns(panel, b, g.ldb, g.K) : 0;
    for (int jj = 0; jj < cols; ++jj) {
      const bf16* col = b + size_t(jj) * g.ldb;
      for (int k = done; k < g.K; ++k) panel[(k / 2) * 32 + 2 * jj + (k & 1)] = col[k];
    }
    return;
  }
  const int done = cols == 16 ? dot::amx_panel_from_rows(panel, b, g.ldb, g.K) : 0;
  for (int k = done; k < g.K; ++k) {  // row k is contiguous along j: interleave rows 2r and 2r + 1
    const bf16* row = b + size_t(k) * g.ldb;
    bf16* dst = panel + (k / 2) * 32 + (k & 1);
    for (int jj = 0; jj < cols; ++jj) dst[2 * jj] = row[jj];
  }
}

// The row stride of a packed A, in 2-byte elements: whole blocks, plus one cache line when the
// stride would be a multiple of 2 KiB. A tile's 16 rows at such a stride fall into one or two
// sets of the L1 cache and evict each other (the weight gradient's A, K = B·T rows of 2 KiB).
size_t packed_row_elems(int kb) {
  const size_t n = size_t(kb) * dot::kBlock;
  return n % 1024 == 0 ? n + 32 : n;
}

// Whether AMX reads op(A) in place: row-major, with rows filling whole tiles and K whole blocks.
bool amx_a_in_place(const GemmBf16& g) {
  return g.ta == Trans::kNo && g.M % dot::kAmxRows == 0 && g.K % dot::kBlock == 0;
}

// Row i of op(A) in chain order (simd/dot_bf16.h): per block of 32 k its even k ascending, then
// its odd k; zeros past K.
void chain_row(float* x, const GemmBf16& g, int i, int kb) {
  const size_t step = g.ta == Trans::kNo ? 1 : g.lda;
  const bf16* row = g.ta == Trans::kNo ? g.a + size_t(i) * g.lda : g.a + i;
  for (int blk = 0; blk < kb; ++blk) {
    for (int s = 0; s < dot::kChainSteps; ++s) {
      const int k = blk * dot::kBlock + (s < 16 ? 2 * s : 2 * (s - 16) + 1);
      x[blk * dot::kChainSteps + s] = k < g.K ? bf16_to_f32(row[size_t(k) * step]) : 0.0f;
    }
  }
}

// Below this many multiply-adds a product of a few rows runs on one thread: a parallel region
// costs more than it saves (the attention's per-head products while decoding).
constexpr double kRowsThreadWork = 1 << 18;
// Words of op(B) a kept B's packing must reach before the engine's threads share it.
constexpr size_t kKeptPackShared = size_t(1) << 16;

int rows_threads(const GemmBf16& g, int threads) {
  const int panels = simd::round_up(g.N, dot::kPairNR) / dot::kPairNR;
  return double(g.M) * g.N * g.K >= kRowsThreadWork ? std::max(1, std::min(threads, panels)) : 1;
}

// each thread's row of C on cache lines of its own (NR = 24 floats on AVX2 would share them)
constexpr size_t kRowStride = size_t(simd::round_up(dot::kPairNR, 16));

}  // namespace

// Which of the engine's paths runs g: on the emulated path, the few-rows path takes every product
// of at most kRowsPathMax rows; VDPBF16PS's and AMX's general paths, which do not widen, give it
// only those whose op(B) is kept (kept_weight_bytes follows this).
MatmulBf16::Route MatmulBf16::route(Bf16Path path, bool keep, const GemmBf16& g) {
  const bool few = g.M <= kRowsPathMax, kept = keep && few;
  switch (path) {
    case Bf16Path::kReference:
      return Route::kReference;
    case Bf16Path::kEmulated:
      return few ? Route::kRows : Route::kPairs;
    case Bf16Path::kDpbf16:
      return kept ? Route::kRows : Route::kPairs;
    case Bf16Path::kAmx:
      return kept ? Route::kRows : Route::kAmx;
  }
  return Route::kReference;
}

MatmulBf16::Workspace MatmulBf16::workspace(Bf16Path path, int threads, bool keep,
                                            const GemmBf16& g) {
  Workspace w;
  if (g.M <= 0 || g.N <= 0) return w;
  const int kb = blocks_of(g.K);
  const size_t inits = g.accumulate ? 0 : size_t(simd::round_up(g.N, dot::kAmxCols));
  switch (route(path, keep, g)) {
    case Route::kReference:
      break;
    case Route::kRows: {
      const size_t row_threads = size_t(rows_threads(g, threads));
      w.pb = row_threads * pair_panel_words(kb);
      w.fa = size_t(g.M) * kb * dot::kChainSteps;
      w.tiles = row_threads * kRowStride;
      break;
    }
    case Route::kPairs: {
      const bool widened = path == Bf16Path::kEmulated;
      w.pa = size_t(simd::round_up(g.M, 16)) * (packed_row_elems(kb) / 2);
      w.pb = size_t(simd::round_up(g.N, dot::kPairNR) / dot::kPairNR) * pair_panel_words(kb);
      w.fa = widened ? 2 * w.pa : 0;
      w.fb = widened ? 2 * w.pb : 0;
      w.tiles = size_t(threads) * (widened ? dot::kEmulatedMR : dot::kPairMR) * dot::kPairNR;
      w.inits = inits;
      break;
    }
    case Route::kAmx: {
      const size_t mp = simd::round_up(g.M, dot::kAmxRows), np = simd::round_up(g.N, dot::kAmxCols);
      w.pa = amx_a_in_place(g) ? 0 : (mp * packed_row_elems(kb) + 1) / 2;  // bf16 pairs
      w.pb = (np / 16 * size_t(kb) * 512 + 1) / 2;
      w.tiles = size_t(threads) * dot::kAmxRows * dot::kAmxCols;
      w.inits = inits;
      break;
    }
  }
  return w;
}

void MatmulBf16::Workspace::grow(const Workspace& w) {
  pa = std::max(pa, w.pa);
  pb = std::max(pb, w.pb);
  fa = std::max(fa, w.fa);
  fb = std::max(fb, w.fb);
  tiles = std::max(tiles, w.tiles);
  inits = std::max(inits, w.inits);
}

size_t MatmulBf16::Workspace::bytes() const {
  return (pa + pb) * sizeof(uint32_t) + (fa + fb + tiles + inits) * sizeof(float);
}

size_t MatmulBf16::workspace_bytes() const {
  size_t bytes =
      Workspace{pa_.size(), pb_.size(), fa_.size(), fb_.size(), tiles_.size(), inits_.size()}
          .bytes();
  for (const MatmulBf16& e : singles_) bytes += e.workspace_bytes();
  return bytes;
}

void MatmulBf16::reserve_workspace(const GemmBf16& g) {
  const Workspace w = workspace(path_, threads_, keep_, g);
  reserve(pa_, w.pa);
  reserve(pb_, w.pb);
  reserve(fa_, w.fa);
  reserve(fb_, w.fb);
  reserve(tiles_, w.tiles);
  reserve(inits_, w.inits);
}

// The emulated path's products of at most kRowsPathMax rows (a decoding step's, one token): each
// thread packs one panel of op(B) at a time into its own scratch, which stays in cache, and runs
// the rows over it at once, widening the words in registers. The general path packs all of op(B)
// into shared panels and widens them in a pass of their own, traffic that a row of A, reading
// each packed word once, does not repay (with it, `sample --precision bf16` took 1.4-1.8× fp32's
// time per token in the x86-64-v3 build).
void MatmulBf16::run_rows(const GemmBf16& g) {
  constexpr int NR = dot::kPairNR;
  const int kb = blocks_of(g.K), panels = simd::round_up(g.N, NR) / NR;
  const size_t bpanel = pair_panel_words(kb), xrow = size_t(kb) * dot::kChainSteps;
  const int threads = rows_threads(g, threads_);
  reserve_workspace(g);
  uint32_t* scratch = pb_.data();
  float *x = fa_.data(), *rows = tiles_.data();
  for (int i = 0; i < g.M; ++i) chain_row(x + i * xrow, g, i, kb);
  const uint32_t* kept = keep_ && kb > 0 ? kept_panels(g, kb, bpanel, panels) : nullptr;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    uint32_t* scratch_panel = scratch + t * bpanel;
    float* c = rows + t * kRowStride;
    const simd::FlushDenormals mode;
#pragma omp for schedule(static)
    for (int q = 0; q < panels; ++q) {
      const int j0 = q * NR, w = std::min(NR, g.N - j0);
      const uint32_t* panel = kept ? kept + q * bpanel : scratch_panel;
      if (!kept && kb > 0 && g.tb == Trans::kYes) pack_pair_panel(scratch_panel, g, q, kb);
      if (!kept && kb > 0 && g.tb == Trans::kNo) {
        pack_pair_panels_across(scratch_panel, bpanel, g, q, q + 1, kb);
      }
      for (int i = 0; i < g.M; ++i) {
        for (int j = 0; j < NR; ++j) c[j] = init_of(g, i, j0 + j);
        dot::chain_row_words<dot::kPairNV>(c, x + i * xrow, panel, kb);
        std::copy(c, c + w, g.c + size_t(i) * g.ldc + j0);
      }
    }
  }
}

// keep_weights: B's panels as run_rows reads them, packed by the engine's threads at the first
// product with this B since forget_weights() and then read as they are. A kept B may have grown
// since by rows of op(B) (a cache's keys, N) or by k (its values, K): what was packed stays, and
// only the panels (keys) or the last block (values) that the new rows reach are packed again; a
// new block of values changes the panels' stride, so it packs them all (once every 32 tokens).
const uint32_t* MatmulBf16::kept_panels(const GemmBf16& g, int kb, size_t bpanel, int panels) {
  auto same = [&](const KeptB& k) { return k.b == g.b && k.ldb == g.ldb && k.tb == g.tb; };
  auto it = std::find_if(kept_.begin(), kept_.end(), same);
  if (it == kept_.end()) it = kept_.insert(kept_.end(), {g.b, 0, 0, g.ldb, g.tb, false, {}});
  KeptB& k = *it;
  const bool keys = g.tb == Trans::kYes;
  const bool grown = keys ? k.K == g.K && k.N <= g.N : k.N == g.N && k.K <= g.K;
  int from = 0;  // the first panel (keys) or block (values) to pack
  if (k.valid && grown && keys) from = k.N == g.N ? panels : k.N / dot::kPairNR;
  if (k.valid && grown && !keys && blocks_of(k.K) == kb) from = k.K == g.K ? kb : k.K / dot::kBlock;
  if (k.words.size() < size_t(panels) * bpanel) {  // grow, keeping the keys' packed panels
    AlignedBuffer<uint32_t> words(size_t(panels) * bpanel);
    if (keys) std::copy(k.words.data(), k.words.data() + size_t(from) * bpanel, words.data());
    k.words = std::move(words);
  }
  uint32_t* words = k.words.data();
  const int units = keys ? panels - from : (from < kb ? panels : 0);
  // A token's growth (a panel of keys, a block of values) is a few KiB: packed by this thread.
  // A team for it, two threads per head and layer and token, took bf16 decoding at 16 threads
  // on the AMX Xeon to 75-119 tokens/s (610-699 packed here; bench/RESULTS.md). A first packing
  // of a weight is shared out.
  const bool shared = size_t(units) * bpanel >= kKeptPackShared;
#pragma omp parallel for num_threads(std::max(1, std::min(threads_, units))) if (shared) \
    schedule(static)
  for (int q = 0; q < units; ++q) {
    if (keys) pack_pair_panel(words + size_t(from + q) * bpanel, g, from + q, kb);
    if (!keys) pack_pair_panels_across(words + size_t(q) * bpanel, bpanel, g, q, q + 1, kb, from);
  }
  k.N = g.N, k.K = g.K, k.valid = true;
  return words;
}

// Pair packing, inside the threads: A as rows of arow words (kb·16 and the padding); B as
// panels of NR columns, kb·16 rows of NR words (bpanel words each).
void MatmulBf16::pack_pairs(const GemmBf16& g, int kb, size_t arow, size_t bpanel) {
  constexpr int NR = dot::kPairNR;
  const int groups = simd::round_up(g.M, 16) / 16, panels = simd::round_up(g.N, NR) / NR;
  uint32_t *pa = pa_.data(), *pb = pb_.data();  // (reserved by the caller, before the threads)
#pragma omp for schedule(static)
  for (int q = 0; q < groups; ++q) pack_pair_rows(pa, arow, g, q * 16, kb);
  if (g.tb == Trans::kYes) {
#pragma omp for schedule(static)
    for (int q = 0; q < panels; ++q) pack_pair_panel(pb + q * bpanel, g, q, kb);
    return;
  }
  // one run of panels per thread, so that each reads its part of B's rows as runs
  const int threads = omp_get_num_threads(), per = (panels + threads - 1) / threads;
#pragma omp for schedule(static)
  for (int t = 0; t < threads; ++t) {
    const int q0 = std::min(panels, t * per);
    pack_pair_panels_across(pb + q0 * bpanel, bpanel, g, q0, std::min(panels, (t + 1) * per), kb);
  }
}

// The emulated path's operands: the packed words widened to f32 in chain order (A as
// micro-panels of kEmulatedMR rows, 2·arow floats per row; B panels of 2·bpanel floats), inside
// the threads.
void MatmulBf16::widen_pairs(const GemmBf16& g, int kb, size_t arow, size_t bpanel) {
  constexpr int MR = dot::kEmulatedMR;
  const int groups = simd::round_up(g.M, 16) / MR,
            panels = simd::round_up(g.N, dot::kPairNR) / dot::kPairNR;
  const size_t words = size_t(kb) * dot::kWordsPerBlock;
#pragma omp for schedule(static)
  for (int q = 0; q < groups; ++q) {
    const size_t i0 = size_t(q) * MR;
    dot::widen_word_panel<MR>(fa_.data() + 2 * i0 * arow, pa_.data() + i0 * arow, arow, words);
  }
#pragma omp for schedule(static)
  for (int q = 0; q < panels; ++q) {
    dot::widen_word_rows(fb_.data() + 2 * q * bpanel, pb_.data() + q * bpanel, words, dot::kPairNR);
  }
}

void MatmulBf16::run_pairs(const GemmBf16& g) {
  constexpr int NR = dot::kPairNR, EMR = dot::kEmulatedMR;
  const bool widened = path_ == Bf16Path::kEmulated;
  const int MR = widened ? EMR : dot::kPairMR;
  const int kb = blocks_of(g.K), mp = simd::round_up(g.M, MR),
            panels = simd::round_up(g.N, NR) / NR;
  const size_t arow = packed_row_elems(kb) / 2, bpanel = pair_panel_words(kb);
  reserve_workspace(g);
  float* tiles = tiles_.data();
  const float* row_init = g.accumulate ? nullptr : row_of_inits(g, inits_.data());
  const int chunks = (mp + kChunkRows - 1) / kChunkRows, units = chunks * panels;
#pragma omp parallel num_threads(threads_)
  {
    if (kb > 0) {
      pack_pairs(g, kb, arow, bpanel);  // (its omp for's barrier: packed before any tile reads)
      if (widened) widen_pairs(g, kb, arow, bpanel);
    }
    const uint32_t *pa = pa_.data(), *pb = pb_.data();
    const float *fa = fa_.data(), *fb = fb_.data();
    const simd::FlushDenormals mode;
    float* tile = tiles + size_t(omp_get_thread_num()) * MR * NR;
#pragma omp for schedule(static)
    for (int u = 0; u < units; ++u) {
      const int chunk = u / panels, q = u % panels, j0 = q * NR;
      const int i_end = std::min(mp, (chunk + 1) * kChunkRows);
      for (int i0 = chunk * kChunkRows; i0 < i_end; i0 += MR) {
        if (i0 + MR < i_end) prefetch_tile_c(g, i0 + MR, j0, MR, NR);
        run_tile(g, tile, kb, i0, j0, MR, NR, row_init, true,
                 [&](float* c, size_t ldc, int first, int last, const float* init) {
                   if (widened) {
                     dot::chain_tile_emulated<EMR, dot::kPairNV>(
                         c, ldc, fa + 2 * i0 * arow + size_t(first) * dot::kChainSteps * EMR,
                         fb + 2 * q * bpanel + size_t(first) * dot::kChainSteps * NR, last - first,
                         init);
                     return;
                   }
                   const uint32_t* a = pa + i0 * arow + first * dot::kWordsPerBlock;
                   const uint32_t* b = pb + q * bpanel + size_t(first) * dot::kWordsPerBlock * NR;
                   dot::pair_tile_dpbf16(c, ldc, a, arow, b, last - first, init);
                 });
      }
    }
  }
}

// Packs B's panels (panel bf16 elements each) and returns the A AMX reads: op(A) itself
// (in_place, amx_a_in_place) or packed row-major with row stride lda, rows padded to 32 and K to
// whole blocks. Runs inside the threads.
const bf16* MatmulBf16::pack_amx(const GemmBf16& g, int kb, size_t panel, bool in_place,
                                 size_t lda) {
  const int mp = simd::round_up(g.M, dot::kAmxRows), np = simd::round_up(g.N, dot::kAmxCols);
  bf16* pb = reinterpret_cast<bf16*>(pb_.data());
#pragma omp for schedule(static) nowait
  for (int q = 0; q < np / 16; ++q) pack_amx_panel(pb + q * panel, g, q * 16, kb);
  if (in_place) {
#pragma omp barrier
    return g.a;
  }
  bf16* pa = reinterpret_cast<bf16*>(pa_.data());
#pragma omp for schedule(static)
  for (int i0 = 0; i0 < mp; i0 += 16) pack_amx_rows(pa, lda, g, i0);
  return pa;
}

void MatmulBf16::run_amx(const GemmBf16& g) {
  constexpr int BR = dot::kAmxRows, BC = dot::kAmxCols;
  const int kb = blocks_of(g.K), mp = simd::round_up(g.M, BR), np = simd::round_up(g.N, BC);
  const size_t packed_lda = packed_row_elems(kb), panel = size_t(kb) * 512;
  const bool direct = amx_a_in_place(g);
  const size_t lda = direct ? g.lda : packed_lda;
  reserve_workspace(g);
  float* tiles = tiles_.data();
  const float* row_init = g.accumulate ? nullptr : row_of_inits(g, inits_.data());
  const int chunks = (mp + kChunkRows - 1) / kChunkRows, cols = np / BC, units = chunks * cols;
#pragma omp parallel num_threads(threads_)
  {
    const bf16* pa = kb > 0 ? pack_amx(g, kb, panel, direct, lda) : nullptr;
    const bf16* pb = reinterpret_cast<const bf16*>(pb_.data());
    dot::amx_configure();
    float* tile = tiles + size_t(omp_get_thread_num()) * BR * BC;
#pragma omp for schedule(static)
    for (int u = 0; u < units; ++u) {
      const int chunk = u / cols, q = u % cols, j0 = q * BC;
      const int i_end = std::min(mp, (chunk + 1) * kChunkRows);
      for (int i0 = chunk * kChunkRows; i0 < i_end; i0 += BR) {
        // the next block of this unit, when the kernel will read it from C itself
        const bool next_in_c =
            g.accumulate && i0 + BR < i_end && i0 + 2 * BR <= g.M && j0 + BC <= g.N;
        const float* next = next_in_c ? g.c + size_t(i0 + BR) * g.ldc + j0 : nullptr;
        run_tile(g, tile, kb, i0, j0, BR, BC, row_init, false,
                 [&](float* c, size_t ldc, int first, int last, const float* init) {
                   const size_t f = size_t(first) * 512;
                   dot::amx_block(c, ldc, pa + i0 * lda + first * dot::kBlock, lda,
                                  pb + 2 * q * panel + f, pb + (2 * q + 1) * panel + f,
                                  last - first, init, next);
                 });
      }
    }
    dot::amx_release();
  }
}

}  // namespace reftrain
