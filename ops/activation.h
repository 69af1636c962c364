// FFN activations. GPU twin: 06_swiglu.wgsl (gelu and swiglu entry points).
// GELU, tanh form (GPT-2):  gelu(x) = ½·x·(1 + tanh(u)),  u = √(2/π)·(x + 0.044715·x³)
//   gelu'(x) = ½·(1 + tanh u) + ½·x·(1 - tanh² u)·√(2/π)·(1 + 3·0.044715·x²)
// SwiGLU (llama): σ(g) = 1/(1 + e^-g);  silu(g) = g·σ(g);  out = silu(gate)·up
//   silu'(g) = σ(g)·(1 + g·(1 - σ(g)))
//   dgate += dout·up·silu'(gate);  dup += dout·silu(gate)
// σ is evaluated without overflow for any |g|: e^-|g| ≤ 1 is the only exponential taken.
// Shapes: any, n elements (gate, up, out and their gradients all [n]).
#pragma once

#include <cstddef>

namespace reftrain {

template <typename T>
void gelu_forward(T* out, const T* x, size_t n);

// Accumulates (+=) into dx.
template <typename T>
void gelu_backward(T* dx, const T* x, const T* dout, size_t n);

// GELU, exact form (Hugging Face's "gelu", PyTorch's default nn.GELU()):
//   gelu_erf(x) = ½·x·(1 + erf(x/√2));  gelu_erf'(x) = ½·(1 + erf(x/√2)) + x·φ(x),
//   φ(x) = e^(−x²/2)/√(2π). The reference takes erf and the exponential in double, from a series
//   of + − × ÷ (not libm, whose last bits differ between ISAs), and rounds once: the same bits on
//   every ISA.
template <typename T>
void gelu_erf_forward(T* out, const T* x, size_t n);
// Accumulates (+=) into dx.
template <typename T>
void gelu_erf_backward(T* dx, const T* x, const T* dout, size_t n);

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, size_t n);

// Accumulates (+=) into dgate and dup.
template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, size_t n);

// The fast float path, used by the models: the same formulas and contracts with 16-lane xsimd
// code, explicit FMAs and simd/math.h's tanh and sigmoid (a few ulp from libm's): the same
// bits on every ISA, within the bound tests/ops/test_activation.cpp states of the reference.

// Same as gelu_forward except float only, 16 lanes at a time, simd/math.h's tanh.
void gelu_forward_fast(float* out, const float* x, size_t n);
// Same as gelu_backward except float only, 16 lanes at a time, simd/math.h's tanh. With
// accumulate false (here and in the other fast backwards), the gradient is written, each element
// from +0, never read: the bits of zeroing it first.
void gelu_backward_fast(float* dx, const float* x, const float* dout, size_t n,
                        bool accumulate = true);
// Same as gelu_erf_forward except float only, 16 lanes at a time, erf from a rational
// approximation in t = 1/(1 + 0.3275911·|x|) times simd/math.h's e^(−x²) (Abramowitz & Stegun
// 7.1.26: |error| < 1.5e-7): within the bound tests/ops/test_activation.cpp states.
void gelu_erf_forward_fast(float* out, const float* x, size_t n);
// Same as gelu_erf_backward except as gelu_erf_forward_fast.
void gelu_erf_backward_fast(float* dx, const float* x, const float* dout, size_t n,
                            bool accumulate = true);
// Same as swiglu_forward except float only, 16 lanes at a time, simd/math.h's sigmoid.
void swiglu_forward_fast(float* out, const float* gate, const float* up, size_t n);
// Same as swiglu_backward except float only, 16 lanes at a time, simd/math.h's sigmoid.
void swiglu_backward_fast(float* dgate, float* dup, const float* dout, const float* gate,
                          const float* up, size_t n, bool accumulate = true);

}  // namespace reftrain
