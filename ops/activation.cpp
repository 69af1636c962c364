#include "ops/activation.h"

#include <cmath>

#include "ops/kernel_record.h"
#include "simd/wide.h"

namespace reftrain {

namespace {
template <typename T>
constexpr T kSqrt2OverPi = T(0.79788456080286535587989211986876);
template <typename T>
constexpr T kGeluCubic = T(0.044715);

// σ(g) = 1/(1 + e^-g), written so the exponential never overflows: for g < 0 it uses the
// equivalent e^g/(1 + e^g). σ(-1000) is then 0 and σ(1000) is 1, never inf/inf.
template <typename T>
T sigmoid(T g) {
  if (g >= T(0)) return T(1) / (T(1) + std::exp(-g));
  const T e = std::exp(g);
  return e / (T(1) + e);
}
}  // namespace

// tanh is simd::tanh, not std::tanh: libm's float tanh differs between platforms (glibc's tanhf
// on x86-64 and on aarch64 disagree in the last bit for some inputs), and the fixtures written
// from this reference must be the same bytes everywhere. simd::tanh is the same float
// arithmetic on every ISA (for double, the finite-difference oracle, it is libm's tanh).
template <typename T>
void gelu_forward(T* out, const T* x, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T xi = x[i];
    const T u = kSqrt2OverPi<T> * (xi + kGeluCubic<T> * xi * xi * xi);
    out[i] = T(0.5) * xi * (T(1) + simd::tanh(u));
  }
}

template <typename T>
void gelu_backward(T* dx, const T* x, const T* dout, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T xi = x[i];
    const T u = kSqrt2OverPi<T> * (xi + kGeluCubic<T> * xi * xi * xi);
    const T th = simd::tanh(u);
    const T du = kSqrt2OverPi<T> * (T(1) + T(3) * kGeluCubic<T> * xi * xi);
    const T grad = T(0.5) * (T(1) + th) + T(0.5) * xi * (T(1) - th * th) * du;
    dx[i] += grad * dout[i];
  }
}

namespace {
constexpr double kSqrtHalf = 0.70710678118654752440084436210485;
constexpr double kInvSqrt2Pi = 0.39894228040143267793994605993438;
constexpr double kTwoOverSqrtPi = 1.1283791670955125738961589031215;

// e^y for y ≤ 0 from + − × ÷ and exact operations only, so every ISA computes the same bits
// (libm's exp and erf differ in the last bit between x86-64 and aarch64, which moves the float
// reference's rounding): y = k·ln2 + r with |r| ≤ ln2/2, ln2 split in two (Cody and Waite) so r
// is exact to ~2^-60, e^r by 20 terms of its Taylor series (the last ~1e-28), then ×2^k.
double exp_nonpositive(double y) {
  if (y < -745.0) return 0.0;
  const double k = std::nearbyint(y * 1.4426950408889634);
  const double r = (y - k * 0.693145751953125) - k * 1.42860682030941723212e-6;
  double term = 1.0, sum = 1.0;
  for (int n = 1; n <= 20; ++n) {
    term = term * r / n;
    sum += term;
  }
  return std::ldexp(sum, int(k));
}

// erf(x) the same way: erf(a) = 2/√π · e^(−a²) · Σ_n 2^n·a^(2n+1) / (1·3·…·(2n+1)) for
// a = |x|, a series of positive terms (no cancellation), summed until a term no longer moves the
// sum; ±1 past |x| = 6, where 1 − erf < 2e-17.
double erf_portable(double x) {
  const double a = std::fabs(x);
  if (a >= 6.0) return std::copysign(1.0, x);
  const double a2 = a * a;
  double term = a, sum = a;
  for (int n = 0; term > sum * 1e-17; ++n) {
    term = term * (2.0 * a2) / (2 * n + 3);
    sum += term;
  }
  return std::copysign(kTwoOverSqrtPi * exp_nonpositive(-a2) * sum, x);
}
}  // namespace

