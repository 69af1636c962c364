// Wide: 16 float lanes, whatever the ISA — one AVX-512 batch, two AVX2 batches, four SSE ones.
// The fast float kernels in ops/ are written against it (and against plain float for the tails),
// so that every lane computes the same IEEE operations on every build: a lane of the AVX2 build
// holds exactly what the same lane of the AVX-512 build holds. Reductions over Wide lanes live
// in simd/reduce.h and combine the 16 lanes in one fixed order.
//
// Elementwise code is written once as a template over V = float or V = Wide, with the helpers
// below (load<V>, store, fma, max, exp, tanh, sigmoid); for_each16 runs it over full 16-lane
// blocks and then over the leftover elements one at a time.
#pragma once

#include <cstddef>

#include "simd/math.h"
#include "simd/parallel.h"
#include "simd/simd.h"

namespace reftrain::simd {

// The fixed logical width of every fast kernel.
constexpr size_t kWidth = 16;

struct Wide {
  using Part = Batch<float>;
  static constexpr size_t kParts = kWidth / Part::size;
  static_assert(kParts * Part::size == kWidth, "a batch must divide 16 float lanes");

  Part part[kParts];

  Wide() = default;
  explicit Wide(float x) {
    for (auto& p : part) p = Part(x);
  }
  static Wide load(const float* p) {
    Wide w;
    for (size_t k = 0; k < kParts; ++k) w.part[k] = Part::load_unaligned(p + k * Part::size);
    return w;
  }
  void store(float* p) const {
    for (size_t k = 0; k < kParts; ++k) part[k].store_unaligned(p + k * Part::size);
  }
};

// Part by part: f(a.part[k], b.part[k]) for every k.
template <typename F>
Wide map_parts(const Wide& a, const Wide& b, F f) {
  Wide r;
  for (size_t k = 0; k < Wide::kParts; ++k) r.part[k] = f(a.part[k], b.part[k]);
  return r;
}

inline Wide operator+(const Wide& a, const Wide& b) {
  return map_parts(a, b, [](const auto& x, const auto& y) { return x + y; });
}
inline Wide operator-(const Wide& a, const Wide& b) {
  return map_parts(a, b, [](const auto& x, const auto& y) { return x - y; });
}
inline Wide operator*(const Wide& a, const Wide& b) {
  return map_parts(a, b, [](const auto& x, const auto& y) { return x * y; });
}
inline Wide operator/(const Wide& a, const Wide& b) {
  return map_parts(a, b, [](const auto& x, const auto& y) { return x / y; });
}
inline Wide operator-(const Wide& a) {
  return Wide(0.0f) - a;
}

// a·b + c with one rounding (simd::fma: fused on every ISA, std::fma for a float).
inline Wide fma(const Wide& a, const Wide& b, const Wide& c) {
  Wide r;
  for (size_t k = 0; k < Wide::kParts; ++k) r.part[k] = simd::fma(a.part[k], b.part[k], c.part[k]);
  return r;
}

// a > b ? a : b, lane by lane (so max(NaN, b) = b and max(a, NaN) = NaN, as the scalar form).
inline float max(float a, float b) {
  return a > b ? a : b;
}
inline Wide max(const Wide& a, const Wide& b) {
  return map_parts(a, b, [](const auto& x, const auto& y) { return xsimd::select(x > y, x, y); });
}

// The transcendentals of simd/math.h, part by part: the same bits as the float versions.
inline Wide exp(const Wide& x) {
  return map_parts(x, x, [](const auto& v, const auto&) { return simd::exp(v); });
}
inline Wide tanh(const Wide& x) {
  return map_parts(x, x, [](const auto& v, const auto&) { return simd::tanh(v); });
}
inline Wide sigmoid(const Wide& x) {
  return map_parts(x, x, [](const auto& v, const auto&) { return simd::sigmoid(v); });
}

// load<V>(p): one float, or 16 consecutive floats (unaligned); store(p, v) the reverse.
template <typename V>
V load(const float* p);
template <>
inline float load<float>(const float* p) {
  return *p;
}
template <>
inline Wide load<Wide>(const float* p) {
  return Wide::load(p);
}
// What an output gradient adds to: its value at p (accumulate), or +0 without reading p (the
// kernel is the buffer's first writer; +0 + g is the bits of zeroing the buffer first, -0 too).
template <typename V>
V prior(const float* p, bool accumulate) {
  return accumulate ? load<V>(p) : V(0.0f);
}
inline void store(float* p, float v) {
  *p = v;
}
inline void store(float* p, const Wide& v) {
  v.store(p);
}

// The lane type a for_each16 body is called with: `using V = typename decltype(lanes)::type;`.
template <typename V>
struct Lanes {
  using type = V;
};

// body(Lanes<Wide>{}, i) for i = begin, begin + 16, ... while a full block fits, then
// body(Lanes<float>{}, i) for each leftover i < end.
template <typename Body>
void for_each16(size_t begin, size_t end, Body&& body) {
  size_t i = begin;
  for (; i + kWidth <= end; i += kWidth) body(Lanes<Wide>{}, i);
  for (; i < end; ++i) body(Lanes<float>{}, i);
}

// for_each16 over [0, n), split between OpenMP threads in fixed blocks of kBlock elements (a
// multiple of 16) by parallel_blocks (simd/parallel.h). For elementwise bodies only: each
// element's result is then the same for any thread count.
template <typename Body>
void parallel_for_each16(size_t n, Body&& body) {
  constexpr size_t kBlock = 4096;
  parallel_blocks(n, kBlock, [&](size_t begin, size_t end) { for_each16(begin, end, body); });
}

}  // namespace reftrain::simd
