#include "ops/activation.h"

#include <cmath>

namespace reftrain {

namespace {
template <typename T>
constexpr T kSqrt2OverPi = T(0.79788456080286535587989211986876);
template <typename T>
constexpr T kGeluCubic = T(0.044715);
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

#define REFTRAIN_INSTANTIATE(T)                        \
  template void gelu_forward<T>(T*, const T*, size_t); \
  template void gelu_backward<T>(T*, const T*, const T*, size_t);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)

}  // namespace reftrain
