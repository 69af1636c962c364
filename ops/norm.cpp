#include "ops/norm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "ops/kernel_record.h"
#include "simd/reduce.h"

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

// ---------------------------------------------------------------------------------------------
// The fast float path. Rows are independent (parallel over rows); each row's sums run in the
// fixed 16-lane order of simd/reduce.h and every multiply-add is an explicit simd::fma, so the
// AVX-512 and AVX2 builds give the same bits. The dw/db column sums are the reference's own
// operations in the reference's order, on 16 channels at a time: bit-identical to it.

namespace {

using simd::lane_type;
using simd::load;
using simd::Wide;

// dw += Σ_rows dout·n (and db += Σ_rows dout when db is not null), n = (x - mean)·rstd (mean
// null: RMSNorm, n = x·rstd). Parallel over blocks of 16 channels, rows in order.
void norm_param_grads(float* dw, float* db, const float* dout, const float* x, const float* mean,
                      const float* rstd, int N, int C) {
  const int nblocks = (C + int(simd::kWidth) - 1) / int(simd::kWidth);
  simd::parallel_shares(size_t(nblocks), [&](size_t item) {
    const int cb = int(item);
    const size_t c0 = size_t(cb) * simd::kWidth;
    const size_t c1 = std::min(c0 + simd::kWidth, size_t(C));
    simd::for_each16(c0, c1, [&](auto lanes, size_t c) {
      using V = typename decltype(lanes)::type;
      V sw = load<V>(dw + c), sb = db ? load<V>(db + c) : V(0.0f);
      V pw(0.0f), pb(0.0f);  // Σ over the rows, then added once (as the reference does)
      for (int i = 0; i < N; ++i) {
        const V g = load<V>(dout + size_t(i) * C + c);
        const V xi = load<V>(x + size_t(i) * C + c);
        const V n = mean ? (xi - V(mean[i])) * V(rstd[i]) : xi * V(rstd[i]);
        pw = pw + g * n;
        pb = pb + g;
      }
      simd::store(dw + c, sw + pw);
      if (db) simd::store(db + c, sb + pb);
    });
  });
}

}  // namespace

void layernorm_forward_fast(float* out, float* mean, float* rstd, const float* x, const float* w,
                            const float* b, int N, int C) {
  simd::parallel_shares(size_t(N), [&](size_t item) {
    const int i = int(item);
    const float* xi = x + size_t(i) * C;
    const float m =
        simd::sum16(C, [&](auto acc, size_t c) { return acc + load<decltype(acc)>(xi + c); }) /
        float(C);
    const float sq = simd::sum16(C, [&](auto acc, size_t c) {
      using V = decltype(acc);
      const V d = load<V>(xi + c) - V(m);
      return simd::fma(d, d, acc);
    });
    const float s = 1.0f / std::sqrt(sq / float(C) + float(kLayerNormEps));
    float* oi = out + size_t(i) * C;
    simd::for_each16(0, C, [&](auto lanes, size_t c) {
      using V = typename decltype(lanes)::type;
      const V n = (load<V>(xi + c) - V(m)) * V(s);
      simd::store(oi + c, simd::fma(n, load<V>(w + c), load<V>(b + c)));
    });
    mean[i] = m;
    rstd[i] = s;
  });
}

void layernorm_backward_fast(float* dx, float* dw, float* db, const float* dout, const float* x,
                             const float* w, const float* mean, const float* rstd, int N, int C) {
  simd::parallel_shares(size_t(N), [&](size_t item) {
    const int i = int(item);
    const float* xi = x + size_t(i) * C;
    const float* gi = dout + size_t(i) * C;
    const float m = mean[i], s = rstd[i];
    // Σdn and Σdn·n in one pass.
    const auto sums = simd::sums16<2>(C, [&](auto& acc, size_t c) {
      using V = lane_type<decltype(acc)>;
      const V n = (load<V>(xi + c) - V(m)) * V(s);
      const V dn = load<V>(gi + c) * load<V>(w + c);
      acc[0] = acc[0] + dn;
      acc[1] = simd::fma(dn, n, acc[1]);
    });
    const float dn_mean = sums[0] / float(C), dn_n_mean = sums[1] / float(C);
    float* dxi = dx + size_t(i) * C;
    simd::for_each16(0, C, [&](auto lanes, size_t c) {
      using V = typename decltype(lanes)::type;
      const V n = (load<V>(xi + c) - V(m)) * V(s);
      const V dn = load<V>(gi + c) * load<V>(w + c);
      const V centred = simd::fma(-n, V(dn_n_mean), dn - V(dn_mean));  // dn - mean(dn) - n·…
      simd::store(dxi + c, simd::fma(centred, V(s), load<V>(dxi + c)));
    });
  });
  norm_param_grads(dw, db, dout, x, mean, rstd, N, C);
}

void rmsnorm_forward_fast(float* out, float* rstd, const float* x, const float* w, int N, int C) {
  simd::parallel_shares(size_t(N), [&](size_t item) {
    const int i = int(item);
    const float* xi = x + size_t(i) * C;
    const float sq = simd::sum16(C, [&](auto acc, size_t c) {
      const auto xc = load<decltype(acc)>(xi + c);
      return simd::fma(xc, xc, acc);
    });
    const float s = 1.0f / std::sqrt(sq / float(C) + float(kRmsNormEps));
    float* oi = out + size_t(i) * C;
    simd::for_each16(0, C, [&](auto lanes, size_t c) {
      using V = typename decltype(lanes)::type;
      simd::store(oi + c, load<V>(xi + c) * V(s) * load<V>(w + c));
    });
    rstd[i] = s;
  });
}

