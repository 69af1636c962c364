#include "ops/attention.h"

#include <cmath>
#include <cstddef>

namespace reftrain {

template <typename T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  const size_t C3 = size_t(3) * C;
#pragma omp parallel for collapse(3) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < Tn; ++t) {
        const T* q = qkv + (size_t(b) * Tn + t) * C3 + size_t(h) * hs;
        T* p = att + ((size_t(b) * NH + h) * Tn + t) * Tn;
        T maxv = -INFINITY;
        for (int u = 0; u <= t; ++u) {
          const T* k = qkv + (size_t(b) * Tn + u) * C3 + C + size_t(h) * hs;
          T s = 0;
          for (int i = 0; i < hs; ++i) s += q[i] * k[i];
          p[u] = s * scale;
          if (p[u] > maxv) maxv = p[u];
        }
        T sum = 0;
        for (int u = 0; u <= t; ++u) {
          p[u] = std::exp(p[u] - maxv);
          sum += p[u];
        }
        const T inv = T(1) / sum;
        for (int u = 0; u <= t; ++u) p[u] *= inv;
        for (int u = t + 1; u < Tn; ++u) p[u] = 0;
        T* o = out + (size_t(b) * Tn + t) * C + size_t(h) * hs;
        for (int i = 0; i < hs; ++i) o[i] = 0;
        for (int u = 0; u <= t; ++u) {
          const T* v = qkv + (size_t(b) * Tn + u) * C3 + 2 * size_t(C) + size_t(h) * hs;
          for (int i = 0; i < hs; ++i) o[i] += p[u] * v[i];
        }
      }
    }
  }
}

// attention_forward's loop body for (b = 0, h, t) alone: the same operations in the same order,
// with only this row's probabilities kept.
template <typename T>
void attention_decode(T* out, T* att, const T* qkv, int t, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  const size_t C3 = size_t(3) * C;
#pragma omp parallel for schedule(static)
  for (int h = 0; h < NH; ++h) {
    const T* q = qkv + size_t(t) * C3 + size_t(h) * hs;
    T* p = att + size_t(h) * (t + 1);
    T maxv = -INFINITY;
    for (int u = 0; u <= t; ++u) {
      const T* k = qkv + size_t(u) * C3 + C + size_t(h) * hs;
      T s = 0;
      for (int i = 0; i < hs; ++i) s += q[i] * k[i];
      p[u] = s * scale;
      if (p[u] > maxv) maxv = p[u];
    }
    T sum = 0;
    for (int u = 0; u <= t; ++u) {
      p[u] = std::exp(p[u] - maxv);
      sum += p[u];
    }
    const T inv = T(1) / sum;
    for (int u = 0; u <= t; ++u) p[u] *= inv;
    T* o = out + size_t(h) * hs;
    for (int i = 0; i < hs; ++i) o[i] = 0;
    for (int u = 0; u <= t; ++u) {
      const T* v = qkv + size_t(u) * C3 + 2 * size_t(C) + size_t(h) * hs;
      for (int i = 0; i < hs; ++i) o[i] += p[u] * v[i];
    }
  }
}

template <typename T>
void attention_backward(T* dqkv, T* dp_scratch, const T* dout, const T* qkv, const T* att, int B,
                        int Tn, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  const size_t C3 = size_t(3) * C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      T* dp = dp_scratch + (size_t(b) * NH + h) * Tn;
      const size_t hoff = size_t(h) * hs;
      for (int t = 0; t < Tn; ++t) {
        const T* p = att + ((size_t(b) * NH + h) * Tn + t) * Tn;
        const T* dy = dout + (size_t(b) * Tn + t) * C + hoff;
        T dot = 0;  // Σ_u p[t,u]·dp[t,u]
        for (int u = 0; u <= t; ++u) {
          const T* v = qkv + (size_t(b) * Tn + u) * C3 + 2 * size_t(C) + hoff;
          T* dv = dqkv + (size_t(b) * Tn + u) * C3 + 2 * size_t(C) + hoff;
          T s = 0;
          for (int i = 0; i < hs; ++i) {
            s += dy[i] * v[i];
            dv[i] += p[u] * dy[i];
          }
          dp[u] = s;
          dot += p[u] * s;
        }
        const T* q = qkv + (size_t(b) * Tn + t) * C3 + hoff;
        T* dq = dqkv + (size_t(b) * Tn + t) * C3 + hoff;
        for (int u = 0; u <= t; ++u) {
          const T ds = p[u] * (dp[u] - dot) * scale;
          const T* k = qkv + (size_t(b) * Tn + u) * C3 + C + hoff;
          T* dk = dqkv + (size_t(b) * Tn + u) * C3 + C + hoff;
          for (int i = 0; i < hs; ++i) {
            dq[i] += ds * k[i];
            dk[i] += ds * q[i];
          }
        }
      }
    }
  }
}

#define REFTRAIN_INSTANTIATE(T)                                             \
  template void attention_forward<T>(T*, T*, const T*, int, int, int, int); \
  template void attention_decode<T>(T*, T*, const T*, int, int, int);       \
  template void attention_backward<T>(T*, T*, const T*, const T*, const T*, int, int, int, int);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)

}  // namespace reftrain
