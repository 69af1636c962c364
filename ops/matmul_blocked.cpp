// The packed variants of the matmul family: tiled and blocked (ops/matmul.h). Both run the
// Goto/BLIS loop nest, its op(B) blocks packed once and shared by the threads:
//
//   for jc: column block of NC           (an op(B) block kc×nc: sized to stay in L2)
//     for pc: K block of KC, ascending   (the K loop is never split: one FMA chain per output)
//       pack op(B)[pc.., jc..] into micro-panels kc×NR, shared    (f16 widened here, in mixed)
//       for ir: MR rows                  (op(A) micro-panel kc×MR packed: stays in L1)
//         for jr: NR columns             (one tile of C: the kernel below)
//
// The threads pack a phase of blocks together, then take units of C (rows × columns of one
// column block, through the phase's K blocks) as they come free (choose_grid).
//
// The kernel of `blocked` (the register micro-kernel of simd/microkernel.h, which the fused
// attention's tile products share) holds an MR×NR tile of C in MR·NV SIMD accumulators for the
// whole K block: per k it loads NV vectors of the B micro-panel and broadcasts MR values of A, then
// does MR·NV fused multiply-adds. `tiled` runs the same loop nest with one accumulator at a time
// (the workgroup tile without a register block). Each output's FMA chain runs over k in ascending
// order from the initial accumulator, and the bias is added after the last K block: the same
// arithmetic as the naive loop, bit for bit. Edge tiles (fewer than MR rows or NR columns) run
// the same kernel on a zero-padded copy of the tile. One row against a transposed B (the linear
// forward of a single token, in generation) skips the packing: gemv_transposed, same chains.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "ops/cast.h"
#include "ops/matmul_kernels.h"
#include "simd/f16.h"
#include "simd/microkernel.h"
#include "simd/simd.h"

