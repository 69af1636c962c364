// Linear layer: a matmul with the weight in nn.Linear layout, plus bias. GPU twins:
// 03_linear.wgsl (forward) and 11_linear_backward.wgsl (both backward products).
//   forward:        out[r,o] = b[o] + Σ_k inp[r,k]·w[o,k]        out = inp·wᵀ + b
//   backward-data:  dinp[r,k] += Σ_o dout[r,o]·w[o,k]             dinp += dout·w
//   backward-weight dw[o,k] += Σ_r dout[r,o]·inp[r,k]             dw += doutᵀ·inp
//                   db[o] += Σ_r dout[r,o]
// Shapes: inp [N,K], w [O,K], b [O] (may be null), out [N,O].
//
// Every sum runs over its index in ascending order, starting from the bias (forward) or the
// value already in the accumulator (backward), with each product and sum rounded on its own:
// the textbook loops' results bit for bit, for any thread count. The three products share one
// register-blocked kernel (tiles of 4 rows × 4 SIMD vectors of outputs, each tile's
// accumulators in registers over the whole sum) — see ops/linear.cpp.
#pragma once

namespace reftrain {

// W is the weight's storage type: T, or f16 in mixed precision (the fp16 mirror), widened to T
// exactly as it is loaded; the arithmetic is always in T.
//
// w_t is caller scratch of K·O elements of T: the forward transposes (and widens) w into it once
// per call so that each row's outputs are updated together, one k at a time.
template <typename T, typename W>
void linear_forward(T* out, const T* inp, const W* w, const T* b, T* w_t, int N, int K, int O);

// Accumulates (+=) into dinp, dw and db; dinp or db may be null when not wanted. Only the
// backward-data product reads w; in mixed precision the caller widens the fp16 mirror into a
// packed fp32 copy first (cast_f16_to_f32), as linear_forward does while transposing.
template <typename T>
void linear_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, int N, int K,
                     int O);

}  // namespace reftrain
