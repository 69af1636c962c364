// The packed variants of the matmul family: tiled and blocked (ops/matmul.h). Both cut C into
// rectangles that threads take as they come free (choose_grid), then run the Goto/BLIS loop nest
// inside each:
//
//   for jc: column block of NC     (op(B) panel kc×nc packed once per pc: sized to stay in L2)
//     for pc: K block of KC, ascending  (the K loop is never split: one thread owns an output)
//       pack op(B)[pc.., jc..] into micro-panels kc×NR        (f16 widened here, in mixed)
//       for ir: MR rows                  (op(A) micro-panel kc×MR packed: stays in L1)
//         for jr: NR columns             (one tile of C: the kernel below)
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
#include <cmath>
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

// One thread's slices of the workspace.
template <typename T>
struct Slices {
  using Bk = Blocking<T>;
  static constexpr size_t kB = align64(sizeof(T) * Bk::kKC * Bk::kNC);
  static constexpr size_t kA = align64(sizeof(T) * Bk::kKC * Bk::kMR);
  static constexpr size_t kTile = align64(sizeof(T) * Bk::kMR * Bk::kNR);
  static constexpr size_t kBias = align64(sizeof(T) * Bk::kNR);
  static constexpr size_t kBytes = kB + kA + kTile + kBias;
  T *bp, *ap, *ctile, *btile;
  explicit Slices(unsigned char* p)
      : bp(reinterpret_cast<T*>(p)),
        ap(reinterpret_cast<T*>(p + kB)),
        ctile(reinterpret_cast<T*>(p + kB + kA)),
        btile(reinterpret_cast<T*>(p + kB + kA + kTile)) {}
};

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