namespace reftrain::matmul_detail {

namespace {

// Register block and cache blocks per element type and ISA.
//   AVX-512 (32 zmm): 4 rows × 4 vectors = 16 accumulators; per k, 4 vector loads of B and 4
//     broadcasts of A feed 16 FMAs, so the FMA unit, not the load ports, is the limit.
//   AVX2 (16 ymm): 16 accumulators would leave no register for B. Measured on Zen 4 with the
//     portable build (docs/kernels/03_linear.md): 6×2 (12 accumulators, BLIS's Haswell shape)
//     and 4×3 reach OpenBLAS, 4×2 and 2×4 lose 5-15 %; 6×2 keeps NR = 16, which divides every
//     training width (4×3's NR = 24 wastes 3 % of the lm_head's 256 columns).
//   KC = 256: the A micro-panel (KC×MR) stays in L1 while the packed B panel (KC×NC, 512 KiB)
//     is swept from L2 (1 MiB per core on Zen 4); each C tile is loaded and stored once per KC.
//   NEON (aarch64: 32 registers of 128 bits, 4 floats): like AVX-512, 32 registers, but each holds
//     a quarter as many lanes, so a register tile needs more of them for the same reuse. 6×4 =
//     24 accumulators + 4 B vectors + the A broadcast = 29 of 32: per k, 4 vector loads and 6
//     broadcasts feed 24 FMAs (AVX-512's 4×4 would feed 16 FMAs from 8 loads, a load-bound
//     ratio on cores with 2-3 load ports and 4 FMA pipes, such as Apple's and Neoverse V1/V2);
//     NR = 16 like AVX2, dividing every training width. Not yet measured on hardware
//     (bench/RESULTS.md).
template <typename T>
struct Blocking {
  static constexpr int kLanes = int(simd::Batch<T>::size);
  static constexpr int kBytes = kLanes * int(sizeof(T));  // of one vector register
  static constexpr int kMR = kBytes == 64 ? 4 : 6;
  static constexpr int kNV = kBytes == 64 ? 4 : kBytes == 32 ? 2 : 4;
  static constexpr int kNR = kNV * kLanes;
  static constexpr int kKC = 256;
  static constexpr int kNC = (512 * 1024 / int(sizeof(T)) / kKC) / kNR * kNR;
};

constexpr size_t align64(size_t bytes) {
  return (bytes + 63) / 64 * 64;
}

// The workspace: the shared packed blocks of op(B), then one slice per thread for its op(A)
// micro-panel and its edge tile. A block is one K block × column block of op(B) (KC × NC, in
// pack_b_panel's micro-panels); the shared part holds max(threads, kMinSharedBlocks) of them.
constexpr int kMinSharedBlocks = 16;

template <typename T>
struct Slices {
  using Bk = Blocking<T>;
  static constexpr size_t kBlock = align64(sizeof(T) * Bk::kKC * Bk::kNC);
  static constexpr size_t kA = align64(sizeof(T) * Bk::kKC * Bk::kMR);
  static constexpr size_t kTile = align64(sizeof(T) * Bk::kMR * Bk::kNR);
  static constexpr size_t kBias = align64(sizeof(T) * Bk::kNR);
  static constexpr size_t kBytes = kA + kTile + kBias;
  T *ap, *ctile, *btile;
  explicit Slices(unsigned char* p)
      : ap(reinterpret_cast<T*>(p)),
        ctile(reinterpret_cast<T*>(p + kA)),
        btile(reinterpret_cast<T*>(p + kA + kTile)) {}
};

int shared_blocks(int threads) {
  return std::max(threads, kMinSharedBlocks);
}

// dst[0..n) = src[0..n), widened to T (exact: every f16 is a float).
template <typename T, typename BT>
void widen_copy(T* dst, const BT* src, int n) {
  if constexpr (std::is_same_v<T, BT>) {
    std::memcpy(dst, src, sizeof(T) * size_t(n));
  } else {
    static_assert(std::is_same_v<T, float>, "f16 widens to float");
    constexpr int L = int(simd::kF16Lanes);
    int i = 0;
    for (; i + L <= n; i += L) simd::store_f32_lanes(dst + i, simd::widen_f16_lanes(src + i));
    for (; i < n; ++i) dst[i] = static_cast<T>(src[i]);
  }
}

// widen_copy of a compile-time N: one micro-panel row of an untransposed op(B). With the size
// known, the same-type copy is a few vector moves; widen_copy's runtime-sized memcpy is a library
// call per row, which cost 3-8 % of a product with few rows (gpt2's M = 256 backward-data
// products on the AVX2 path, bench/RESULTS.md issue 32).
template <int N, typename T, typename BT>
void widen_copy_row(T* dst, const BT* src) {
  if constexpr (std::is_same_v<T, BT>) {
    std::memcpy(dst, src, sizeof(T) * N);
  } else {
    widen_copy(dst, src, N);
  }
}

// One micro-panel of a transposed op(B) (the weight [N,K] read as K×N):
// panel[p·NR + jj] = b[(jb + jj)·ldb + p0 + p] for p < kc, jj < w. The ISA's register transposes
// fill what they can (simd/microkernel.h); the rest element by element.
template <typename T, typename BT>
void pack_b_transposed(T* panel, const Gemm<T, BT>& g, int p0, int kc, int jb, int w) {
  constexpr int NR = Blocking<T>::kNR;
  const BT* rows = g.b + size_t(jb) * g.ldb + p0;
  const simd::microkernel::Transposed done =
      simd::microkernel::transpose_in_registers<NR>(panel, rows, g.ldb, kc, w);
  for (int jj = 0; jj < w; ++jj) {
    const BT* src = rows + size_t(jj) * g.ldb;
    for (int p = jj < done.j ? done.p : 0; p < kc; ++p) panel[p * NR + jj] = static_cast<T>(src[p]);
  }
}

// One micro-panel of op(B): columns [jb, jb + w) over [p0, p0 + kc), element (p, jb + jj) at
// panel[p·NR + jj]; columns past w are zero.
template <typename T, typename BT>
void pack_b_panel(T* panel, const Gemm<T, BT>& g, int p0, int kc, int jb, int w) {
  constexpr int NR = Blocking<T>::kNR;
  if (g.tb == Trans::kNo) {
    const BT* src = g.b + size_t(p0) * g.ldb + jb;
    for (int p = 0; p < kc; ++p, src += g.ldb) {
      if (w == NR) {
        widen_copy_row<NR>(panel + p * NR, src);
      } else {
        widen_copy(panel + p * NR, src, w);
      }
    }
  } else {
    pack_b_transposed(panel, g, p0, kc, jb, w);
  }
  if (w < NR) {
    for (int p = 0; p < kc; ++p) std::fill(panel + p * NR + w, panel + (p + 1) * NR, T(0));
  }
}

// Rows [i0, i0 + rows) of op(A) over [p0, p0 + kc) as one micro-panel: A(i0 + ii, p0 + p) at
// ap[p·MR + ii]; rows past `rows` are zero.
template <typename T, typename BT>
void pack_a(T* ap, const Gemm<T, BT>& g, int i0, int rows, int p0, int kc) {
  constexpr int MR = Blocking<T>::kMR;
  if (g.ta == Trans::kYes) {
    for (int p = 0; p < kc; ++p) {
      const T* src = g.a + size_t(p0 + p) * g.lda + i0;
      for (int ii = 0; ii < MR; ++ii) ap[p * MR + ii] = ii < rows ? src[ii] : T(0);
    }
    return;
  }
  if (rows == MR) {
    const T* src[MR];
    for (int ii = 0; ii < MR; ++ii) src[ii] = g.a + size_t(i0 + ii) * g.lda + p0;
    int p = simd::microkernel::interleave_in_registers<T, MR>(ap, src, kc);
    for (; p < kc; ++p) {
#pragma GCC unroll 8
      for (int ii = 0; ii < MR; ++ii) ap[p * MR + ii] = src[ii][p];
    }
    return;
  }
  std::fill(ap, ap + size_t(kc) * MR, T(0));
  for (int ii = 0; ii < rows; ++ii) {
    const T* src = g.a + size_t(i0 + ii) * g.lda + p0;
    for (int p = 0; p < kc; ++p) ap[p * MR + ii] = src[p];
  }
}

// The blocked kernel: C[0..MR, 0..NR) (row stride ldc) = (load_c ? C : 0) + Σ_p a(·,p)·b(p,·),
// then + bias when given. ap: an A micro-panel (kc × MR), bp: a B micro-panel (kc × NR, aligned).
// One MR×NV register tile of the shared micro-kernel (simd/microkernel.h).
template <typename T>
struct RegisterBlock {
  static void run(int kc, const T* ap, const T* bp, T* c, size_t ldc, bool load_c, const T* bias) {
    constexpr int MR = Blocking<T>::kMR, NV = Blocking<T>::kNV, NR = Blocking<T>::kNR;
    simd::microkernel::run<T, MR, NV, true>({c, ldc, ap, 1, MR, bp, NR}, kc, load_c, bias);
  }
};

// The tiled kernel: the same tile and the same arithmetic, one SIMD vector of outputs at a
// time (the micro-kernel at 1×1), its chain over k in one accumulator (bound by FMA latency, not
// throughput).
template <typename T>
struct OneVector {
  static void run(int kc, const T* ap, const T* bp, T* c, size_t ldc, bool load_c, const T* bias) {
    constexpr int L = Blocking<T>::kLanes, MR = Blocking<T>::kMR, NR = Blocking<T>::kNR;
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; j += L) {
        simd::microkernel::run<T, 1, 1, true>({c + i * ldc + j, ldc, ap + i, 1, MR, bp + j, NR}, kc,
                                              load_c, bias ? bias + j : nullptr);
      }
    }
  }
};

