// The one random number generator of reftrain: Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC'11), counter-based. A draw is a pure function of
// (key, counter), so any element, batch row or sampled token can be drawn independently of
// thread count and order. Streams separate the uses; see docs/rng.md.
#pragma once

#include <array>
#include <cstdint>

namespace reftrain {

using Philox4x32 = std::array<uint32_t, 4>;

// Philox4x32 with 10 rounds: counter (4 words) and key (2 words) in, 4 random words out.
Philox4x32 philox4x32_10(Philox4x32 counter, std::array<uint32_t, 2> key);

// What a draw is for; part of the counter, so the uses never share a random word.
enum class RngStream : uint32_t {
  kInit = 1,
  kTrainData = 2,
  kValData = 3,
  kSample = 4,
  kGolden = 5,  // the inputs of the per-kernel golden fixtures (core/golden/golden_kernels.h)
};

// A keyed view of Philox: key = seed, counter = (index lo, index hi, sub, stream).
class CounterRng {
 public:
  CounterRng(uint64_t seed, RngStream stream) : seed_(seed), stream_(stream) {}

  // Four independent 32-bit words for (index, sub).
  Philox4x32 words(uint64_t index, uint32_t sub = 0) const;
  // Uniform in [0, 1) with 24 random bits: (w >> 8) * 2^-24.
  float uniform(uint64_t index, uint32_t sub = 0) const;
  // Standard normal by Box-Muller from words 0 and 1 (u1 in (0, 1], u2 in [0, 1)).
  double normal(uint64_t index, uint32_t sub = 0) const;
  // Uniform integer in [0, n) by the multiply-shift of a 64-bit draw (bias below 2^-32 n).
  uint64_t below(uint64_t n, uint64_t index, uint32_t sub = 0) const;

 private:
  uint64_t seed_;
  RngStream stream_;
};

}  // namespace reftrain
