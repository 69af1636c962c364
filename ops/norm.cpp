#include "ops/norm.h"

#include <cmath>
#include <cstddef>

namespace reftrain {

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* xi = x + size_t(i) * C;
    T sum = 0;
    for (int c = 0; c < C; ++c) sum += xi[c];
    const T m = sum / C;
    T sq = 0;
    for (int c = 0; c < C; ++c) sq += (xi[c] - m) * (xi[c] - m);
    const T s = T(1) / std::sqrt(sq / C + T(kLayerNormEps));
    T* oi = out + size_t(i) * C;
    for (int c = 0; c < C; ++c) oi[c] = (xi[c] - m) * s * w[c] + b[c];
    mean[i] = m;
    rstd[i] = s;
  }
}

template <typename T>
void layernorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w, const T* mean,
                        const T* rstd, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* xi = x + size_t(i) * C;
    const T* gi = dout + size_t(i) * C;
    T dn_mean = 0, dn_n_mean = 0;
    for (int c = 0; c < C; ++c) {
      const T n = (xi[c] - mean[i]) * rstd[i];
      const T dn = gi[c] * w[c];
      dn_mean += dn;
      dn_n_mean += dn * n;
    }
    dn_mean /= C;
    dn_n_mean /= C;
    T* dxi = dx + size_t(i) * C;
    for (int c = 0; c < C; ++c) {
      const T n = (xi[c] - mean[i]) * rstd[i];
      const T dn = gi[c] * w[c];
      dxi[c] += (dn - dn_mean - n * dn_n_mean) * rstd[i];
    }
  }
  // Channel blocks of 16: each thread owns whole columns (fixed row order) while its
  // inner loop still runs over contiguous channels.
  constexpr int kBlock = 16;
  const int nblocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int cb = 0; cb < nblocks; ++cb) {
    const int c0 = cb * kBlock;
    const int width = c0 + kBlock < C ? kBlock : C - c0;
    T sw[kBlock] = {}, sb[kBlock] = {};
    for (int i = 0; i < N; ++i) {
      const T* gi = dout + size_t(i) * C + c0;
      const T* xi = x + size_t(i) * C + c0;
      for (int j = 0; j < width; ++j) {
        sw[j] += gi[j] * ((xi[j] - mean[i]) * rstd[i]);
        sb[j] += gi[j];
      }
    }
    for (int j = 0; j < width; ++j) {
      dw[c0 + j] += sw[j];
      db[c0 + j] += sb[j];
    }
  }
}

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* xi = x + size_t(i) * C;
    T sq = 0;
    for (int c = 0; c < C; ++c) sq += xi[c] * xi[c];
    const T s = T(1) / std::sqrt(sq / C + T(kRmsNormEps));
    T* oi = out + size_t(i) * C;
    for (int c = 0; c < C; ++c) oi[c] = xi[c] * s * w[c];
    rstd[i] = s;
  }
}

// out_c = w_c·x_c·r with r = (Σx²/C + eps)^(-1/2), and ∂r/∂x_k = -r³·x_k/C, so
//   dx_k = r·dn_k - (r³·x_k/C)·Σ_c dn_c·x_c = r·(dn_k - n_k·mean(dn·n)).
template <typename T>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd, int N,
                      int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* xi = x + size_t(i) * C;
    const T* gi = dout + size_t(i) * C;
    T dn_n_mean = 0;
    for (int c = 0; c < C; ++c) {
      const T n = xi[c] * rstd[i];
      const T dn = gi[c] * w[c];
      dn_n_mean += dn * n;
    }
    dn_n_mean /= C;
    T* dxi = dx + size_t(i) * C;
    for (int c = 0; c < C; ++c) {
      const T n = xi[c] * rstd[i];
      const T dn = gi[c] * w[c];
      dxi[c] += (dn - n * dn_n_mean) * rstd[i];
    }
  }
  // Channel blocks of 16, as in layernorm_backward: whole columns per thread, rows in order.
  constexpr int kBlock = 16;
  const int nblocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int cb = 0; cb < nblocks; ++cb) {
    const int c0 = cb * kBlock;
    const int width = c0 + kBlock < C ? kBlock : C - c0;
    T sw[kBlock] = {};
    for (int i = 0; i < N; ++i) {
      const T* gi = dout + size_t(i) * C + c0;
      const T* xi = x + size_t(i) * C + c0;
      for (int j = 0; j < width; ++j) sw[j] += gi[j] * (xi[j] * rstd[i]);
    }
    for (int j = 0; j < width; ++j) dw[c0 + j] += sw[j];
  }
}

#define REFTRAIN_INSTANTIATE(T)                                                           \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int, int); \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, \
                                      const T*, int, int);                                \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int, int);                 \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int, int);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)

}  // namespace reftrain