void rmsnorm_backward_fast(float* dx, float* dw, const float* dout, const float* x, const float* w,
                           const float* rstd, int N, int C) {
  simd::parallel_shares(size_t(N), [&](size_t item) {
    const int i = int(item);
    const float* xi = x + size_t(i) * C;
    const float* gi = dout + size_t(i) * C;
    const float s = rstd[i];
    const float dn_n_mean = simd::sum16(C,
                                        [&](auto acc, size_t c) {
                                          using V = decltype(acc);
                                          const V dn = load<V>(gi + c) * load<V>(w + c);
                                          return simd::fma(dn, load<V>(xi + c) * V(s), acc);
                                        }) /
                            float(C);
    float* dxi = dx + size_t(i) * C;
    simd::for_each16(0, C, [&](auto lanes, size_t c) {
      using V = typename decltype(lanes)::type;
      const V n = load<V>(xi + c) * V(s);
      const V dn = load<V>(gi + c) * load<V>(w + c);
      const V centred = simd::fma(-n, V(dn_n_mean), dn);
      simd::store(dxi + c, simd::fma(centred, V(s), load<V>(dxi + c)));
    });
  });
  norm_param_grads(dw, nullptr, dout, x, nullptr, rstd, N, C);
}

#define REFTRAIN_INSTANTIATE(T)                                                           \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int, int); \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, \
                                      const T*, int, int);                                \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int, int);                 \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int, int);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)
#undef REFTRAIN_INSTANTIATE

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> norm_records() {
  using namespace record;
  const std::string page = "docs/kernels/02_norm.md", tests = "tests/ops/test_norm.cpp";
  const std::string how = "16 lanes, row sums in simd/reduce.h's fixed order; within a bound";
  return {
      {"layernorm_forward",
       "mean = Σx/C; rstd = 1/√(Σ(x−mean)²/C + eps); out = (x−mean)·rstd·w + b",
       {out("out", "f32", "[N,C]"), out("mean", "f32", "[N]"), out("rstd", "f32", "[N]"),
        in("x", "f32", "[N,C]"), in("w", "f32", "[C]"), in("b", "f32", "[C]"), scalar("N"),
        scalar("C")},
       "02_norm.wgsl",
       "",
       "ops/norm.h",
       "layernorm_forward",
       "layernorm_forward_fast",
       how,
       "",
       "norm.wgsl",
       page,
       "layernorm",
       tests,
       "bench/bench_ops.cpp layernorm_forward/{ref,fast}"},
      {"layernorm_backward",
       "n = (x−mean)·rstd, dn = dout·w; dx += rstd·(dn − mean(dn) − n·mean(dn·n)); "
       "dw += Σ_rows dout·n; db += Σ_rows dout",
       {inout("dx", "f32", "[N,C]"), inout("dw", "f32", "[C]"), inout("db", "f32", "[C]"),
        in("dout", "f32", "[N,C]"), in("x", "f32", "[N,C]"), in("w", "f32", "[C]"),
        in("mean", "f32", "[N]"), in("rstd", "f32", "[N]"), scalar("N"), scalar("C")},
       "02_norm.wgsl",
       "",
       "ops/norm.h",
       "layernorm_backward",
       "layernorm_backward_fast",
       how,
       "",
       "norm.wgsl",
       page,
       "layernorm",
       tests,
       "bench/bench_ops.cpp layernorm_backward/{ref,fast}"},
      {"rmsnorm_forward",
       "rstd = 1/√(Σx²/C + eps); out = x·rstd·w",
       {out("out", "f32", "[N,C]"), out("rstd", "f32", "[N]"), in("x", "f32", "[N,C]"),
        in("w", "f32", "[C]"), scalar("N"), scalar("C")},
       "02_norm.wgsl",
       "",
       "ops/norm.h",
       "rmsnorm_forward",
       "rmsnorm_forward_fast",
       how,
       "",
       "norm.wgsl",
       page,
       "rmsnorm",
       tests,
       "bench/bench_ops.cpp rmsnorm_forward/{ref,fast}"},
      {"rmsnorm_backward",
       "n = x·rstd, dn = dout·w; dx += rstd·(dn − n·mean(dn·n)); dw += Σ_rows dout·n",
       {inout("dx", "f32", "[N,C]"), inout("dw", "f32", "[C]"), in("dout", "f32", "[N,C]"),
        in("x", "f32", "[N,C]"), in("w", "f32", "[C]"), in("rstd", "f32", "[N]"), scalar("N"),
        scalar("C")},
       "02_norm.wgsl",
       "",
       "ops/norm.h",
       "rmsnorm_backward",
       "rmsnorm_backward_fast",
       how,
       "",
       "norm.wgsl",
       page,
       "rmsnorm",
       tests,
       "bench/bench_ops.cpp rmsnorm_backward/{ref,fast}"},
  };
}

}  // namespace reftrain
