// LayerNorm over the last axis (gpt2 family). GPU twin: 02_norm.wgsl.
//   forward:  mean = Σx/C;  var = Σ(x-mean)²/C (biased);  rstd = 1/√(var + eps)
//             n = (x - mean)·rstd;  out = n·w + b
//   backward: dn = dout·w;  dx += rstd·(dn - mean(dn) - n·mean(dn·n))
//             dw += Σ_rows dout·n;  db += Σ_rows dout
// Shapes: x/out/dout/dx [N,C], w/b/dw/db [C], mean/rstd [N]. eps = 1e-5.
//
// RMSNorm over the last axis (llama family). GPU twin: 02_norm.wgsl.
//   forward:  rstd = 1/√(Σx²/C + eps);  n = x·rstd;  out = n·w          (no mean, no bias)
//   backward: dn = dout·w;  dx += rstd·(dn - n·mean(dn·n))
//             dw += Σ_rows dout·n
// Shapes: x/out/dout/dx [N,C], w/dw [C], rstd [N]. eps = 1e-5.
#pragma once

namespace reftrain {

constexpr double kLayerNormEps = 1e-5;
constexpr double kRmsNormEps = 1e-5;

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int N, int C);

// Accumulates (+=) into dx, dw, db. dx is parallel over rows; dw and db are parallel over
// channels, each summing its rows in order, so no result depends on the thread count.
template <typename T>
void layernorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w, const T* mean,
                        const T* rstd, int N, int C);

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int N, int C);

// Accumulates (+=) into dx and dw. dx is parallel over rows; dw is parallel over channels, each
// summing its rows in order, so no result depends on the thread count.
template <typename T>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd, int N,
                      int C);

// The fast float path, used by the models: the same math and contracts (accumulating, any
// thread count) with 16-lane xsimd code. Row sums (mean, variance, Σx², Σdn, Σdn·n) run in the
// fixed order of simd/reduce.h with explicit FMAs, so the result is the same on every ISA but
// differs from the reference's sequential sums by rounding (tests/ops/test_norm.cpp states the
// bound); the dw/db column sums are bit-identical to the reference's.

// Same as layernorm_forward except float only, 16 lanes at a time, fixed-order row sums.
void layernorm_forward_fast(float* out, float* mean, float* rstd, const float* x, const float* w,
                            const float* b, int N, int C);
// Same as layernorm_backward except float only, 16 lanes at a time, fixed-order row sums.
void layernorm_backward_fast(float* dx, float* dw, float* db, const float* dout, const float* x,
                             const float* w, const float* mean, const float* rstd, int N, int C);
// Same as rmsnorm_forward except float only, 16 lanes at a time, fixed-order row sums.
void rmsnorm_forward_fast(float* out, float* rstd, const float* x, const float* w, int N, int C);
// Same as rmsnorm_backward except float only, 16 lanes at a time, fixed-order row sums.
void rmsnorm_backward_fast(float* dx, float* dw, const float* dout, const float* x, const float* w,
                           const float* rstd, int N, int C);

}  // namespace reftrain