template <typename T>
void gelu_erf_forward(T* out, const T* x, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T xi = x[i];
    const T e = T(erf_portable(double(xi) * kSqrtHalf));
    out[i] = T(0.5) * xi * (T(1) + e);
  }
}

template <typename T>
void gelu_erf_backward(T* dx, const T* x, const T* dout, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T xi = x[i];
    const T e = T(erf_portable(double(xi) * kSqrtHalf));
    const T pdf = T(kInvSqrt2Pi * exp_nonpositive(-0.5 * double(xi) * double(xi)));
    const T grad = T(0.5) * (T(1) + e) + xi * pdf;
    dx[i] += grad * dout[i];
  }
}

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T g = gate[i];
    const T silu = g * sigmoid(g);
    out[i] = silu * up[i];
  }
}

template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T g = gate[i];
    const T sg = sigmoid(g);
    const T silu = g * sg;
    const T dsilu = sg * (T(1) + g * (T(1) - sg));
    dgate[i] += dout[i] * up[i] * dsilu;
    dup[i] += dout[i] * silu;
  }
}

// ---------------------------------------------------------------------------------------------
// The fast float path: each element's formula written once for V = float and V = simd::Wide,
// with explicit FMAs and simd/math.h's tanh and sigmoid, so the 16-lane blocks and the scalar
// tail compute the same bits on every ISA. Elementwise: any split between threads gives the
// same result.

namespace {

using simd::load;

// ½·x·(1 + tanh u) as h + h·tanh u with h = ½x; u = √(2/π)·(x + 0.044715·x·x²).
template <typename V>
V gelu_value(V x) {
  const V u = V(kSqrt2OverPi<float>) * simd::fma(V(kGeluCubic<float>) * x * x, x, x);
  const V h = V(0.5f) * x;
  return simd::fma(h, simd::tanh(u), h);
}

// gelu'(x) = ½·(1 + th) + ½x·(1 - th²)·du, th = tanh u, du = √(2/π)·(1 + 3·0.044715·x²).
template <typename V>
V gelu_derivative(V x) {
  const V x2 = x * x;
  const V th = simd::tanh(V(kSqrt2OverPi<float>) * simd::fma(V(kGeluCubic<float>) * x2, x, x));
  const V du = V(kSqrt2OverPi<float>) * simd::fma(V(3.0f * kGeluCubic<float>), x2, V(1.0f));
  const V sech2 = simd::fma(-th, th, V(1.0f));
  return simd::fma(V(0.5f) * x * sech2, du, V(0.5f) * (V(1.0f) + th));
}

}  // namespace

void gelu_forward_fast(float* out, const float* x, size_t n) {
  simd::parallel_for_each16(n, [&](auto lanes, size_t i) {
    using V = typename decltype(lanes)::type;
    simd::store(out + i, gelu_value(load<V>(x + i)));
  });
}

void gelu_backward_fast(float* dx, const float* x, const float* dout, size_t n, bool accumulate) {
  simd::parallel_for_each16(n, [&](auto lanes, size_t i) {
    using V = typename decltype(lanes)::type;
    const V grad = gelu_derivative(load<V>(x + i));
    simd::store(dx + i, simd::fma(grad, load<V>(dout + i), simd::prior<V>(dx + i, accumulate)));
  });
}

// erf(x/√2) and e^(−x²/2) for gelu_erf: A&S 7.1.26 on a = |x|/√2, erf(a) = 1 − p(t)·e^(−a²),
// t = 1/(1 + 0.3275911·a), p(t) = t·(a1 + t·(a2 + t·(a3 + t·(a4 + t·a5)))), the sign of x put
// back; e^(−a²) is the φ(x) the backward needs too.
float copy_sign(float magnitude, float x) {
  return std::copysign(magnitude, x);
}
simd::Wide copy_sign(const simd::Wide& magnitude, const simd::Wide& x) {
  return simd::map_parts(
      magnitude, x, [](const auto& m, const auto& s) { return xsimd::select(s < 0.0f, -m, m); });
}

