#include "ops/linear.h"

#include <cstddef>

#include "ops/cast.h"

namespace reftrain {

template <typename T, typename W>
void linear_forward(T* out, const T* inp, const W* w, const T* b, T* w_t, int N, int K, int O) {
#pragma omp parallel for schedule(static)
  for (int k = 0; k < K; ++k) {
    for (int o = 0; o < O; ++o) w_t[size_t(k) * O + o] = static_cast<T>(w[size_t(o) * K + k]);
  }
#pragma omp parallel for schedule(static)
  for (int r = 0; r < N; ++r) {
    T* y = out + size_t(r) * O;
    const T* x = inp + size_t(r) * K;
    for (int o = 0; o < O; ++o) y[o] = b ? b[o] : T(0);
    for (int k = 0; k < K; ++k) {
      const T xk = x[k];
      const T* wk = w_t + size_t(k) * O;
      for (int o = 0; o < O; ++o) y[o] += xk * wk[o];
    }
  }
}

template <typename T>
void linear_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, int N, int K,
                     int O) {
  if (dinp) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; ++r) {
      T* dx = dinp + size_t(r) * K;
      const T* dy = dout + size_t(r) * O;
      for (int o = 0; o < O; ++o) {
        const T d = dy[o];
        const T* wo = w + size_t(o) * K;
        for (int k = 0; k < K; ++k) dx[k] += d * wo[k];
      }
    }
  }
#pragma omp parallel for schedule(static)
  for (int o = 0; o < O; ++o) {
    T* dwo = dw + size_t(o) * K;
    T sb = db ? db[o] : T(0);
    for (int r = 0; r < N; ++r) {
      const T d = dout[size_t(r) * O + o];
      const T* x = inp + size_t(r) * K;
      for (int k = 0; k < K; ++k) dwo[k] += d * x[k];
      sb += d;
    }
    if (db) db[o] = sb;
  }
}

template void linear_forward<float, float>(float*, const float*, const float*, const float*, float*,
                                           int, int, int);
template void linear_forward<double, double>(double*, const double*, const double*, const double*,
                                             double*, int, int, int);
template void linear_forward<float, f16>(float*, const float*, const f16*, const float*, float*,
                                         int, int, int);
template void linear_backward<float>(float*, float*, float*, const float*, const float*,
                                     const float*, int, int, int);
template void linear_backward<double>(double*, double*, double*, const double*, const double*,
                                      const double*, int, int, int);

}  // namespace reftrain
