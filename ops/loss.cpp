#include "ops/loss.h"

#include <cmath>
#include <cstddef>

namespace reftrain {

template <typename T>
void crossentropy_forward_backward(T* losses, T* dlogits, const T* logits, const int32_t* targets,
                                   int N, int V, int Vp, T dloss) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* z = logits + size_t(i) * Vp;
    T m = z[0];
    for (int j = 1; j < V; ++j) m = z[j] > m ? z[j] : m;
    T sum = 0;
    for (int j = 0; j < V; ++j) sum += std::exp(z[j] - m);
    const T lse = m + std::log(sum);
    losses[i] = lse - z[targets[i]];
    if (!dlogits) continue;
    T* dz = dlogits + size_t(i) * Vp;
    for (int j = 0; j < V; ++j) {
      const T onehot = j == targets[i] ? T(1) : T(0);
      dz[j] = (std::exp(z[j] - lse) - onehot) * dloss;
    }
    for (int j = V; j < Vp; ++j) dz[j] = 0;
  }
}

template void crossentropy_forward_backward<float>(float*, float*, const float*, const int32_t*,
                                                   int, int, int, float);
template void crossentropy_forward_backward<double>(double*, double*, const double*, const int32_t*,
                                                    int, int, int, double);

}  // namespace reftrain
