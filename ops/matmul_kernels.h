// The matmul family's variants behind Matmul::run (ops/matmul.h); internal to ops/matmul*.cpp.
#pragma once

#include <cstddef>

#include "ops/matmul.h"

namespace reftrain::matmul_detail {

// C = (accumulate ? C : 0) + bias: the whole product when K = 0 (an empty sum).
template <typename T, typename BT>
void epilogue_only(const Gemm<T, BT>& g);

// g.a_sums (when given) += the sums of op(A)'s rows (ops/matmul.cpp): the pass of the variants
// (naive, eigen, the packed ones' gemv path) that do not add them while they pack op(A).
template <typename T, typename BT>
void add_a_sums(const Gemm<T, BT>& g, int threads);

// naive: ops/matmul.cpp. Parallel over rows of C.
template <typename T, typename BT>
void gemm_naive(const Gemm<T, BT>& g, int threads);

// tiled (register_blocked = false) and blocked: ops/matmul_blocked.cpp. `workspace` holds
// packed_workspace_bytes(threads) bytes, 64-byte aligned: the packed op(B) the threads share,
// then one slice per thread.
size_t packed_workspace_bytes(int threads);
template <typename T, typename BT>
void gemm_packed(const Gemm<T, BT>& g, bool register_blocked, unsigned char* workspace,
                 int threads);

// eigen: ops/matmul_eigen.cpp. `widen` holds K·N floats when BT is f16 (unused otherwise).
template <typename T, typename BT>
void gemm_eigen(const Gemm<T, BT>& g, float* widen, int threads);
// Bytes Eigen allocates to pack one chunk of an f32 eigen product of depth K.
size_t eigen_packing_bytes(int K);

}  // namespace reftrain::matmul_detail
