// Compiled into ops_fast_avx2 only (-march=x86-64-v3, namespace reftrain renamed reftrain_avx2):
// the bf16 product of that build on its emulated path, behind a signature of plain types that
// tests/common/avx2_kernels.h declares for the native test binary.
#include <cstddef>
#include <cstdint>

#include "ops/matmul_bf16.h"

namespace reftrain {

void bf16_emulated_product(int M, int N, int K, const uint16_t* a, int ta, size_t lda,
                           const uint16_t* b, int tb, size_t ldb, float* c, size_t ldc,
                           bool accumulate, const float* bias, int causal, int threads) {
  const GemmBf16 g{M,
                   N,
                   K,
                   reinterpret_cast<const bf16*>(a),
                   Trans(ta),
                   lda,
                   reinterpret_cast<const bf16*>(b),
                   Trans(tb),
                   ldb,
                   c,
                   ldc,
                   accumulate,
                   bias,
                   Bf16Causal(causal)};
  MatmulBf16(Bf16Path::kEmulated, threads).run(g);
}

}  // namespace reftrain