template <typename V>
void erf_and_gauss(V x, V& erf, V& gauss) {
  const V a = simd::max(x, -x) * V(float(kSqrtHalf));
  const V t = V(1.0f) / simd::fma(V(0.3275911f), a, V(1.0f));
  V p = simd::fma(V(1.061405429f), t, V(-1.453152027f));
  p = simd::fma(p, t, V(1.421413741f));
  p = simd::fma(p, t, V(-0.284496736f));
  p = simd::fma(p, t, V(0.254829592f));
  gauss = simd::exp(-(a * a));
  erf = copy_sign(V(1.0f) - p * t * gauss, x);
}

void gelu_erf_forward_fast(float* out, const float* x, size_t n) {
  simd::parallel_for_each16(n, [&](auto lanes, size_t i) {
    using V = typename decltype(lanes)::type;
    const V xi = load<V>(x + i);
    V erf, gauss;
    erf_and_gauss(xi, erf, gauss);
    const V h = V(0.5f) * xi;
    simd::store(out + i, simd::fma(h, erf, h));
  });
}

// gelu_erf'(x) = ½·(1 + erf) + x·e^(−x²/2)/√(2π).
void gelu_erf_backward_fast(float* dx, const float* x, const float* dout, size_t n,
                            bool accumulate) {
  simd::parallel_for_each16(n, [&](auto lanes, size_t i) {
    using V = typename decltype(lanes)::type;
    const V xi = load<V>(x + i);
    V erf, gauss;
    erf_and_gauss(xi, erf, gauss);
    const V grad = simd::fma(xi * V(float(kInvSqrt2Pi)), gauss, V(0.5f) * (V(1.0f) + erf));
    simd::store(dx + i, simd::fma(grad, load<V>(dout + i), simd::prior<V>(dx + i, accumulate)));
  });
}

// σ(g) = 1/(1 + e^-g) (simd::sigmoid: e^-g overflows to +inf for g < -88.7, and 1/inf = 0).
void swiglu_forward_fast(float* out, const float* gate, const float* up, size_t n) {
  simd::parallel_for_each16(n, [&](auto lanes, size_t i) {
    using V = typename decltype(lanes)::type;
    const V g = load<V>(gate + i);
    simd::store(out + i, g * simd::sigmoid(g) * load<V>(up + i));
  });
}

// silu'(g) = σ + g·σ·(1 - σ) = silu·(1 - σ) + σ.
void swiglu_backward_fast(float* dgate, float* dup, const float* dout, const float* gate,
                          const float* up, size_t n, bool accumulate) {
  simd::parallel_for_each16(n, [&](auto lanes, size_t i) {
    using V = typename decltype(lanes)::type;
    const V g = load<V>(gate + i), d = load<V>(dout + i);
    const V sg = simd::sigmoid(g);
    const V silu = g * sg;
    const V dsilu = simd::fma(silu, V(1.0f) - sg, sg);
    simd::store(dgate + i,
                simd::fma(d * load<V>(up + i), dsilu, simd::prior<V>(dgate + i, accumulate)));
    simd::store(dup + i, simd::fma(d, silu, simd::prior<V>(dup + i, accumulate)));
  });
}

#define REFTRAIN_INSTANTIATE(T)                                       \
  template void gelu_forward<T>(T*, const T*, size_t);                \
  template void gelu_backward<T>(T*, const T*, const T*, size_t);     \
  template void gelu_erf_forward<T>(T*, const T*, size_t);            \
  template void gelu_erf_backward<T>(T*, const T*, const T*, size_t); \
  template void swiglu_forward<T>(T*, const T*, const T*, size_t);    \
  template void swiglu_backward<T>(T*, T*, const T*, const T*, const T*, size_t);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)
