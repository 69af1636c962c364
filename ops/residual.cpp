#include "ops/residual.h"

namespace reftrain {

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void residual_backward(T* da, T* db, const T* dout, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

#define REFTRAIN_INSTANTIATE(T)                                      \
  template void residual_forward<T>(T*, const T*, const T*, size_t); \
  template void residual_backward<T>(T*, T*, const T*, size_t);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)

}  // namespace reftrain