// One tile of C (rows ≤ MR, cols ≤ NR at c): full tiles in place, edge tiles through the
// thread's MR×NR scratch, zero-padded (the padding's results are never stored).
template <typename Kernel, typename T>
void tile(int kc, const T* ap, const T* bp, T* c, size_t ldc, int rows, int cols, bool load_c,
          const T* bias, const Slices<T>& s) {
  constexpr int MR = Blocking<T>::kMR, NR = Blocking<T>::kNR;
  if (rows == MR && cols == NR) return Kernel::run(kc, ap, bp, c, ldc, load_c, bias);
  if (load_c) {
    for (int i = 0; i < rows; ++i) std::copy(c + i * ldc, c + i * ldc + cols, s.ctile + i * NR);
  }
  if (bias) {
    std::copy(bias, bias + cols, s.btile);
    std::fill(s.btile + cols, s.btile + NR, T(0));
  }
  Kernel::run(kc, ap, bp, s.ctile, NR, load_c, bias ? s.btile : nullptr);
  for (int i = 0; i < rows; ++i) std::copy(s.ctile + i * NR, s.ctile + i * NR + cols, c + i * ldc);
}

struct Range {
  int begin, end;
};

// The product's blocks of op(B) in the order every output needs them: column block after column
// block, and inside one its K blocks ascending. Block b is column block b / kblocks, K block
// b % kblocks.
template <typename T>
struct BlockOrder {
  using Bk = Blocking<T>;
  int N, K, kblocks, blocks;
  BlockOrder(int n, int k)
      : N(n),
        K(k),
        kblocks((k + Bk::kKC - 1) / Bk::kKC),
        blocks((n + Bk::kNC - 1) / Bk::kNC * kblocks) {}
  int jc(int b) const { return b / kblocks * Bk::kNC; }
  int nc(int b) const { return std::min(Bk::kNC, N - jc(b)); }
  int pc(int b) const { return b % kblocks * Bk::kKC; }
  int kc(int b) const { return std::min(Bk::kKC, K - pc(b)); }
};

