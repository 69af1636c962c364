// The fast kernels compiled a second time for x86-64-v3 (AVX2 + FMA), with namespace reftrain
// renamed to reftrain_avx2 (tests/CMakeLists.txt: ops_fast_avx2), so one test binary can hold the
// AVX2 code and the native code side by side and require the same bits from both.
//
// Their declarations are the real ops headers, not copies typed here: tests/CMakeLists.txt copies
// each one into the build tree without its #pragma once (which would skip a header already
// included for namespace reftrain), and they are included below under the same rename the object
// library is compiled with. A changed signature, default argument or enum changes both sides.
#pragma once

#include <cstddef>
#include <cstdint>

#define reftrain reftrain_avx2
#include "avx2/ops/activation.h"
#include "avx2/ops/attention.h"
#include "avx2/ops/loss.h"
#include "avx2/ops/norm.h"
#undef reftrain

// The x86-64-v3 build's bf16 product on its emulated path (tests/common/bf16_avx2_product.cpp), in
// plain types: A and B as bf16 bit patterns, ta/tb/causal as the enums' values (ops/matmul_bf16.h).
namespace reftrain_avx2 {
void bf16_emulated_product(int M, int N, int K, const uint16_t* a, int ta, size_t lda,
                           const uint16_t* b, int tb, size_t ldb, float* c, size_t ldc,
                           bool accumulate, const float* bias, int causal, int threads);
}
