// The eigen variant of the matmul family (ops/matmul.h): Eigen's product on the same buffers,
// mapped without copying (a transposed operand is a column-major view).
//
// Determinism: Eigen's blocking (its K block) depends on the product's shape and, when Eigen
// threads a product itself, on the thread count. So C is cut into fixed chunks, the same for
// any thread count, and each chunk is one single-threaded Eigen product: the same sums in the
// same order whoever computes it. Eigen sums each K block from zero and then adds it to C, so
// its results differ from the other variants' single FMA chain within rounding (tests hold
// them to a tolerance). Eigen allocates its packing buffers per product, the one variant that
// allocates inside a step; estimate_memory counts them (eigen_packing_bytes).
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <type_traits>

#include "ops/cast.h"
#include "ops/matmul_kernels.h"

namespace reftrain::matmul_detail {

namespace {

constexpr int kChunkRows = 256, kChunkCols = 128;

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ConstMap = Eigen::Map<const RowMat<T>, 0, Eigen::OuterStride<>>;

// C chunk (rows × cols at i0, j0) = or += op(A)·op(B), + bias.
template <typename T, typename AMat, typename BMat>
void chunk_product(const Gemm<T, T>& g, int i0, int j0, int rows, int cols, const AMat& a,
                   const BMat& b) {
  Eigen::Map<RowMat<T>, 0, Eigen::OuterStride<>> c(g.c + size_t(i0) * g.ldc + j0, rows, cols,
                                                   Eigen::OuterStride<>(g.ldc));
  if (g.accumulate) {
    c.noalias() += a * b;
  } else {
    c.noalias() = a * b;
  }
  if (g.bias) {
    c.rowwise() += Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(g.bias + j0, cols);
  }
}

template <typename T>
void chunk(const Gemm<T, T>& g, int i0, int j0, int rows, int cols) {
  const Eigen::OuterStride<> sa(g.lda), sb(g.ldb);
  if (g.ta == Trans::kNo) {
    const ConstMap<T> a(g.a + size_t(i0) * g.lda, rows, g.K, sa);
    if (g.tb == Trans::kNo) {
      chunk_product(g, i0, j0, rows, cols, a, ConstMap<T>(g.b + j0, g.K, cols, sb));
    } else {
      chunk_product(g, i0, j0, rows, cols, a,
                    ConstMap<T>(g.b + size_t(j0) * g.ldb, cols, g.K, sb).transpose());
    }
  } else {
    const auto a = ConstMap<T>(g.a + i0, g.K, rows, sa).transpose();
    if (g.tb == Trans::kNo) {
      chunk_product(g, i0, j0, rows, cols, a, ConstMap<T>(g.b + j0, g.K, cols, sb));
    } else {
      chunk_product(g, i0, j0, rows, cols, a,
                    ConstMap<T>(g.b + size_t(j0) * g.ldb, cols, g.K, sb).transpose());
    }
  }
}

template <typename T>
void gemm_eigen_same(const Gemm<T, T>& g, int threads) {
  const int cm = (g.M + kChunkRows - 1) / kChunkRows, cn = (g.N + kChunkCols - 1) / kChunkCols;
#pragma omp parallel num_threads(std::max(1, std::min(threads, omp_get_max_threads())))
  {
    omp_set_num_threads(1);  // inside this region: Eigen must not thread a chunk itself
#pragma omp for schedule(static)
    for (int k = 0; k < cm * cn; ++k) {
      const int i0 = k / cn * kChunkRows, j0 = k % cn * kChunkCols;
      chunk(g, i0, j0, std::min(kChunkRows, g.M - i0), std::min(kChunkCols, g.N - j0));
    }
  }
}

}  // namespace

template <typename T, typename BT>
void gemm_eigen(const Gemm<T, BT>& g, float* widen, int threads) {
  if (g.M == 0 || g.N == 0) return;
  if (g.K == 0) return epilogue_only(g);
  if constexpr (std::is_same_v<T, BT>) {
    gemm_eigen_same(g, threads);
  } else {
    // Eigen has no f16 × f32 product: widen the stored operand into a dense copy first.
    const bool rows_are_k = g.tb == Trans::kNo;
    const int nrows = rows_are_k ? g.K : g.N, ncols = rows_are_k ? g.N : g.K;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < nrows; ++r) {
      for (int j = 0; j < ncols; ++j) {
        widen[size_t(r) * ncols + j] = static_cast<float>(g.b[size_t(r) * g.ldb + j]);
      }
    }
    Gemm<T, T> w{g.M,  g.N,           g.K, g.a,   g.ta,         g.lda, widen,
                 g.tb, size_t(ncols), g.c, g.ldc, g.accumulate, g.bias};
    gemm_eigen_same(w, threads);
  }
}

size_t eigen_packing_bytes(int K) {
  // The blocking Eigen's product builds for a full chunk of a row-major C (gemm_blocking_space
  // is what GeneralMatrixMatrix.h constructs; it allocates nothing until the product packs).
  const Eigen::internal::gemm_blocking_space<Eigen::RowMajor, float, float, Eigen::Dynamic,
                                             Eigen::Dynamic, Eigen::Dynamic>
      blocking(kChunkRows, kChunkCols, K, 1, true);
  return size_t(blocking.mc() * blocking.kc() + blocking.kc() * blocking.nc()) * sizeof(float);
}

template void gemm_eigen<float, float>(const Gemm<float, float>&, float*, int);
template void gemm_eigen<float, f16>(const Gemm<float, f16>&, float*, int);
template void gemm_eigen<double, double>(const Gemm<double, double>&, float*, int);

}  // namespace reftrain::matmul_detail