// Where block `slot` of a phase lives in the shared buffer: every block has a whole KC × NC
// slot, whatever its own kc and nc.
template <typename T>
T* block_slot(T* shared, int slot) {
  return shared + size_t(slot) * (Slices<std::remove_const_t<T>>::kBlock / sizeof(T));
}

// Packs blocks [first, last) into the shared buffer, block b at slot b - first, the threads
// taking micro-panels as they come free. Ends on the barrier of its `omp for`: no tile reads a
// block before all of the phase is packed.
template <typename T, typename BT>
void pack_phase(const Gemm<T, BT>& g, const BlockOrder<T>& order, T* shared, int first, int last) {
  constexpr int NR = Blocking<T>::kNR, kPanels = Blocking<T>::kNC / NR;
#pragma omp for schedule(dynamic, 4)
  for (int t = 0; t < (last - first) * kPanels; ++t) {
    const int b = first + t / kPanels, jr = t % kPanels * NR, kc = order.kc(b);
    if (jr >= order.nc(b)) continue;
    T* panel = block_slot(shared, b - first) + size_t(jr) * kc;
    pack_b_panel(panel, g, order.pc(b), kc, order.jc(b) + jr, std::min(NR, order.nc(b) - jr));
  }
}

// sums[ii] += ap[p·MR + ii] for p = 0..kc-1 ascending, ii < rows: a micro-panel's share of the
// sums of op(A)'s rows (Gemm::a_sums), from L1 while the panel is fresh.
template <typename T>
void add_panel_sums(T* sums, const T* ap, int rows, int kc) {
  constexpr int MR = Blocking<T>::kMR;
  T s[MR];
  for (int ii = 0; ii < MR; ++ii) s[ii] = ii < rows ? sums[ii] : T(0);
  for (int p = 0; p < kc; ++p) {
#pragma GCC unroll 8
    for (int ii = 0; ii < MR; ++ii) s[ii] += ap[p * MR + ii];
  }
  for (int ii = 0; ii < rows; ++ii) sums[ii] = s[ii];
}

