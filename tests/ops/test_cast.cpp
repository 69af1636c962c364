// f32 <-> f16 casts (ops/cast.h) against a reference written independently here: it works on
// values in double (frexp / ldexp and round-to-nearest-even by nearbyint), not on bit fields, so
// it shares no code or method with the kernel's integer path. Every check runs all three
// implementations — the scalar portable function, the portable array cast and the default
// array cast (F16C when compiled in) — and compares bit patterns, never values, so ±0 and NaN
// payloads are checked too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/cast.h"

namespace reftrain {
namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
uint16_t bits(f16 h) {
  uint16_t u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}
f16 f16_from_bits(uint16_t u) {
  f16 h;
  std::memcpy(&h, &u, sizeof h);
  return h;
}

std::string hex(uint32_t u, int width) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*X", width, unsigned(u));
  return buf;
}

// ---------------------------------------------------------------------------------------------
// The reference.

// f32 -> f16 by value: clamp to ±65504, then either a subnormal (a multiple of 2^-24, rounded by
// nearbyint in the default round-to-nearest-even mode) or a normal number 2^E·(1 + M/1024)
// read off frexp. NaN: the documented policy, quiet with sign and top payload bits.
uint16_t ref_f32_to_f16(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return sign | 0x7E00 | uint16_t((bits(x) >> 13) & 0x3FF);
  const double a = std::min(std::fabs(double(x)), 65504.0);
  if (a < std::ldexp(1.0, -14)) {
    const double q = std::nearbyint(std::ldexp(a, 24));  // exact scaling, then RNE
    return sign | uint16_t(q);  // q = 1024 is the smallest normal's encoding, correctly
  }
  int e;
  const double f = std::frexp(a, &e);  // a = f·2^e, f in [0.5, 1)
  int E = e - 1;                       // a = (2f)·2^E, 2f in [1, 2)
  double M = std::nearbyint((2 * f - 1) * 1024);
  if (M == 1024) {  // rounded up to the next power of two
    M = 0;
    ++E;
  }
  return sign | uint16_t((E + 15) << 10) | uint16_t(M);
}

// f16 -> f32 by value: ±0, subnormal M·2^-24, normal (1024 + M)·2^(E-25), ±Inf, NaN (quiet,
// payload shifted to the top of the f32 mantissa).
uint32_t ref_f16_to_f32_bits(uint16_t h) {
  const bool neg = h & 0x8000;
  const int E = (h >> 10) & 0x1F, M = h & 0x3FF;
  if (E == 31 && M != 0) return (neg ? 0x80000000u : 0u) | 0x7FC00000u | (uint32_t(M) << 13);
  double v;
  if (E == 31) {
    v = std::numeric_limits<double>::infinity();
  } else if (E == 0) {
    v = std::ldexp(double(M), -24);
  } else {
    v = std::ldexp(double(1024 + M), E - 25);
  }
  return bits(float(neg ? -v : v));
}

// ---------------------------------------------------------------------------------------------
// The three implementations, on one value and on arrays.

// f32 -> f16 of x through: the scalar function, the portable array, the default array. The
// arrays put x at each of the 8 lanes and in the tail, so both the vector body and the padded
// tail of the F16C path see it.
void expect_to_f16(float x, uint16_t want, const std::string& what) {
  SCOPED_TRACE(what + " = " + hex(bits(x), 8));
  EXPECT_EQ(hex(ref_f32_to_f16(x), 4), hex(want, 4)) << "the test's reference disagrees";
  EXPECT_EQ(hex(f32_to_f16_bits(x), 4), hex(want, 4)) << "scalar portable";
  std::vector<float> src(11, x);
  std::vector<f16> a(11), b(11);
  cast_f32_to_f16(a.data(), src.data(), src.size());
  cast_f32_to_f16_fast(b.data(), src.data(), src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(hex(bits(a[i]), 4), hex(want, 4)) << "portable array, element " << i;
    EXPECT_EQ(hex(bits(b[i]), 4), hex(want, 4)) << "default array, element " << i;
  }
}

