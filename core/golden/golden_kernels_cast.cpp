// Golden fixtures of ops/cast: f32 → f16 and f16 → f32. Their bindings are the WGSL bind group
// of 08_cast.wgsl, in order; the references are the plain-named functions of ops/cast.h, which
// exist in float only (no float64 recomputation).
#include <algorithm>
#include <cmath>

#include "core/golden/golden_kernels.h"
#include "ops/cast.h"

namespace reftrain {

namespace {

using namespace fixture;

const char* const kSeed000 = "000_0d0944923f99234f.txt";

// Values each f32 → f16 rule must get right: saturation (65504 is the largest f16; 65520 would
// round to Inf without the clamp), ties to even (1 + 2^-11 → 1, 1 + 3·2^-11 → 1 + 2^-9), the
// subnormal range (2^-24 the smallest, 2^-25 the tie to 0), the smallest normal and ±0.
const float kCastSpecials[] = {0.0f,           -0.0f,       65504.0f, 65505.0f,     65520.0f,
                               -65520.0f,      1e6f,        -3e38f,   0x1p-24f,     0x1p-25f,
                               0x1.8p-25f,     -0x1p-24f,   0x1p-14f, 0x1.ffcp-15f, 1.00048828125f,
                               1.00146484375f, 0.33333334f, -2.0f,    0x1.004p0f};

Json make_cast_f32_to_f16(FixtureGen& g, const KernelDims& d) {
  // Magnitudes over 2^-28 .. 2^18: every f16 binade, the subnormals, and beyond the range.
  std::vector<float> x = g.draw_normal("src", size_t(d.n), 1.0);
  const std::vector<float> e = g.draw_uniform("exponent", size_t(d.n), -28.0, 18.0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(x[i], int(std::floor(e[i])));
  std::copy(std::begin(kCastSpecials), std::end(kCastSpecials), x.begin());
  g.add("src", {d.n}, x);
  return {{"n", d.n}, {"clamp", 65504.0}, {"rounding", "nearest, ties to even"}};
}

void run_cast_f32_to_f16(FixtureIo<float>& io, const KernelDims& d) {
  const std::vector<float> src = io.get("src");
  std::vector<uint16_t> dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) dst[i] = f32_to_f16_bits(src[i]);
  io.put_raw("dst", DType::kF16, {d.n}, dst.data());
}

Json make_cast_f16_to_f32(FixtureGen& g, const KernelDims& d) {
  // Every finite f16 is a candidate: bit patterns below 0x7C00 with either sign.
  const std::vector<int32_t> r = g.draw_below("src", size_t(d.n), 2 * 0x7C00);
  std::vector<uint16_t> h(r.size());
  for (size_t i = 0; i < r.size(); ++i) h[i] = uint16_t((r[i] & 1) << 15 | (r[i] >> 1));
  const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00};
  std::copy(std::begin(specials), std::end(specials), h.begin());
  g.add_raw("src", DType::kF16, {d.n}, h.data());
  return {{"n", d.n}};
}

void run_cast_f16_to_f32(FixtureIo<float>& io, const KernelDims& d) {
  const std::vector<uint16_t> src = io.halves("src");
  std::vector<float> dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) dst[i] = f16_bits_to_f32(src[i]);
  io.put("dst", {d.n}, dst);
}

}  // namespace

void add_cast_kernels(std::vector<KernelSpec>& v) {
  v.push_back(seed_kernel("cast_f32_to_f16", kSeed000, {{"dst", mirror_tolerance()}},
                          {"small", "awkward"}, make_cast_f32_to_f16, run_cast_f32_to_f16));
  v.push_back(seed_kernel("cast_f16_to_f32", kSeed000,
                          {{"dst", ulps(0, "every f16 is an f32: the widening is exact")}},
                          {"small", "awkward"}, make_cast_f16_to_f32, run_cast_f16_to_f32));
}

}  // namespace reftrain
