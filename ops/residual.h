// Residual add: the skip connection of every block. GPU twin: the residual entry point of
// 09_backward_ffn.wgsl.
//   forward:  out = a + b
//   backward: da += dout;  db += dout   (the gradient flows unchanged into both branches)
#pragma once

#include <cstddef>

namespace reftrain {

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n);

template <typename T>
void residual_backward(T* da, T* db, const T* dout, size_t n);

// Same as residual_forward except float only, 16 lanes at a time: bit-identical.
void residual_forward_fast(float* out, const float* a, const float* b, size_t n);
// Same as residual_backward except float only, 16 lanes at a time: bit-identical. With
// accumulate false, da and db are written (0 + dout, never read): the bits of zeroing them first.
void residual_backward_fast(float* da, float* db, const float* dout, size_t n,
                            bool accumulate = true);

}  // namespace reftrain