void expect_to_f32(uint16_t h, uint32_t want, const std::string& what) {
  SCOPED_TRACE(what + " = " + hex(h, 4));
  EXPECT_EQ(hex(ref_f16_to_f32_bits(h), 8), hex(want, 8)) << "the test's reference disagrees";
  EXPECT_EQ(hex(bits(f16_bits_to_f32(h)), 8), hex(want, 8)) << "scalar portable";
  std::vector<f16> src(11, f16_from_bits(h));
  std::vector<float> a(11), b(11);
  cast_f16_to_f32(a.data(), src.data(), src.size());
  cast_f16_to_f32_fast(b.data(), src.data(), src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(hex(bits(a[i]), 8), hex(want, 8)) << "portable array, element " << i;
    EXPECT_EQ(hex(bits(b[i]), 8), hex(want, 8)) << "default array, element " << i;
  }
}

const float kMinSub = std::ldexp(1.0f, -24);     // smallest f16 subnormal
const float kMinNormal = std::ldexp(1.0f, -14);  // smallest f16 normal

// ---------------------------------------------------------------------------------------------
// Named values, f32 -> f16.

TEST(Cast, Exact) {
  expect_to_f16(1.0f, 0x3C00, "1");
  expect_to_f16(-2.0f, 0xC000, "-2");
  expect_to_f16(0.5f, 0x3800, "0.5");
  expect_to_f16(1.0f + 1.0f / 1024, 0x3C01, "1 + 2^-10");
  expect_to_f16(65504.0f, 0x7BFF, "65504");
  expect_to_f16(-65504.0f, 0xFBFF, "-65504");
}

TEST(Cast, Zeros) {
  expect_to_f16(0.0f, 0x0000, "+0");
  expect_to_f16(-0.0f, 0x8000, "-0");
  expect_to_f16(from_bits(0x00000001), 0x0000, "smallest f32 subnormal");
  expect_to_f16(from_bits(0x80000001), 0x8000, "-smallest f32 subnormal");
}

// Saturation: everything beyond 65504 — including what plain RNE would round to Inf (≥ 65520)
// and Inf itself — becomes ±65504.
TEST(Cast, SaturatesToMax) {
  expect_to_f16(65505.0f, 0x7BFF, "65505");
  expect_to_f16(65519.0f, 0x7BFF, "65519");
  expect_to_f16(65520.0f, 0x7BFF, "65520 (RNE alone gives Inf)");
  expect_to_f16(65536.0f, 0x7BFF, "65536");
  expect_to_f16(1e6f, 0x7BFF, "1e6");
  expect_to_f16(-1e6f, 0xFBFF, "-1e6");
  expect_to_f16(std::numeric_limits<float>::max(), 0x7BFF, "FLT_MAX");
  expect_to_f16(std::numeric_limits<float>::infinity(), 0x7BFF, "+Inf");
  expect_to_f16(-std::numeric_limits<float>::infinity(), 0xFBFF, "-Inf");
}

// Round to nearest, ties to even, in the normal range: between 1 and 1 + 2^-10 (spacing 2^-10).
TEST(Cast, RoundToNearestEven) {
  expect_to_f16(1.0f + std::ldexp(1.0f, -11), 0x3C00, "1 + 2^-11 (tie, down to even 1.0)");
  expect_to_f16(1.0f + 3 * std::ldexp(1.0f, -11), 0x3C02, "1 + 3·2^-11 (tie, up to even)");
  expect_to_f16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f), 0x3C01, "just above a tie");
  expect_to_f16(std::nextafter(1.0f + 3 * std::ldexp(1.0f, -11), 0.0f), 0x3C01, "just below a tie");
  expect_to_f16(-(1.0f + std::ldexp(1.0f, -11)), 0xBC00, "-(1 + 2^-11)");
  // 2 - 2^-11 is the tie between 2 - 2^-10 (0x3BFF, odd) and 2 (0x4000): the mantissa carry
  // moves into the exponent.
  expect_to_f16(2.0f - std::ldexp(1.0f, -11), 0x4000, "2 - 2^-11");
  expect_to_f16(std::nextafter(2.0f - std::ldexp(1.0f, -11), 0.0f), 0x3FFF, "below 2 - 2^-11");
  // Near the top of the range, where the spacing is 32: 65488 is a tie between 65472 (0x7BFE)
  // and 65504 (0x7BFF, odd), so it goes down.
  expect_to_f16(65488.0f, 0x7BFE, "65488");
  expect_to_f16(65489.0f, 0x7BFF, "65489");
  expect_to_f16(0.1f, 0x2E66, "0.1");
}

