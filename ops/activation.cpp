#include "ops/activation.h"

#include <cmath>

namespace reftrain {

namespace {
template <typename T>
constexpr T kSqrt2OverPi = T(0.79788456080286535587989211986876);
template <typename T>
constexpr T kGeluCubic = T(0.044715);

// σ(g) = 1/(1 + e^-g), written so the exponential never overflows: for g < 0 it uses the
// equivalent e^g/(1 + e^g). σ(-1000) is then 0 and σ(1000) is 1, never inf/inf.
template <typename T>
T sigmoid(T g) {
  if (g >= T(0)) return T(1) / (T(1) + std::exp(-g));
  const T e = std::exp(g);
  return e / (T(1) + e);
}
}  // namespace

template <typename T>
void gelu_forward(T* out, const T* x, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T xi = x[i];
    const T u = kSqrt2OverPi<T> * (xi + kGeluCubic<T> * xi * xi * xi);
    out[i] = T(0.5) * xi * (T(1) + std::tanh(u));
  }
}

template <typename T>
void gelu_backward(T* dx, const T* x, const T* dout, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T xi = x[i];
    const T u = kSqrt2OverPi<T> * (xi + kGeluCubic<T> * xi * xi * xi);
    const T th = std::tanh(u);
    const T du = kSqrt2OverPi<T> * (T(1) + T(3) * kGeluCubic<T> * xi * xi);
    const T grad = T(0.5) * (T(1) + th) + T(0.5) * xi * (T(1) - th * th) * du;
    dx[i] += grad * dout[i];
  }
}

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T g = gate[i];
    const T silu = g * sigmoid(g);
    out[i] = silu * up[i];
  }
}

template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T g = gate[i];
    const T sg = sigmoid(g);
    const T silu = g * sg;
    const T dsilu = sg * (T(1) + g * (T(1) - sg));
    dgate[i] += dout[i] * up[i] * dsilu;
    dup[i] += dout[i] * silu;
  }
}

#define REFTRAIN_INSTANTIATE(T)                                    \
  template void gelu_forward<T>(T*, const T*, size_t);             \
  template void gelu_backward<T>(T*, const T*, const T*, size_t);  \
  template void swiglu_forward<T>(T*, const T*, const T*, size_t); \
  template void swiglu_backward<T>(T*, T*, const T*, const T*, const T*, size_t);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)

}  // namespace reftrain
