#include "ops/rope.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "ops/kernel_record.h"
#include "simd/wide.h"

namespace reftrain {

namespace {
// f_i = theta^(-2i/hs), in double.
double rope_frequency(int i, int hs, double theta) {
  return std::pow(theta, -2.0 * i / hs);
}

// cos and sin of the angle a = t·f for position t and frequency f, in double, rounded once to T.
template <typename T>
void rope_cos_sin(T* cos_a, T* sin_a, int t, double f) {
  const double a = t * f;
  *cos_a = T(std::cos(a));
  *sin_a = T(std::sin(a));
}

// The same for pair i.
template <typename T>
void rope_angle(T* cos_a, T* sin_a, int t, int i, int hs, double theta) {
  rope_cos_sin(cos_a, sin_a, t, rope_frequency(i, hs, theta));
}
}  // namespace

// Parallel over positions: the angle depends on (t, i) only, so each is computed once and applied
// to every batch row and head at that position.
template <typename T>
void rope_forward(T* out, const T* x, int B, int Tn, int NH, int hs, double theta, int t0) {
  const int half = hs / 2;
  const int C = NH * hs;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < Tn; ++t) {
    for (int i = 0; i < half; ++i) {
      T c, s;
      rope_angle(&c, &s, t0 + t, i, hs, theta);
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
void rope_backward(T* dx, const T* dout, int B, int Tn, int NH, int hs, double theta, int t0) {
  const int half = hs / 2;
  const int C = NH * hs;
#pragma omp parallel for schedule(static)
  for (int t = 0; t < Tn; ++t) {
    for (int i = 0; i < half; ++i) {
      T c, s;
      rope_angle(&c, &s, t0 + t, i, hs, theta);
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

// ---------------------------------------------------------------------------------------------
// The fast float path: the reference's operations on each pair, 16 pairs at a time, with the
// angles' cos and sin computed as the reference does (in double, rounded once) into a per-thread
// table for the current position, the hs/2 frequencies once per thread: bit-identical to the
// reference. Parallel over positions; each position's rows (all batches and heads) are
// contiguous.

namespace {

// Rotates every head of the rows at position t: cos_sin holds cos a for the hs/2 pairs, then
// sin a. Forward: out = rotation of x by a; backward: out (+)= rotation of x by -a (from +0 when
// not accumulating).
template <bool kBackward>
void rope_rows_fast(float* out, const float* x, const float* cos_sin, int B, int Tn, int t, int NH,
                    int hs, bool accumulate) {
  const size_t half = size_t(hs) / 2;
  const size_t C = size_t(NH) * hs;
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const size_t k = (size_t(b) * Tn + t) * C + size_t(h) * hs;
      simd::for_each16(0, half, [&](auto lanes, size_t i) {
        using V = typename decltype(lanes)::type;
        const V c = simd::load<V>(cos_sin + i), s = simd::load<V>(cos_sin + half + i);
        const V x1 = simd::load<V>(x + k + i), x2 = simd::load<V>(x + k + half + i);
        if (kBackward) {
          simd::store(out + k + i, simd::prior<V>(out + k + i, accumulate) + (x1 * c + x2 * s));
          simd::store(out + k + half + i,
                      simd::prior<V>(out + k + half + i, accumulate) + (x2 * c - x1 * s));
        } else {
          simd::store(out + k + i, x1 * c - x2 * s);
          simd::store(out + k + half + i, x2 * c + x1 * s);
        }
      });
    }
  }
}

template <bool kBackward>
void rope_fast(float* out, const float* x, int B, int Tn, int NH, int hs, double theta, int t0,
               bool accumulate) {
  const int half = hs / 2;
#pragma omp parallel
  {
    std::vector<double> freq(static_cast<size_t>(half));
    for (int i = 0; i < half; ++i) freq[i] = rope_frequency(i, hs, theta);
    std::vector<float> cos_sin(static_cast<size_t>(hs));
#pragma omp for schedule(static)
    for (int t = 0; t < Tn; ++t) {
      for (int i = 0; i < half; ++i) rope_cos_sin(&cos_sin[i], &cos_sin[half + i], t0 + t, freq[i]);
      rope_rows_fast<kBackward>(out, x, cos_sin.data(), B, Tn, t, NH, hs, accumulate);
    }
  }
}

}  // namespace

void rope_forward_fast(float* out, const float* x, int B, int Tn, int NH, int hs, double theta,
                       int t0) {
  rope_fast<false>(out, x, B, Tn, NH, hs, theta, t0, false);
}

void rope_backward_fast(float* dx, const float* dout, int B, int Tn, int NH, int hs, double theta,
                        int t0, bool accumulate) {
  rope_fast<true>(dx, dout, B, Tn, NH, hs, theta, t0, accumulate);
}

#define REFTRAIN_INSTANTIATE(T)                                                 \
  template void rope_forward<T>(T*, const T*, int, int, int, int, double, int); \
  template void rope_backward<T>(T*, const T*, int, int, int, int, double, int);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)
#undef REFTRAIN_INSTANTIATE

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> rope_records() {
  using namespace record;
  const std::string page = "docs/kernels/04_rope.md";
  const std::string tests = "tests/ops/test_rope.cpp, tests/model/test_torch_parity.cpp";
  return {
      {"rope_forward",
       "rotate-half: f_i = theta^(−2i/hs), a = t·f_i; out[i] = x[i]·cos a − x[i+hs/2]·sin a; "
       "out[i+hs/2] = x[i+hs/2]·cos a + x[i]·sin a (angles in double, rounded once)",
       {out("out", "f32", "[B,T,C]"), in("x", "f32", "[B,T,C]"), scalar("B"), scalar("T"),
        scalar("NH"), scalar("hs"), scalar("theta", "f64")},
       "04_rope.wgsl",
       "",
       "ops/rope.h",
       "rope_forward",
       "rope_forward_fast",
       "16 pairs at a time; bit-identical",
       "",
       "rope.wgsl",
       page,
       "rope",
       tests,
       "bench/bench_ops.cpp rope_forward/{ref,fast}"},
      {"rope_backward",
       "the rotation by −a: dx[i] += dout[i]·cos a + dout[i+hs/2]·sin a; "
       "dx[i+hs/2] += dout[i+hs/2]·cos a − dout[i]·sin a",
       {inout("dx", "f32", "[B,T,C]"), in("dout", "f32", "[B,T,C]"), scalar("B"), scalar("T"),
        scalar("NH"), scalar("hs"), scalar("theta", "f64")},
       "04_rope.wgsl",
       "",
       "ops/rope.h",
       "rope_backward",
       "rope_backward_fast",
       "16 pairs at a time; bit-identical",
       "",
       "rope.wgsl",
       page,
       "rope",
       tests,
       "bench/bench_ops.cpp rope_backward/{ref,fast}"},
  };
}

}  // namespace reftrain