// The subnormal range: multiples of 2^-24, around the smallest one and the top one.
TEST(Cast, Subnormals) {
  expect_to_f16(kMinSub, 0x0001, "2^-24");
  expect_to_f16(-kMinSub, 0x8001, "-2^-24");
  expect_to_f16(kMinSub / 2, 0x0000, "2^-25 (tie, to even 0)");
  expect_to_f16(-kMinSub / 2, 0x8000, "-2^-25 (to -0)");
  expect_to_f16(std::nextafter(kMinSub / 2, 1.0f), 0x0001, "just above 2^-25");
  expect_to_f16(std::nextafter(kMinSub / 2, 0.0f), 0x0000, "just below 2^-25");
  expect_to_f16(kMinSub / 4, 0x0000, "2^-26");
  expect_to_f16(1.5f * kMinSub, 0x0002, "1.5·2^-24 (tie, up to even 2)");
  expect_to_f16(2.5f * kMinSub, 0x0002, "2.5·2^-24 (tie, down to even 2)");
  expect_to_f16(std::nextafter(1.5f * kMinSub, 0.0f), 0x0001, "just below 1.5·2^-24");
  expect_to_f16(3 * kMinSub, 0x0003, "3·2^-24");
  expect_to_f16(1000.3f * kMinSub, 0x03E8, "1000.3·2^-24");
}

// The top subnormal 1023·2^-24 (0x03FF) and the smallest normal 2^-14 = 1024·2^-24 (0x0400).
TEST(Cast, SubnormalNormalBoundary) {
  expect_to_f16(1023 * kMinSub, 0x03FF, "max subnormal");
  expect_to_f16(kMinNormal, 0x0400, "min normal");
  expect_to_f16(1023.5f * kMinSub, 0x0400, "tie between them: to even 0x0400");
  expect_to_f16(std::nextafter(1023.5f * kMinSub, 0.0f), 0x03FF, "just below that tie");
  expect_to_f16(1022.5f * kMinSub, 0x03FE, "1022.5·2^-24 (tie, to even 0x03FE)");
  expect_to_f16(std::nextafter(kMinNormal, 0.0f), 0x0400, "just below min normal");
  expect_to_f16(kMinNormal + kMinSub, 0x0401, "min normal + one f16 ulp");
  expect_to_f16(kMinNormal + kMinSub / 2, 0x0400, "min normal + half an ulp (tie, to even)");
  expect_to_f16(-1023 * kMinSub, 0x83FF, "-max subnormal");
  expect_to_f16(-kMinNormal, 0x8400, "-min normal");
}

// NaN stays NaN: quiet, sign kept, payload bits 22..13 kept (the documented policy).
TEST(Cast, NaN) {
  expect_to_f16(std::numeric_limits<float>::quiet_NaN(), 0x7E00, "qNaN");
  expect_to_f16(-std::numeric_limits<float>::quiet_NaN(), 0xFE00, "-qNaN");
  expect_to_f16(from_bits(0x7F800001), 0x7E00, "sNaN, low payload (lost, but still NaN)");
  expect_to_f16(from_bits(0x7FA00000), 0x7F00, "sNaN, high payload");
  expect_to_f16(from_bits(0xFFC02000), 0xFE01, "-qNaN, payload 1 after the shift");
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(from_bits(0x7F800001)))));
}

// ---------------------------------------------------------------------------------------------
// Named values, f16 -> f32.