// op(B)[p0.., j0..] (kc × nc) as micro-panels of kc rows × NR columns: element (p, j0 + q·NR + jj)
// at bp[(q·kc + p)·NR + jj]; columns past nc are zero.
template <typename T, typename BT>
void pack_b(T* bp, const Gemm<T, BT>& g, int p0, int kc, int j0, int nc) {
  constexpr int NR = Blocking<T>::kNR;
  for (int q = 0; q * NR < nc; ++q) {
    T* panel = bp + size_t(q) * kc * NR;
    const int jb = j0 + q * NR, w = std::min(NR, nc - q * NR);
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

// Fetch a tile's rows of C (rows × cols at c) into the cache for writing, while the tile before
// it computes. The kernel loads its tile of C before its first FMA (every chain starts from C),
// and after an earlier K block the tile has left the L2 (a column block of C is larger than it),
// so those loads stalled on memory: baby's products (M = 2048) ran 5-15 % faster with this on
// the dev machine and 7 % on the Xeon (bench/RESULTS.md, issue 32). A hint: no bit moves.
template <typename T>
void prefetch_c(const T* c, size_t ldc, int rows, int cols) {
  constexpr int kLine = 64 / int(sizeof(T));
  for (int i = 0; i < rows; ++i) {
    const T* row = c + size_t(i) * ldc;
    for (int j = 0; j < cols; j += kLine) __builtin_prefetch(row + j, 1, 3);
    __builtin_prefetch(row + cols - 1, 1, 3);
  }
}

// The loop nest over one thread's rectangle of C.
template <typename Kernel, typename T, typename BT>
void run_rectangle(const Gemm<T, BT>& g, Range rows, Range cols, const Slices<T>& s) {
  using Bk = Blocking<T>;
  for (int jc = cols.begin; jc < cols.end; jc += Bk::kNC) {
    const int nc = std::min(Bk::kNC, cols.end - jc);
    for (int pc = 0; pc < g.K; pc += Bk::kKC) {
      const int kc = std::min(Bk::kKC, g.K - pc);
      const bool load_c = g.accumulate || pc > 0;
      const T* bias = g.bias && pc + kc == g.K ? g.bias + jc : nullptr;
      pack_b(s.bp, g, pc, kc, jc, nc);
      for (int ir = rows.begin; ir < rows.end; ir += Bk::kMR) {
        const int mr = std::min(Bk::kMR, rows.end - ir);
        pack_a(s.ap, g, ir, mr, pc, kc);
        for (int jr = 0; jr < nc; jr += Bk::kNR) {
          const bool last_in_row = jr + Bk::kNR >= nc;
          const int next_i = last_in_row ? ir + Bk::kMR : ir,
                    next_j = last_in_row ? 0 : jr + Bk::kNR;
          if (next_i < rows.end) {
            prefetch_c(g.c + size_t(next_i) * g.ldc + jc + next_j, g.ldc,
                       std::min(Bk::kMR, rows.end - next_i), std::min(Bk::kNR, nc - next_j));
          }
          tile<Kernel>(kc, s.ap, s.bp + size_t(jr) * kc, g.c + size_t(ir) * g.ldc + jc + jr, g.ldc,
                       mr, std::min(Bk::kNR, nc - jr), load_c, bias ? bias + jr : nullptr, s);
        }
      }
    }
  }
}

// How C is cut into rectangles: tm row parts × tn column parts, in whole register tiles. The
// threads take rectangles from a shared counter as they come free, so a thread slowed by another
// program on its core takes fewer of them, and the others take the rest: with several
// rectangles per thread, a slow thread delays the product's end by about one rectangle instead
// of its whole static share. Which thread computes a rectangle changes none of its bits: every
// output is still one FMA chain over the whole K, in one thread.
// The cut minimises an estimate of the product's cycles on `threads` threads: the rounds of
// rectangles each thread runs, plus one rectangle more for the thread that comes free last,
// times one rectangle's FMAs plus its packing (a rectangle packs op(B) for its columns, and op(A)
// for its rows once per column block). The extra round is what buys finer rectangles with some
// repeated packing; one thread gets one rectangle.
struct Grid {
  int tm, tn;
};

constexpr int kMaxRectanglesPerThread = 4;

Grid choose_grid(int threads, int M, int N, int K, int MR, int NR, int NC, int lanes) {
  const long um = (M + MR - 1) / MR, un = (N + NR - 1) / NR;
  const long slots = threads > 1 ? long(threads) * kMaxRectanglesPerThread : 1;
  Grid best{1, 1};
  double best_cost = -1;
  for (long tm = 1; tm <= std::min(slots, um); ++tm) {
    for (long tn = 1; tn <= std::min(slots / tm, un); ++tn) {
      const double rows = double((um + tm - 1) / tm * MR), cols = double((un + tn - 1) / tn * NR);
      const double fma = rows * cols * K / lanes, pack_b = cols * K;
      const double pack_a = rows * K * std::ceil(cols / NC);
      const long rounds = (tm * tn + threads - 1) / threads + (threads > 1 ? 1 : 0);
      const double cost = double(rounds) * (fma + pack_b + 0.5 * pack_a);
      if (best_cost < 0 || cost < best_cost) best = {int(tm), int(tn)}, best_cost = cost;
    }
  }
  return best;
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

}  // namespace

size_t packed_bytes_per_thread() {
  return std::max(Slices<float>::kBytes, Slices<double>::kBytes);
}

template <typename T, typename BT>
void gemm_packed(const Gemm<T, BT>& g, bool register_blocked, unsigned char* workspace,
                 int threads) {
  using Bk = Blocking<T>;
  if (g.M == 0 || g.N == 0) return;
  if (g.K == 0) return epilogue_only(g);
  if (gemv_transposed(g, threads)) return;
  const int um = (g.M + Bk::kMR - 1) / Bk::kMR, un = (g.N + Bk::kNR - 1) / Bk::kNR;
  threads = std::max(1, std::min({threads, omp_get_max_threads(), um * un}));
  const Grid gr = choose_grid(threads, g.M, g.N, g.K, Bk::kMR, Bk::kNR, Bk::kNC, Bk::kLanes);
  const int rectangles = gr.tm * gr.tn;
#pragma omp parallel num_threads(std::min(threads, rectangles))
  {
    const Slices<T> s(workspace + size_t(omp_get_thread_num()) * packed_bytes_per_thread());
#pragma omp for schedule(dynamic, 1)
    for (int k = 0; k < rectangles; ++k) {
      const Range rows = part(um, gr.tm, k / gr.tn, Bk::kMR, g.M);
      const Range cols = part(un, gr.tn, k % gr.tn, Bk::kNR, g.N);
      if (register_blocked) {
        run_rectangle<RegisterBlock<T>>(g, rows, cols, s);
      } else {
        run_rectangle<OneVector<T>>(g, rows, cols, s);
      }
    }
  }
}

template void gemm_packed<float, float>(const Gemm<float, float>&, bool, unsigned char*, int);
template void gemm_packed<float, f16>(const Gemm<float, f16>&, bool, unsigned char*, int);
template void gemm_packed<double, double>(const Gemm<double, double>&, bool, unsigned char*, int);

}  // namespace reftrain::matmul_detail
