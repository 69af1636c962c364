// The matmul family's front door (ops/matmul.h): names, the workspace, the dispatch, and the
// naive variant. The packed variants are in ops/matmul_blocked.cpp, Eigen's in matmul_eigen.cpp.
#include "ops/matmul.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <type_traits>

#include "ops/cast.h"
#include "ops/matmul_kernels.h"

namespace reftrain {

// The workspace: one 64-byte-aligned allocation, zeroed (so its pages are resident from the
// start and a run's peak memory does not grow in its first step).
struct Matmul::Buffer {
  unsigned char* data = nullptr;
  explicit Buffer(size_t bytes) {
    if (bytes == 0) return;
    data = static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    if (!data) throw std::bad_alloc();
    std::memset(data, 0, bytes);
  }
  ~Buffer() { std::free(data); }
};

size_t Matmul::workspace_bytes(MatmulKind kind, int threads, size_t widen_elems) {
  switch (kind) {
    case MatmulKind::kTiled:
    case MatmulKind::kBlocked:
      return matmul_detail::packed_workspace_bytes(threads);
    case MatmulKind::kEigen:
      return widen_elems * sizeof(float);
    case MatmulKind::kNaive:
      break;
  }
  return 0;
}

size_t Matmul::eigen_packing_bytes(int K) {
  return matmul_detail::eigen_packing_bytes(K);
}

Matmul::Matmul(MatmulKind kind, int threads, size_t widen_elems)
    : kind_(kind),
      threads_(threads > 0 ? threads : omp_get_max_threads()),
      widen_elems_(widen_elems),
      buf_(std::make_unique<Buffer>(workspace_bytes(kind, threads_, widen_elems))) {}

Matmul::~Matmul() = default;

template <typename T, typename BT>
void Matmul::run(const Gemm<T, BT>& g) const {
  switch (kind_) {
    case MatmulKind::kNaive:
      matmul_detail::gemm_naive(g, threads_);
      return matmul_detail::add_a_sums(g, threads_);
    case MatmulKind::kTiled:
    case MatmulKind::kBlocked:
      return matmul_detail::gemm_packed(g, kind_ == MatmulKind::kBlocked, buf_->data, threads_);
    case MatmulKind::kEigen:
      if (!std::is_same_v<T, BT> && size_t(g.K) * size_t(g.N) > widen_elems_) {
        throw std::logic_error("Matmul(eigen): an f16 operand larger than its widening buffer");
      }
      matmul_detail::gemm_eigen(g, reinterpret_cast<float*>(buf_->data), threads_);
      return matmul_detail::add_a_sums(g, threads_);
  }
}

template void Matmul::run<float, float>(const Gemm<float, float>&) const;
template void Matmul::run<float, f16>(const Gemm<float, f16>&) const;
template void Matmul::run<double, double>(const Gemm<double, double>&) const;

namespace matmul_detail {

template <typename T, typename BT>
void epilogue_only(const Gemm<T, BT>& g) {
  for (int i = 0; i < g.M; ++i) {
    for (int j = 0; j < g.N; ++j) {
      T& c = g.c[size_t(i) * g.ldc + j];
      const T acc = g.accumulate ? c : T(0);
      c = g.bias ? acc + g.bias[j] : acc;
    }
  }
}

// a_sums[i] += op(A)[i,p], p ascending: one chain per row of op(A), the rows split between the
// threads. For a transposed A (a weight gradient's doutᵀ) each thread walks the stored rows p
// over its own columns i, so the reads are contiguous and each chain still runs in p order.
template <typename T, typename BT>
void add_a_sums(const Gemm<T, BT>& g, int threads) {
  if (!g.a_sums) return;
  const int nt = std::max(1, std::min(threads, omp_get_max_threads()));
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int i0 = int(long(g.M) * t / n), i1 = int(long(g.M) * (t + 1) / n);
    if (g.ta == Trans::kYes) {
      for (int p = 0; p < g.K; ++p) {
        const T* row = g.a + size_t(p) * g.lda;
        for (int i = i0; i < i1; ++i) g.a_sums[i] += row[i];
      }
    } else {
      for (int i = i0; i < i1; ++i) {
        const T* row = g.a + size_t(i) * g.lda;
        T s = g.a_sums[i];
        for (int p = 0; p < g.K; ++p) s += row[p];
        g.a_sums[i] = s;
      }
    }
  }
}

// The textbook loop: every output on its own, its FMA chain over p in ascending order.
template <typename T, typename BT>
void gemm_naive(const Gemm<T, BT>& g, int threads) {
  auto A = [&g](int i, int p) {
    return g.ta == Trans::kNo ? g.a[size_t(i) * g.lda + p] : g.a[size_t(p) * g.lda + i];
  };
  auto B = [&g](int p, int j) {
    return static_cast<T>(g.tb == Trans::kNo ? g.b[size_t(p) * g.ldb + j]
                                             : g.b[size_t(j) * g.ldb + p]);
  };
#pragma omp parallel for schedule(static) num_threads(std::min(threads, omp_get_max_threads()))
  for (int i = 0; i < g.M; ++i) {
    for (int j = 0; j < g.N; ++j) {
      T& c = g.c[size_t(i) * g.ldc + j];
      T acc = g.accumulate ? c : T(0);
      for (int p = 0; p < g.K; ++p) acc = std::fma(A(i, p), B(p, j), acc);
      c = g.bias ? acc + g.bias[j] : acc;
    }
  }
}

template void epilogue_only<float, float>(const Gemm<float, float>&);
template void epilogue_only<float, f16>(const Gemm<float, f16>&);
template void epilogue_only<double, double>(const Gemm<double, double>&);
template void add_a_sums<float, float>(const Gemm<float, float>&, int);
template void add_a_sums<float, f16>(const Gemm<float, f16>&, int);
template void add_a_sums<double, double>(const Gemm<double, double>&, int);
template void gemm_naive<float, float>(const Gemm<float, float>&, int);
template void gemm_naive<float, f16>(const Gemm<float, f16>&, int);
template void gemm_naive<double, double>(const Gemm<double, double>&, int);

}  // namespace matmul_detail

}  // namespace reftrain