TEST(Cast, ToF32Named) {
  expect_to_f32(0x3C00, bits(1.0f), "1");
  expect_to_f32(0x0000, 0x00000000, "+0");
  expect_to_f32(0x8000, 0x80000000, "-0");
  expect_to_f32(0x0001, bits(kMinSub), "min subnormal");
  expect_to_f32(0x8001, bits(-kMinSub), "-min subnormal");
  expect_to_f32(0x0200, bits(512 * kMinSub), "subnormal 512·2^-24");
  expect_to_f32(0x03FF, bits(1023 * kMinSub), "max subnormal");
  expect_to_f32(0x0400, bits(kMinNormal), "min normal");
  expect_to_f32(0x7BFF, bits(65504.0f), "max");
  expect_to_f32(0xFBFF, bits(-65504.0f), "-max");
  expect_to_f32(0x7C00, 0x7F800000, "+Inf");
  expect_to_f32(0xFC00, 0xFF800000, "-Inf");
  expect_to_f32(0x7E00, 0x7FC00000, "qNaN");
  expect_to_f32(0x7C01, 0x7FC02000, "sNaN (made quiet, payload kept)");
  expect_to_f32(0xFD00, 0xFFE00000, "-sNaN with payload");
}

// ---------------------------------------------------------------------------------------------
// Exhaustive and swept comparisons.

// Every f16 bit pattern: the default path, the portable array and the scalar function give the
// same bits, and they are the reference's. The array starts at element 3 and ends 2 short so the
// F16C path sees an unaligned start and a tail.
TEST(Cast, AllF16ToF32) {
  std::vector<f16> src(65536);
  for (uint32_t h = 0; h < 65536; ++h) src[h] = f16_from_bits(uint16_t(h));
  std::vector<float> fast(65536, -1.0f), port(65536, -1.0f);
  cast_f16_to_f32_fast(fast.data() + 3, src.data() + 3, 65536 - 5);
  cast_f16_to_f32_fast(fast.data(), src.data(), 3);
  cast_f16_to_f32_fast(fast.data() + 65534, src.data() + 65534, 2);
  cast_f16_to_f32(port.data(), src.data(), 65536);
  int bad = 0;
  for (uint32_t h = 0; h < 65536 && bad < 10; ++h) {
    const uint32_t want = ref_f16_to_f32_bits(uint16_t(h));
    const uint32_t scalar = bits(f16_bits_to_f32(uint16_t(h)));
    if (bits(fast[h]) != want || bits(port[h]) != want || scalar != want) {
      ++bad;
      ADD_FAILURE() << "f16 " << hex(h, 4) << ": reference " << hex(want, 8) << ", default "
                    << hex(bits(fast[h]), 8) << ", portable array " << hex(bits(port[h]), 8)
                    << ", scalar " << hex(scalar, 8);
    }
  }
}

// f16 -> f32 -> f16 is the identity on every finite f16. ±Inf comes back as ±65504 (the clamp
// saturates Inf, by the contract) and a NaN comes back as the same NaN made quiet.
TEST(Cast, RoundTripEveryF16) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536 && bad < 10; ++h) {
    const uint16_t back = f32_to_f16_bits(f16_bits_to_f32(uint16_t(h)));
    const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
    const bool is_inf = (h & 0x7FFF) == 0x7C00;
    const uint16_t want = is_nan   ? uint16_t(h | 0x0200)
                          : is_inf ? uint16_t((h & 0x8000) | 0x7BFF)
                                   : uint16_t(h);
    if (back != want) {
      ++bad;
      ADD_FAILURE() << "f16 " << hex(h, 4) << " came back as " << hex(back, 4) << ", want "
                    << hex(want, 4);
    }
  }
}

