// FFN activations. GPU twin: 06_swiglu.wgsl (gelu entry points).
// GELU, tanh form (GPT-2):  gelu(x) = ½·x·(1 + tanh(u)),  u = √(2/π)·(x + 0.044715·x³)
//   gelu'(x) = ½·(1 + tanh u) + ½·x·(1 - tanh² u)·√(2/π)·(1 + 3·0.044715·x²)
// Shapes: any, n elements.
#pragma once

#include <cstddef>

namespace reftrain {

template <typename T>
void gelu_forward(T* out, const T* x, size_t n);

// Accumulates (+=) into dx.
template <typename T>
void gelu_backward(T* dx, const T* x, const T* dout, size_t n);

}  // namespace reftrain
