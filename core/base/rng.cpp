#include "core/base/rng.h"

#include <cmath>

namespace reftrain {

namespace {
constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = uint64_t{a} * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}
}  // namespace

Philox4x32 philox4x32_10(Philox4x32 c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kPhiloxM0, c[0], hi0, lo0);
    mulhilo(kPhiloxM1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kPhiloxW0;
    k[1] += kPhiloxW1;
  }
  return c;
}

Philox4x32 CounterRng::words(uint64_t index, uint32_t sub) const {
  const Philox4x32 counter = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), sub,
                              static_cast<uint32_t>(stream_)};
  return philox4x32_10(counter, {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)});
}

float CounterRng::uniform(uint64_t index, uint32_t sub) const {
  return static_cast<float>(words(index, sub)[0] >> 8) * (1.0f / 16777216.0f);
}

double CounterRng::normal(uint64_t index, uint32_t sub) const {
  const Philox4x32 w = words(index, sub);
  const double u1 = (static_cast<double>(w[0]) + 1.0) / 4294967296.0;  // (0, 1]
  const double u2 = static_cast<double>(w[1]) / 4294967296.0;          // [0, 1)
  const double two_pi = 6.283185307179586476925286766559;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
}

uint64_t CounterRng::below(uint64_t n, uint64_t index, uint32_t sub) const {
  const Philox4x32 w = words(index, sub);
  const uint64_t x = (uint64_t{w[1]} << 32) | w[0];
  return static_cast<uint64_t>((static_cast<unsigned __int128>(x) * n) >> 64);
}

}  // namespace reftrain
