#include "ops/linear_bf16.h"

#include "ops/linear.h"

namespace reftrain {

// out = b + inp16·w16ᵀ: A = inp16 [N,K], B(k,o) = w16[o,k] (transposed).
void linear_forward_bf16(MatmulBf16& mm, float* out, const bf16* inp16, const bf16* w16,
                         const float* b, int N, int K, int O) {
  mm.run({N, O, K, inp16, Trans::kNo, size_t(K), w16, Trans::kYes, size_t(K), out, size_t(O), false,
          b});
}

// dinp += dout16·w16: A = dout16 [N,O], B = w16 [O,K].
void linear_backward_data_bf16(MatmulBf16& mm, float* dinp, const bf16* dout16, const bf16* w16,
                               int N, int K, int O) {
  mm.run({N, K, O, dout16, Trans::kNo, size_t(O), w16, Trans::kNo, size_t(K), dinp, size_t(K), true,
          nullptr});
}

// dw += dout16ᵀ·inp16: A(o,r) = dout16[r,o] (transposed), B = inp16 [N,K].
void linear_backward_weight_bf16(MatmulBf16& mm, float* dw, float* db, const float* dout,
                                 const bf16* dout16, const bf16* inp16, int N, int K, int O) {
  mm.run({O, K, N, dout16, Trans::kYes, size_t(O), inp16, Trans::kNo, size_t(K), dw, size_t(K),
          true, nullptr});
  if (db) bias_backward(db, dout, N, O);
}

}  // namespace reftrain
