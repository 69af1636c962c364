// Linear layer: a matmul with the weight in nn.Linear layout, plus bias. GPU twins:
// 03_linear.wgsl (forward) and 11_linear_backward.wgsl (both backward products).
//   forward:        out[r,o] = Σ_k inp[r,k]·w[o,k] + b[o]           out = inp·wᵀ + b
//   backward-data:  dinp[r,k] += Σ_o dout[r,o]·w[o,k]               dinp += dout·w
//   backward-weight dw[o,k] += Σ_r dout[r,o]·inp[r,k]               dw += doutᵀ·inp
//   bias gradient   db[o] += Σ_r dout[r,o]
// Shapes: inp [N,K], w [O,K], b [O] (may be null), out [N,O].
//
// The three products are one GEMM core (ops/matmul.h) with different operand layouts; the
// Matmul passed in picks the variant (naive, tiled, blocked, eigen) and holds its workspace.
// Each product's sums follow the core's contract: one FMA chain per output over the summed
// index in ascending order (from 0 in the forward, from the value already there in backward),
// the bias added after it. The bias gradient sums each column in ascending r with plain adds.
#pragma once

#include "ops/matmul.h"

namespace reftrain {

// W is the weight's storage type: T, or f16 in mixed precision (the fp16 mirror), widened to T
// exactly as the product packs it; the arithmetic is always in T.
template <typename T, typename W>
void linear_forward(const Matmul& mm, T* out, const T* inp, const W* w, const T* b, int N, int K,
                    int O);

// Accumulates (+=) into dinp, dw and db; dinp or db may be null when not wanted. Only the
// backward-data product reads w (f16 in mixed precision, widened as it is packed).
template <typename T, typename W>
void linear_backward(const Matmul& mm, T* dinp, T* dw, T* db, const T* dout, const T* inp,
                     const W* w, int N, int K, int O);

// linear_backward's two products on their own, for a caller that times them apart: dinp +=
// dout·w, and dw += doutᵀ·inp with db += Σ_r dout[r] (db may be null). The bias gradient has
// bias_backward's bits; the packed variants sum each column of dout while they pack doutᵀ for
// the weight gradient, instead of reading dout a second time. With accumulate false, the
// backward-data product starts every output from +0 instead of reading dinp: the bits of
// zeroing dinp first, without the pass over memory (a model's first writer of a gradient).
template <typename T, typename W>
void linear_backward_data(const Matmul& mm, T* dinp, const T* dout, const W* w, int N, int K, int O,
                          bool accumulate);
template <typename T>
void linear_backward_weight(const Matmul& mm, T* dw, T* db, const T* dout, const T* inp, int N,
                            int K, int O);

// db[o] += Σ_r dout[r,o], r = 0..N-1 in ascending order (one rounded add per term).
template <typename T>
void bias_backward(T* db, const T* dout, int N, int O);

}  // namespace reftrain