#undef REFTRAIN_INSTANTIATE

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> activation_records() {
  using namespace record;
  const std::string h = "ops/activation.h", tests = "tests/ops/test_activation.cpp";
  const std::string page = "docs/kernels/06_swiglu.md";
  return {
      {"gelu_forward",
       "out = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))",
       {out("out", "f32", "[n]"), in("x", "f32", "[n]"), scalar("n")},
       "06_swiglu.wgsl",
       "",
       h,
       "gelu_forward",
       "gelu_forward_fast",
       "16 lanes, simd/math.h's tanh; within a bound",
       "",
       "activation.wgsl",
       page,
       "gelu",
       tests,
       "bench/bench_ops.cpp gelu_forward/{ref,fast}"},
      {"gelu_backward",
       "dx += dout·(½·(1 + tanh u) + ½·x·(1 − tanh²u)·√(2/π)·(1 + 3·0.044715·x²))",
       {inout("dx", "f32", "[n]"), in("x", "f32", "[n]"), in("dout", "f32", "[n]"), scalar("n")},
       "06_swiglu.wgsl",
       "",
       h,
       "gelu_backward",
       "gelu_backward_fast",
       "16 lanes, simd/math.h's tanh; within a bound",
       "",
       "activation.wgsl",
       page,
       "gelu",
       tests,
       "bench/bench_ops.cpp gelu_backward/{ref,fast}"},
      {"gelu_erf_forward",
       "out = ½·x·(1 + erf(x/√2)) (erf in double, rounded once)",
       {out("out", "f32", "[n]"), in("x", "f32", "[n]"), scalar("n")},
       "",
       "",
       h,
       "gelu_erf_forward",
       "gelu_erf_forward_fast",
       "16 lanes, erf by A&S 7.1.26 and simd/math.h's exp; within a bound",
       "",
       "activation.wgsl",
       page,
       "gelu_erf",
       tests,
       "bench/bench_ops.cpp gelu_erf_forward/{ref,fast}"},
      {"gelu_erf_backward",
       "dx += dout·(½·(1 + erf(x/√2)) + x·e^(−x²/2)/√(2π))",
       {inout("dx", "f32", "[n]"), in("x", "f32", "[n]"), in("dout", "f32", "[n]"), scalar("n")},
       "",
       "",
       h,
       "gelu_erf_backward",
       "gelu_erf_backward_fast",
       "16 lanes, erf by A&S 7.1.26 and simd/math.h's exp; within a bound",
       "",
       "activation.wgsl",
       page,
       "gelu_erf",
       tests,
       "bench/bench_ops.cpp gelu_erf_backward/{ref,fast}"},
      {"swiglu_forward",
       "out = gate·σ(gate)·up, σ from e^−|gate| only (no overflow)",
       {out("out", "f32", "[n]"), in("gate", "f32", "[n]"), in("up", "f32", "[n]"), scalar("n")},
       "06_swiglu.wgsl",
       "",
       h,
       "swiglu_forward",
       "swiglu_forward_fast",
       "16 lanes, simd/math.h's sigmoid; within a bound",
       "",
       "activation.wgsl",
       page,
       "swiglu",
       tests,
       "bench/bench_ops.cpp swiglu_forward/{ref,fast}"},
      {"swiglu_backward",
       "dgate += dout·up·σ(g)·(1 + g·(1 − σ(g))); dup += dout·g·σ(g)",
       {inout("dgate", "f32", "[n]"), inout("dup", "f32", "[n]"), in("dout", "f32", "[n]"),
        in("gate", "f32", "[n]"), in("up", "f32", "[n]"), scalar("n")},
       "06_swiglu.wgsl",
       "",
       h,
       "swiglu_backward",
       "swiglu_backward_fast",
       "16 lanes, simd/math.h's sigmoid; within a bound",
       "",
       "activation.wgsl",
       page + ", docs/kernels/09_backward_ffn.md",
       "ffn_backward",
       tests,
       "bench/bench_ops.cpp swiglu_backward/{ref,fast}"},
  };
}

}  // namespace reftrain
