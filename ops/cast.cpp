#include "ops/cast.h"

#include "ops/cast_blocks.h"
#include "ops/kernel_record.h"
#include "simd/f16.h"

namespace reftrain {

namespace {

// v / 2^s rounded to nearest, ties to even (0 < s < 32).
uint32_t shift_right_rne(uint32_t v, int s) {
  const uint32_t q = v >> s;
  const uint32_t rem = v & ((uint32_t(1) << s) - 1);
  const uint32_t half = uint32_t(1) << (s - 1);
  return rem > half || (rem == half && (q & 1)) ? q + 1 : q;
}

constexpr uint32_t kF32ExpMask = 0x7F800000;  // exponent all ones: Inf or NaN
constexpr uint32_t kF32QuietBit = 0x00400000;
constexpr uint32_t kF32Max16 = 0x477FE000;         // 65504.0f, the largest finite f16
constexpr uint32_t kF32MinNormal16 = 0x38800000;   // 2^-14, the smallest normal f16
constexpr uint32_t kF32HalfMinSub16 = 0x33000000;  // 2^-25, half the smallest subnormal f16
constexpr uint16_t kF16Max = 0x7BFF;
constexpr uint16_t kF16QuietNaN = 0x7E00;

}  // namespace

// An f32 is sign | e (8 bits, bias 127) | m (23 bits); an f16 is sign | E (5 bits, bias 15) |
// M (10 bits). Cases by magnitude a = |x|:
//   NaN             quiet NaN, payload bits 22..13 kept
//   a > 65504       saturate to 65504 (this includes +Inf)
//   a ≥ 2^-14       normal: E = e - 112 and the 23-bit mantissa rounded to 10 bits. Rounding
//                   (E·2^23 + m) / 2^13 as one integer lets a mantissa carry bump the exponent.
//   a ≤ 2^-25       ±0 (exactly 2^-25 is the tie between 0 and 2^-24: even is 0)
//   otherwise       subnormal: M = a / 2^-24 rounded. With the implicit bit, a = (2^23 + m)·
//                   2^(e-150), so M = (2^23 + m) / 2^(126-e); 126 - e lies in 14..24. M = 1024
//                   is the smallest normal's encoding, so that carry is right too.
uint16_t f32_to_f16_bits(float x) {
  const uint32_t u = bits_of(x);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7FFFFFFF;
  if (a > kF32ExpMask) return sign | kF16QuietNaN | uint16_t((a >> 13) & 0x3FF);
  if (a > kF32Max16) return sign | kF16Max;
  if (a >= kF32MinNormal16) return sign | uint16_t(shift_right_rne(a - (uint32_t(112) << 23), 13));
  if (a <= kF32HalfMinSub16) return sign;
  const int e = int(a >> 23);
  const uint32_t mant = (a & 0x7FFFFF) | 0x800000;
  return sign | uint16_t(shift_right_rne(mant, 126 - e));
}

// Cases by E: 31 is Inf or NaN (NaN made quiet); 1..30 normal, rebias the exponent (E + 112)
// and widen the mantissa; 0 with M ≠ 0 is subnormal, M·2^-24: normalise so M's leading bit
// (at position p) becomes the implicit one, giving e = p - 24 + 127.
float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t E = (h >> 10) & 0x1F;
  const uint32_t M = h & 0x3FF;
  if (E == 31) return float_of(sign | kF32ExpMask | (M != 0 ? kF32QuietBit : 0) | (M << 13));
  if (E != 0) return float_of(sign | ((E + 112) << 23) | (M << 13));
  if (M == 0) return float_of(sign);
  int p = 9;
  while (!(M & (uint32_t(1) << p))) --p;
  const uint32_t e = uint32_t(p - 24 + 127);
  return float_of(sign | (e << 23) | ((M << (23 - p)) & 0x7FFFFF));
}

void cast_f32_to_f16(f16* dst, const float* src, size_t n) {
  cast_elements(dst, src, n, [](float x) { return f16_of(f32_to_f16_bits(x)); });
}

void cast_f16_to_f32(float* dst, const f16* src, size_t n) {
  cast_elements(dst, src, n, [](f16 x) { return f16_bits_to_f32(bits_of(x)); });
}

// The fast casts: the same block loop on every ISA, over kCastLanes elements per instruction
// (simd/f16.h: F16C's 8 lanes on x86, NEON's 4 on aarch64).
namespace {

constexpr size_t kCastLanes = simd::kF16Lanes;
void to_f16_lanes(f16* dst, const float* src) {
  simd::narrow_f16_lanes(dst, simd::load_f32_lanes(src));
}
void to_f32_lanes(float* dst, const f16* src) {
  simd::store_f32_lanes(dst, simd::widen_f16_lanes(src));
}

}  // namespace

void cast_f32_to_f16_fast(f16* dst, const float* src, size_t n) {
  cast_lanes<kCastLanes, to_f16_lanes>(dst, src, n);
}

void cast_f16_to_f32_fast(float* dst, const f16* src, size_t n) {
  cast_lanes<kCastLanes, to_f32_lanes>(dst, src, n);
}

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> cast_records() {
  using namespace record;
  const std::string tests = "tests/ops/test_cast.cpp";
  return {
      {"cast_f32_to_f16",
       "dst = f16(clamp(src, −65504, 65504)), round to nearest, ties to even",
       {in("src", "f32", "[n]"), out("dst", "f16", "[n]"), scalar("n")},
       "08_cast.wgsl",
       "",
       "ops/cast.h",
       "cast_f32_to_f16, f32_to_f16_bits",
       "cast_f32_to_f16_fast",
       "threaded, the ISA's conversion where it has one; bit-identical",
       "",
       "cast.wgsl",
       "docs/kernels/08_cast.md",
       "cast",
       tests,
       ""},
      {"cast_f16_to_f32",
       "dst = f32(src), exact",
       {in("src", "f16", "[n]"), out("dst", "f32", "[n]"), scalar("n")},
       "08_cast.wgsl",
       "",
       "ops/cast.h",
       "cast_f16_to_f32, f16_bits_to_f32",
       "cast_f16_to_f32_fast",
       "threaded, the ISA's conversion where it has one; bit-identical",
       "",
       "cast.wgsl",
       "docs/kernels/08_cast.md",
       "cast",
       tests,
       ""},
  };
}

}  // namespace reftrain