// Every f32 rounding boundary of the f16 grid: for each pair of neighbouring finite f16 values
// (both signs), their midpoint (exact in f32) and the f32 values one ulp either side.
TEST(Cast, AllF16MidpointsAndNeighbours) {
  std::vector<float> src;
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    const double mid =
        (double(f16_bits_to_f32(uint16_t(h))) + double(f16_bits_to_f32(uint16_t(h + 1)))) / 2;
    const float m = float(mid);
    ASSERT_EQ(double(m), mid) << "midpoint not exact in f32";
    for (float s : {1.0f, -1.0f}) {
      src.push_back(s * m);
      src.push_back(s * std::nextafter(m, 0.0f));
      src.push_back(s * std::nextafter(m, 1e30f));
    }
  }
  std::vector<f16> fast(src.size()), port(src.size());
  cast_f32_to_f16_fast(fast.data(), src.data(), src.size());
  cast_f32_to_f16(port.data(), src.data(), src.size());
  int bad = 0;
  for (size_t i = 0; i < src.size() && bad < 10; ++i) {
    const uint16_t want = ref_f32_to_f16(src[i]);
    if (bits(fast[i]) != want || bits(port[i]) != want || f32_to_f16_bits(src[i]) != want) {
      ++bad;
      ADD_FAILURE() << "f32 " << hex(bits(src[i]), 8) << ": reference " << hex(want, 4)
                    << ", default " << hex(bits(fast[i]), 4) << ", portable array "
                    << hex(bits(port[i]), 4);
    }
  }
}

// A sweep of the whole f32 space: every 4099th bit pattern (4099 is prime, so every bit of the
// pattern varies), about a million values, covering NaNs, infinities, f32 subnormals and every
// exponent. Default path, portable array and reference agree bit for bit.
TEST(Cast, SweepF32ToF16) {
  std::vector<float> src;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099) src.push_back(from_bits(uint32_t(u)));
  std::vector<f16> fast(src.size()), port(src.size());
  cast_f32_to_f16_fast(fast.data(), src.data(), src.size());
  cast_f32_to_f16(port.data(), src.data(), src.size());
  int bad = 0;
  size_t nans = 0, saturated = 0, subnormal = 0;
  for (size_t i = 0; i < src.size() && bad < 10; ++i) {
    const uint16_t want = ref_f32_to_f16(src[i]);
    nans += std::isnan(src[i]);
    saturated += (want & 0x7FFF) == 0x7BFF;
    subnormal += (want & 0x7C00) == 0 && (want & 0x3FF) != 0;
    if (bits(fast[i]) != want || bits(port[i]) != want) {
      ++bad;
      ADD_FAILURE() << "f32 " << hex(bits(src[i]), 8) << ": reference " << hex(want, 4)
                    << ", default " << hex(bits(fast[i]), 4) << ", portable array "
                    << hex(bits(port[i]), 4);
    }
  }
  // Not vacuous: the sweep reaches each special region.
  EXPECT_GT(nans, 1000u);
  EXPECT_GT(saturated, 1000u);
  EXPECT_GT(subnormal, 1000u);
}

// The fast path uses conversion instructions in every build reftrain supports (F16C from
// x86-64-v3 on, NEON on aarch64): otherwise the comparisons above would hold trivially and say
// nothing about a fast path.
TEST(Cast, FastPathUsesConversionInstructions) {
  const std::string used = kCastInstructions;
  EXPECT_TRUE(used == "F16C" || used == "NEON") << used;
}

// Empty and short arrays: nothing written past n.
TEST(Cast, ShortArraysWriteOnlyN) {
  for (size_t n = 0; n <= 17; ++n) {
    std::vector<float> src(n, 3.0f), back(n + 4, -7.0f);
    std::vector<f16> dst(n + 4, f16_from_bits(0x5555));
    cast_f32_to_f16_fast(dst.data(), src.data(), n);
    for (size_t i = 0; i < n + 4; ++i) {
      EXPECT_EQ(bits(dst[i]), i < n ? 0x4200 : 0x5555) << "n " << n << " element " << i;
    }
    cast_f16_to_f32_fast(back.data(), dst.data(), n);
    for (size_t i = 0; i < n + 4; ++i) {
      EXPECT_EQ(back[i], i < n ? 3.0f : -7.0f) << "n " << n << " element " << i;
    }
  }
}

}  // namespace
}  // namespace reftrain
