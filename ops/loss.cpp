#include "ops/loss.h"

#include <cmath>
#include <cstddef>

namespace reftrain {

template <typename T>
void crossentropy_forward_backward(T* losses, T* dlogits, const T* logits, const int32_t* targets,
                                   int N, int V, int Vp, T dloss, T z) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* x = logits + size_t(i) * Vp;
    T m = x[0];
    for (int j = 1; j < V; ++j) m = x[j] > m ? x[j] : m;
    T sum = 0;
    for (int j = 0; j < V; ++j) sum += std::exp(x[j] - m);
    const T lse = m + std::log(sum);
    T loss = lse - x[targets[i]];
    if (z != T(0)) loss += z * lse * lse;
    losses[i] = loss;
    if (!dlogits) continue;
    T* dx = dlogits + size_t(i) * Vp;
    for (int j = 0; j < V; ++j) {
      const T p = std::exp(x[j] - lse);
      const T onehot = j == targets[i] ? T(1) : T(0);
      T g = (p - onehot) * dloss;
      if (z != T(0)) g += T(2) * z * lse * p * dloss;
      dx[j] = g;
    }
    for (int j = V; j < Vp; ++j) dx[j] = 0;
  }
}

template void crossentropy_forward_backward<float>(float*, float*, const float*, const int32_t*,
                                                   int, int, int, float, float);
template void crossentropy_forward_backward<double>(double*, double*, const double*, const int32_t*,
                                                    int, int, int, double, double);

}  // namespace reftrain