// One unit of work: rows × cols (cols relative to the column block) of C, through the packed
// blocks [blocks.begin, blocks.end) of one column block, K ascending. op(A) is packed per K
// block, one micro-panel at a time, and its tiles walk the unit's columns. With `sums` (the
// units of the first column part of column block 0) it also adds each panel to g.a_sums: every
// row of op(A) is in one such unit per phase, and the phases and each unit's K blocks go in
// ascending K, so each row's sum is one chain in p order, the chain add_a_sums runs.
template <typename Kernel, typename T, typename BT>
void run_unit(const Gemm<T, BT>& g, const BlockOrder<T>& order, const T* shared, int first,
              Range blocks, Range rows, Range cols, bool sums, const Slices<T>& s) {
  constexpr int MR = Blocking<T>::kMR, NR = Blocking<T>::kNR;
  for (int b = blocks.begin; b < blocks.end; ++b) {
    const int jc = order.jc(b), pc = order.pc(b), kc = order.kc(b);
    const T* bp = block_slot(shared, b - first);
    const bool load_c = g.accumulate || pc > 0;
    const T* bias = g.bias && pc + kc == g.K ? g.bias + jc : nullptr;
    for (int ir = rows.begin; ir < rows.end; ir += MR) {
      const int mr = std::min(MR, rows.end - ir);
      pack_a(s.ap, g, ir, mr, pc, kc);
      if (sums) add_panel_sums(g.a_sums + ir, s.ap, mr, kc);
      for (int jr = cols.begin; jr < cols.end; jr += NR) {
        const bool last_in_row = jr + NR >= cols.end;
        const int next_i = last_in_row ? ir + MR : ir, next_j = last_in_row ? cols.begin : jr + NR;
        // The next tile's C, fetched while this one computes: the kernel loads its tile of C
        // before its first FMA, and after an earlier K block the tile has left the L2 (a column
        // block of C is larger than it), so those loads stalled on memory: baby's products
        // (M = 2048) ran 5-15 % faster with this on the dev machine and 7 % on the Xeon
        // (bench/RESULTS.md, issue 32).
        if (next_i < rows.end) {
          simd::prefetch_rows_for_writing(g.c + size_t(next_i) * g.ldc + jc + next_j, g.ldc,
                                          std::min(MR, rows.end - next_i),
                                          std::min(NR, cols.end - next_j));
        }
        tile<Kernel>(kc, s.ap, bp + size_t(jr) * kc, g.c + size_t(ir) * g.ldc + jc + jr, g.ldc, mr,
                     std::min(NR, cols.end - jr), load_c, bias ? bias + jr : nullptr, s);
      }
    }
  }
}

// How each column block of a phase is cut into units: tm row parts × tn column parts, in whole
// register tiles, about kUnitsPerThread units per thread over the phase. The threads take units
// from a shared counter as they come free, so a thread slowed by another program on its core
// takes fewer of them and the others take the rest: a slow thread delays the phase's end by about
// one unit instead of its whole static share. One thread gets one unit per column block (its
// rows reuse each block while it is in L2). Which thread computes a unit changes none of its
// bits: every output is one FMA chain over K ascending, its K blocks in order.
struct Grid {
  int tm, tn;
};

constexpr int kUnitsPerThread = 4;

Grid choose_grid(int threads, int row_tiles, int col_tiles, int column_blocks) {
  if (threads == 1) return {1, 1};
  const int wanted = (threads * kUnitsPerThread + column_blocks - 1) / column_blocks;
  const int tm = std::min(row_tiles, wanted);
  return {tm, std::min(col_tiles, (wanted + tm - 1) / tm)};
}

// Part `k` of `parts` of [0, units), as even as possible, scaled by `unit` and clipped to n.
Range part(int units, int parts, int k, int unit, int n) {
  const int b = int(long(units) * k / parts), e = int(long(units) * (k + 1) / parts);
  return {std::min(n, b * unit), std::min(n, e * unit)};
}

// One row against a transposed B in float (the linear forward of one token, each decoding step
// of text generation): the ISA's gemv kernel (simd/microkernel.h), whose outputs are each one FMA
// chain over p in ascending order, the bias added after it: the blocked product's bits. False
// when the product has another shape or type, or the ISA has no such kernel.
template <typename T, typename BT>
bool gemv_transposed(const Gemm<T, BT>& g, int threads) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (g.M != 1 || g.ta != Trans::kNo || g.tb != Trans::kYes) return false;
    const simd::microkernel::GemvRows<BT> rows{g.N,   g.K, g.a,          g.b,
                                               g.ldb, g.c, g.accumulate, g.bias};
    return simd::microkernel::gemv_transposed(rows, threads);
  }
}

