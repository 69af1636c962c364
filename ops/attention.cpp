#include "ops/attention.h"

#include <cmath>
#include <cstddef>

namespace reftrain {

namespace {

// Query row t of one head (q at `q`, key u's k and v at k0 + u·ld and v0 + u·ld): p[0..t] the
// probabilities, o[0..hs) the output. The forward's and the decode's one arithmetic.
template <typename T>
void attend_row(T* o, T* p, const T* q, const T* k0, const T* v0, size_t ld, int t, int hs,
                T scale) {
  T maxv = -INFINITY;
  for (int u = 0; u <= t; ++u) {
    const T* k = k0 + u * ld;
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
  for (int i = 0; i < hs; ++i) o[i] = 0;
  for (int u = 0; u <= t; ++u) {
    const T* v = v0 + u * ld;
    for (int i = 0; i < hs; ++i) o[i] += p[u] * v[i];
  }
}

}  // namespace

template <typename T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  const size_t C3 = size_t(3) * C;
#pragma omp parallel for collapse(3) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < Tn; ++t) {
        const T* seq = qkv + size_t(b) * Tn * C3 + size_t(h) * hs;  // row 0's q of head h
        T* p = att + ((size_t(b) * NH + h) * Tn + t) * Tn;
        attend_row(out + (size_t(b) * Tn + t) * C + size_t(h) * hs, p, seq + t * C3, seq + C,
                   seq + 2 * size_t(C), C3, t, hs, scale);
        for (int u = t + 1; u < Tn; ++u) p[u] = 0;
      }
    }
  }
}

template <typename T>
void attention_decode(T* out, T* att, const T* qkv, int t, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  const size_t C3 = size_t(3) * C;
#pragma omp parallel for schedule(static)
  for (int h = 0; h < NH; ++h) {
    const T* seq = qkv + size_t(h) * hs;
    attend_row(out + size_t(h) * hs, att + size_t(h) * (t + 1), seq + t * C3, seq + C,
               seq + 2 * size_t(C), C3, t, hs, scale);
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
