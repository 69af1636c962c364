// Reductions in one fixed order, the same on every ISA: the sums, dot products and maxima of the
// fast kernels give the same bits on the AVX-512 build and on the AVX2 (REFTRAIN_PORTABLE) build.
//
// The order, for n elements with a step that folds element i into an accumulator:
//   1. 16 lanes (simd/wide.h), all starting at the identity (0 for a sum, -inf for a max).
//      Lane l folds elements l, l + 16, l + 32, ... in that order, while a full block of 16 fits:
//      elements 0 .. 16·⌊n/16⌋ - 1.
//   2. The lanes are combined by a fixed tree: lane l with lane l + 8 (l < 8), then l with l + 4,
//      l with l + 2, lane 0 with lane 1.
//   3. The leftover n mod 16 elements are folded into that result one at a time, in order.
// A step is written once for V = float and V = Wide (step 3 calls it with float), using only
// operations that round the same way in both (simd::fma, never a compiler-contracted a·b + c).
// tests/common/fast_check.h emulates this order in scalar code and requires equal bits.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "simd/wide.h"

namespace reftrain::simd {

// The lane type of an accumulator array a step receives: lane_type<decltype(acc)>.
template <typename A>
using lane_type = typename std::decay_t<A>::value_type;

// Step 2: the fixed tree over the 16 lanes, with combine(a, b) = a + b or max(a, b).
template <typename Combine>
float combine_lanes(const Wide& v, Combine combine) {
  alignas(64) float lane[kWidth];
  v.store(lane);
  for (size_t half = kWidth / 2; half > 0; half /= 2) {
    for (size_t l = 0; l < half; ++l) lane[l] = combine(lane[l], lane[l + half]);
  }
  return lane[0];
}

// K sums at once over i < n (e.g. Σdn and Σdn·n of one row). step(acc, i) updates every
// acc[k] with element i, where acc is a std::array of K Wides or K floats.
template <size_t K, typename Step>
std::array<float, K> sums16(size_t n, Step&& step) {
  std::array<Wide, K> wide;
  wide.fill(Wide(0.0f));
  size_t i = 0;
  for (; i + kWidth <= n; i += kWidth) step(wide, i);
  std::array<float, K> acc;
  for (size_t k = 0; k < K; ++k) {
    acc[k] = combine_lanes(wide[k], [](float a, float b) { return a + b; });
  }
  for (; i < n; ++i) step(acc, i);
  return acc;
}

// One sum: acc = step(acc, i) for acc a Wide or a float.
template <typename Step>
float sum16(size_t n, Step&& step) {
  return sums16<1>(n, [&](auto& acc, size_t i) { acc[0] = step(acc[0], i); })[0];
}

// A maximum: acc = step(acc, i), where the step returns simd::max(acc, element i).
template <typename Step>
float max16(size_t n, Step&& step) {
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  Wide wide(kLowest);
  size_t i = 0;
  for (; i + kWidth <= n; i += kWidth) wide = step(wide, i);
  float acc = combine_lanes(wide, [](float a, float b) { return simd::max(a, b); });
  for (; i < n; ++i) acc = step(acc, i);
  return acc;
}

}  // namespace reftrain::simd
