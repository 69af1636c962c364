// The matmul family: one GEMM core, C (+)= op(A)·op(B) (+ bias), that serves all three products
// of a linear layer (ops/linear.h), in four variants selectable at run time. GPU twins:
// 03_linear.wgsl and 11_linear_backward.wgsl (naive, workgroup-tiled 16×16, 4×4 register-blocked).
//
//   C[i,j] = (accumulate ? C[i,j] : 0) + Σ_p op(A)[i,p]·op(B)[p,j]  (+ bias[j])
//   a_sums[i] += Σ_p op(A)[i,p]                                        (when a_sums is given)
//   op(A) is M×K, op(B) is K×N, C is M×N row-major (row stride ldc).
//   op(X) = X, stored row-major with row stride ld, or Xᵀ (Trans::kYes): X stored transposed.
//
// Numerical contract, the same for naive, tiled and blocked (so they are bit-identical): each
// output is one chain of fused multiply-adds, acc = fma(A[i,p], B[p,j], acc) for p = 0..K-1 in
// ascending order, starting from the initial accumulator (C or +0); then, in the epilogue,
// C = acc + bias[j] (one rounded add). No sum is split between threads or SIMD lanes, so the
// result does not depend on the thread count or the vector width (AVX-512 or AVX2). eigen
// (Eigen's product on the same buffers) sums in its own order: equal within a tolerance only.
//
// Variants:
//   naive    the textbook triple loop, one output at a time (the oracle, the teaching version);
//   tiled    cache blocking: K and N cut into blocks that fit L2, both operands packed into
//            contiguous panels, each output row updated one SIMD vector at a time — the CPU
//            twin of workgroup-shared 16×16 tiles;
//   blocked  the same packing plus a register micro-kernel of 4 rows × 4 SIMD vectors (16
//            accumulators: 4×64 floats on AVX-512), the CPU twin of the 4×4 register block;
//   eigen    Eigen's matrix product on the same buffers (baseline and second oracle).
// B may be f16 (the mixed-precision weight mirror): widened to f32 exactly as it is packed.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace reftrain {

enum class MatmulKind { kNaive, kTiled, kBlocked, kEigen };

enum class Trans { kNo, kYes };

// One product. A(i,p) = a[i·lda + p] (kNo) or a[p·lda + i] (kYes); B(p,j) = b[p·ldb + j] (kNo)
// or b[j·ldb + p] (kYes: nn.Linear's [out,in] weight layout read as its transpose).
template <typename T, typename BT = T>
struct Gemm {
  int M = 0, N = 0, K = 0;
  const T* a = nullptr;
  Trans ta = Trans::kNo;
  size_t lda = 0;
  const BT* b = nullptr;
  Trans tb = Trans::kNo;
  size_t ldb = 0;
  T* c = nullptr;
  size_t ldc = 0;
  bool accumulate = false;  // C += op(A)·op(B), else C = op(A)·op(B)
  const T* bias = nullptr;  // [N], added in the epilogue; may be null
  // [M], may be null: a_sums[i] += op(A)[i,p] for p = 0..K-1 in ascending order, one rounded
  // add per term (a weight gradient's bias gradient, db[o] += Σ_r dout[r,o]: the packed
  // variants add the terms while they pack op(A), instead of a second pass over it).
  T* a_sums = nullptr;
};

// A variant with its workspace: packing buffers (tiled, blocked: op(B)'s shared by the threads,
// op(A)'s one per thread) and, for eigen with f16 weights, one widening buffer, all allocated
// and touched at construction, so nothing allocates inside a training step. Products run on at
// most `threads` OpenMP threads.
class Matmul {
 public:
  // threads ≤ 0 means omp_get_max_threads(). widen_elems: the largest f16 operand (K·N) an
  // eigen product will be given (0: none).
  explicit Matmul(MatmulKind kind, int threads = 0, size_t widen_elems = 0);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  MatmulKind kind() const { return kind_; }
  int threads() const { return threads_; }
  // Bytes such a Matmul allocates (what estimate_memory counts).
  static size_t workspace_bytes(MatmulKind kind, int threads, size_t widen_elems);
  // Bytes Eigen itself allocates, on each thread and for the length of one product, to pack an
  // eigen product of depth K (estimate_memory counts them too). Eigen sizes its blocks from this
  // machine's cache sizes, so the figure is the machine's.
  static size_t eigen_packing_bytes(int K);

  // Instantiated for <float, float>, <float, f16> and <double, double>.
  template <typename T, typename BT>
  void run(const Gemm<T, BT>& g) const;

 private:
  struct Buffer;
  MatmulKind kind_;
  int threads_;
  size_t widen_elems_;
  std::unique_ptr<Buffer> buf_;
};

}  // namespace reftrain
