// The linear layer's three products in bf16 (what `--precision bf16` runs): the operands that
// enter a product are bf16 (the activation or gradient rounded by cast_f32_to_bf16, the weight's
// bf16 mirror), the sums are the canonical bf16 product's (ops/matmul_bf16.h) into f32, and the
// bias and its gradient stay f32. GPU twin: linear_bf16.wgsl.
//   forward:         out[r,o] = b[o] ⊕ Σ_k inp16[r,k]·w16[o,k]        out = b + inp16·w16ᵀ
//   backward-data:   dinp[r,k] ⊕= Σ_o dout16[r,o]·w16[o,k]           dinp += dout16·w16
//   backward-weight: dw[o,k] ⊕= Σ_r dout16[r,o]·inp16[r,k]           dw += dout16ᵀ·inp16
//                    db[o] += Σ_r dout[r,o]  (f32 dout, ascending r: linear.h's bias_backward)
// ⊕: the canonical order, which starts each output from its initial value (the bias, +0, or
// what the output holds) and adds one 32-term block at a time. PyTorch's CPU autocast makes the
// same split: nn.Linear's matmul in bf16, with f32 accumulation inside the product.
// Shapes: inp16 [N,K], w16 [O,K], b [O] (may be null), out [N,O], dout and dout16 [N,O].
//
// The MatmulBf16 passed in picks the path: Bf16Path::kReference is the reference (every output
// on its own, in the scalar canonical order), the others the fast versions; all give the same
// bits at any thread count (tests/ops/test_bf16.cpp).
#pragma once

#include "ops/bf16.h"
#include "ops/matmul_bf16.h"

namespace reftrain {

void linear_forward_bf16(MatmulBf16& mm, float* out, const bf16* inp16, const bf16* w16,
                         const float* b, int N, int K, int O);
// Accumulates (+=) into dinp; with accumulate false, starts every output from +0 instead of
// reading dinp (the bits of zeroing it first).
void linear_backward_data_bf16(MatmulBf16& mm, float* dinp, const bf16* dout16, const bf16* w16,
                               int N, int K, int O, bool accumulate);
// Accumulates (+=) into dw and, when not null, db.
void linear_backward_weight_bf16(MatmulBf16& mm, float* dw, float* db, const float* dout,
                                 const bf16* dout16, const bf16* inp16, int N, int K, int O);

}  // namespace reftrain
