#include "ops/linear.h"

#include <algorithm>
#include <cstddef>

#include "ops/cast.h"
#include "simd/simd.h"

namespace reftrain {

namespace {

// All three products are one operation, C += A·B, with A read element by element and B by rows:
//   C(i,j) += Σ_p A(i,p)·B(p,j)   for p = 0..P-1 in ascending order,
//   A(i,p) = a[i·as + p·ap],  B(p,j) = b[p·ldb + j],  C(i,j) = c[i·ldc + j],  i < M, j < NC.
// Every product and every sum is rounded on its own (no FMA), in that order, so the result is the
// textbook loop's bit for bit, whatever the blocking and the thread count.
//
// C is cut into tiles of kRows × 4 SIMD vectors. A full tile keeps its accumulators in registers
// for the whole p loop and loads each B row once for all kRows rows: the CPU twin of the GPU's
// 4×4 register block. kRows is 4 when a vector is 64 bytes (AVX-512: 16 accumulators of the 32
// registers), 2 otherwise (AVX2: 8 of 16). Edge tiles run the same sums row by row.
template <typename T>
struct Tile {
  using B = simd::Batch<T>;
  static constexpr int kLanes = int(B::size);
  static constexpr int kRows = sizeof(T) * B::size >= 64 ? 4 : 2;
  static constexpr int kCols = 4 * kLanes;

  static void full(T* c, size_t ldc, const T* a, size_t as, size_t ap, const T* b, size_t ldb,
                   int P) {
    B acc[kRows][4];
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[i][v] = B::load_unaligned(c + i * ldc + v * kLanes);
    }
    for (int p = 0; p < P; ++p) {
      const T* bp = b + size_t(p) * ldb;
      const B b0 = B::load_unaligned(bp), b1 = B::load_unaligned(bp + kLanes);
      const B b2 = B::load_unaligned(bp + 2 * kLanes), b3 = B::load_unaligned(bp + 3 * kLanes);
#pragma GCC unroll 4
      for (int i = 0; i < kRows; ++i) {
        const B ai(a[i * as + size_t(p) * ap]);
        acc[i][0] = acc[i][0] + ai * b0;
        acc[i][1] = acc[i][1] + ai * b1;
        acc[i][2] = acc[i][2] + ai * b2;
        acc[i][3] = acc[i][3] + ai * b3;
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[i][v].store_unaligned(c + i * ldc + v * kLanes);
    }
  }

  // A partial tile (rows < kRows or cols < kCols): the same sums, one row at a time, the
  // innermost loop over contiguous columns.
  static void edge(T* c, size_t ldc, const T* a, size_t as, size_t ap, const T* b, size_t ldb,
                   int rows, int cols, int P) {
    for (int i = 0; i < rows; ++i) {
      T* ci = c + i * ldc;
      for (int p = 0; p < P; ++p) {
        const T ai = a[i * as + size_t(p) * ap];
        const T* bp = b + size_t(p) * ldb;
        for (int j = 0; j < cols; ++j) ci[j] += ai * bp[j];
      }
    }
  }
};

template <typename T>
void accumulate_products(T* c, size_t ldc, const T* a, size_t as, size_t ap, const T* b, size_t ldb,
                         int M, int NC, int P) {
  using Tl = Tile<T>;
  const int row_tiles = (M + Tl::kRows - 1) / Tl::kRows;
  const int col_tiles = (NC + Tl::kCols - 1) / Tl::kCols;
#pragma omp parallel for collapse(2) schedule(static)
  for (int ti = 0; ti < row_tiles; ++ti) {
    for (int tj = 0; tj < col_tiles; ++tj) {
      const int i0 = ti * Tl::kRows, j0 = tj * Tl::kCols;
      const int rows = std::min(Tl::kRows, M - i0), cols = std::min(Tl::kCols, NC - j0);
      T* ct = c + size_t(i0) * ldc + j0;
      const T* at = a + size_t(i0) * as;
      if (rows == Tl::kRows && cols == Tl::kCols) {
        Tl::full(ct, ldc, at, as, ap, b + j0, ldb, P);
      } else {
        Tl::edge(ct, ldc, at, as, ap, b + j0, ldb, rows, cols, P);
      }
    }
  }
}

}  // namespace

template <typename T, typename W>
void linear_forward(T* out, const T* inp, const W* w, const T* b, T* w_t, int N, int K, int O) {
#pragma omp parallel for schedule(static)
  for (int k = 0; k < K; ++k) {
    for (int o = 0; o < O; ++o) w_t[size_t(k) * O + o] = static_cast<T>(w[size_t(o) * K + k]);
  }
#pragma omp parallel for schedule(static)
  for (int r = 0; r < N; ++r) {
    for (int o = 0; o < O; ++o) out[size_t(r) * O + o] = b ? b[o] : T(0);
  }
  // out(r,o) += Σ_k inp(r,k)·w_t(k,o)
  accumulate_products(out, size_t(O), inp, size_t(K), size_t(1), w_t, size_t(O), N, O, K);
}

template <typename T>
void linear_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, int N, int K,
                     int O) {
  // dinp(r,k) += Σ_o dout(r,o)·w(o,k)
  if (dinp) accumulate_products(dinp, size_t(K), dout, size_t(O), size_t(1), w, size_t(K), N, K, O);
  // dw(o,k) += Σ_r dout(r,o)·inp(r,k)
  accumulate_products(dw, size_t(K), dout, size_t(1), size_t(O), inp, size_t(K), O, K, N);
  if (!db) return;
#pragma omp parallel for schedule(static)
  for (int o = 0; o < O; ++o) {
    T sb = db[o];
    for (int r = 0; r < N; ++r) sb += dout[size_t(r) * O + o];
    db[o] = sb;
  }
}

template void linear_forward<float, float>(float*, const float*, const float*, const float*, float*,
                                           int, int, int);
template void linear_forward<double, double>(double*, const double*, const double*, const double*,
                                             double*, int, int, int);
template void linear_forward<float, f16>(float*, const float*, const f16*, const float*, float*,
                                         int, int, int);
template void linear_backward<float>(float*, float*, float*, const float*, const float*,
                                     const float*, int, int, int);
template void linear_backward<double>(double*, double*, double*, const double*, const double*,
                                      const double*, int, int, int);

}  // namespace reftrain
