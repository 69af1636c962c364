#include "ops/rope.h"

#include <cmath>
#include <cstddef>

namespace reftrain {

namespace {
// cos and sin of the angle for position t and pair i, in double, rounded once to T.
template <typename T>
void rope_angle(T* cos_a, T* sin_a, int t, int i, int hs, double theta) {
  const double f = std::pow(theta, -2.0 * i / hs);
  const double a = t * f;
  *cos_a = T(std::cos(a));
  *sin_a = T(std::sin(a));
}
}  // namespace

// Parallel over positions: the angle depends on (t, i) only, so each is computed once and applied
// to every batch row and head at that position.
template <typename T>
void rope_forward(T* out, const T* x, int B, int Tn, int NH, int hs, double theta) {
  const int half = hs / 2;
  const int C = NH * hs;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < Tn; ++t) {
    for (int i = 0; i < half; ++i) {
      T c, s;
      rope_angle(&c, &s, t, i, hs, theta);
      for (int b = 0; b < B; ++b) {
        for (int h = 0; h < NH; ++h) {
          const size_t k = (size_t(b) * Tn + t) * C + size_t(h) * hs + i;
          const T x1 = x[k], x2 = x[k + half];
          out[k] = x1 * c - x2 * s;
          out[k + half] = x2 * c + x1 * s;
        }
      }
    }
  }
}

template <typename T>
void rope_backward(T* dx, const T* dout, int B, int Tn, int NH, int hs, double theta) {
  const int half = hs / 2;
  const int C = NH * hs;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < Tn; ++t) {
    for (int i = 0; i < half; ++i) {
      T c, s;
      rope_angle(&c, &s, t, i, hs, theta);
      for (int b = 0; b < B; ++b) {
        for (int h = 0; h < NH; ++h) {
          const size_t k = (size_t(b) * Tn + t) * C + size_t(h) * hs + i;
          const T g1 = dout[k], g2 = dout[k + half];
          dx[k] += g1 * c + g2 * s;
          dx[k + half] += g2 * c - g1 * s;
        }
      }
    }
  }
}

#define REFTRAIN_INSTANTIATE(T)                                            \
  template void rope_forward<T>(T*, const T*, int, int, int, int, double); \
  template void rope_backward<T>(T*, const T*, int, int, int, int, double);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)

}  // namespace reftrain