// The units of blocks [first, last), handed out to the threads as they come free.
template <typename Kernel, typename T, typename BT>
void run_phase(const Gemm<T, BT>& g, const BlockOrder<T>& order, const T* shared, int first,
               int last, int threads, const Slices<T>& s) {
  using Bk = Blocking<T>;
  const int first_j = first / order.kblocks,
            column_blocks = (last - 1) / order.kblocks - first_j + 1;
  const int row_tiles = (g.M + Bk::kMR - 1) / Bk::kMR;
  const int col_tiles = (std::min(g.N, Bk::kNC) + Bk::kNR - 1) / Bk::kNR;
  const Grid gr = choose_grid(threads, row_tiles, col_tiles, column_blocks);
  const int per_block = gr.tm * gr.tn;
#pragma omp for schedule(dynamic, 1)
  for (int u = 0; u < column_blocks * per_block; ++u) {
    const int j = first_j + u / per_block, r = u % per_block;
    const Range blocks{std::max(first, j * order.kblocks), std::min(last, (j + 1) * order.kblocks)};
    const int nc = order.nc(blocks.begin);
    const Range rows = part(row_tiles, gr.tm, r / gr.tn, Bk::kMR, g.M);
    const Range cols = part((nc + Bk::kNR - 1) / Bk::kNR, gr.tn, r % gr.tn, Bk::kNR, nc);
    const bool sums = g.a_sums && j == 0 && r % gr.tn == 0;
    run_unit<Kernel>(g, order, shared, first, blocks, rows, cols, sums, s);
  }
}

// The product: each block of op(B) is packed once, into the shared buffer, by all the threads,
// a phase of as many blocks as the buffer holds at a time (one at a time on one thread, which
// packs a block just before its tiles read it, while it is in L2); then the phase's units run.
template <typename Kernel, typename T, typename BT>
void run_blocks(const Gemm<T, BT>& g, unsigned char* workspace, int capacity, int threads) {
  const BlockOrder<T> order(g.N, g.K);
  T* shared = reinterpret_cast<T*>(workspace);
  unsigned char* slices = workspace + size_t(capacity) * Slices<T>::kBlock;
  const int phase_blocks = threads == 1 ? 1 : capacity;
#pragma omp parallel num_threads(threads)
  {
    const Slices<T> s(slices + size_t(omp_get_thread_num()) * Slices<T>::kBytes);
    for (int first = 0; first < order.blocks; first += phase_blocks) {
      const int last = std::min(order.blocks, first + phase_blocks);
      pack_phase(g, order, shared, first, last);
      run_phase<Kernel>(g, order, shared, first, last, threads, s);
    }
  }
}

}  // namespace

size_t packed_workspace_bytes(int threads) {
  const size_t block = std::max(Slices<float>::kBlock, Slices<double>::kBlock);
  const size_t slice = std::max(Slices<float>::kBytes, Slices<double>::kBytes);
  return size_t(shared_blocks(threads)) * block + size_t(std::max(threads, 1)) * slice;
}

template <typename T, typename BT>
void gemm_packed(const Gemm<T, BT>& g, bool register_blocked, unsigned char* workspace,
                 int threads) {
  using Bk = Blocking<T>;
  if (g.M == 0) return;
  if (g.N == 0 || g.K == 0 || gemv_transposed(g, threads)) {
    if (g.N > 0 && g.K == 0) epilogue_only(g);
    return add_a_sums(g, threads);
  }
  const int capacity = shared_blocks(threads);  // (the workspace was sized for this many threads)
  const int um = (g.M + Bk::kMR - 1) / Bk::kMR, un = (g.N + Bk::kNR - 1) / Bk::kNR;
  threads = std::max(1, std::min({threads, omp_get_max_threads(), um * un}));
  if (register_blocked) {
    run_blocks<RegisterBlock<T>>(g, workspace, capacity, threads);
  } else {
    run_blocks<OneVector<T>>(g, workspace, capacity, threads);
  }
}

template void gemm_packed<float, float>(const Gemm<float, float>&, bool, unsigned char*, int);
template void gemm_packed<float, f16>(const Gemm<float, f16>&, bool, unsigned char*, int);
template void gemm_packed<double, double>(const Gemm<double, double>&, bool, unsigned char*, int);

}  // namespace reftrain::matmul_detail
