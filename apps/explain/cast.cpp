// explain: the f32 -> f16 cast of the fp16 weight mirror and its inverse (docs/kernels/08_cast.md).
#include "ops/cast.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/explain/explain.h"

namespace reftrain::explain {

namespace {

std::string binary(uint32_t v, int width) {
  std::string s;
  for (int b = width - 1; b >= 0; --b) s += (v >> b) & 1 ? '1' : '0';
  return s;
}

// How a remainder compares with half of the last kept unit, and where that sends the kept part.
std::string rounding(uint32_t rem, uint32_t half, uint32_t kept) {
  if (rem < half) return "below half: round down";
  if (rem > half) return "above half: round up";
  return kept & 1 ? "tie, kept part odd: up to even" : "tie, kept part even: stays";
}

// The reference path's case analysis for one finite or infinite value, as text.
void explain_rounding(Printer& out, float x) {
  const uint32_t a = bits_of(x) & 0x7FFFFFFF;
  const int e = int(a >> 23);
  const uint32_t m = a & 0x7FFFFF;
  if (a > 0x477FE000) {  // |x| > 65504
    out.line(fmt("    clamp: |x| > 65504, so x becomes %s65504 (exactly an f16)",
                 std::signbit(x) ? "-" : "+"));
    return;
  }
  out.line("    clamp: |x| <= 65504, unchanged");
  if (a >= 0x38800000) {  // ≥ 2^-14: normal f16
    const uint32_t kept = m >> 13, rem = m & 0x1FFF;
    out.line(fmt("    f32 exponent e = %d (2^%d), mantissa mant = 0x%06X", e, e - 127, m));
    out.line(
        fmt("    normal f16: E = e - 112 = %d; keep mant's top 10 bits 0x%03X,", e - 112, kept));
    out.line(fmt("    dropped 13 bits 0x%04X vs half 0x1000: %s", rem,
                 rounding(rem, 0x1000, kept).c_str()));
    return;
  }
  if (a <= 0x33000000) {  // ≤ 2^-25
    out.line("    |x| <= 2^-25, half the smallest subnormal: becomes signed 0");
    return;
  }
  const int s = 126 - e;
  const uint32_t full = m | 0x800000, q = full >> s, rem = full & ((1u << s) - 1);
  out.line(
      fmt("    below 2^-14: f16 subnormal, M = |x| / 2^-24 = %.6f", std::abs(double(x)) * 0x1p24));
  out.line(fmt("    M = %u + %.6f: %s", q, double(rem) / double(1u << s),
               rounding(rem, 1u << (s - 1), q).c_str()));
}

void explain_value(Printer& out, float x, const std::string& note) {
  f16 h, h_reference;
  cast_f32_to_f16_fast(&h, &x, 1);
  cast_f32_to_f16(&h_reference, &x, 1);
  const uint16_t hb = bits_of(h);
  const uint16_t hp = f32_to_f16_bits(x);
  float back;
  cast_f16_to_f32_fast(&back, &h, 1);
  out.line(fmt("  x = %.9g   (f32 bits 0x%08X)%s", double(x), bits_of(x), note.c_str()));
  explain_rounding(out, x);
  const uint32_t S = hb >> 15, E = (hb >> 10) & 0x1F, M = hb & 0x3FF;
  out.line(fmt("    f16 bits 0x%04X = sign %u | E %s | M %s", hb, S, binary(E, 5).c_str(),
               binary(M, 10).c_str()));
  if (E == 0) {
    out.line(fmt("    value = %s%u x 2^-24", S ? "-" : "+", M));
  } else {
    out.line(fmt("    value = %s2^(%u-15) x (1 + %u/1024)", S ? "-" : "+", E, M));
  }
  const double err = double(back) - double(x);
  std::string rel;
  if (x != 0.0f) rel = fmt(", relative %.2e", err / std::abs(double(x)));
  out.line(fmt("    back in f32: %.10g   error %.4g%s", double(back), err, rel.c_str()));
  if (hp != hb || bits_of(h_reference) != hb) {
    out.line(fmt("    MISMATCH: the reference gives 0x%04X", hp));
  }
}

void explain_nan(Printer& out, uint32_t u, const std::string& what) {
  const float x = float_of(u);
  f16 h;
  cast_f32_to_f16_fast(&h, &x, 1);
  float back;
  cast_f16_to_f32_fast(&back, &h, 1);
  out.line(fmt("  %-22s f32 0x%08X -> f16 0x%04X -> f32 0x%08X", what.c_str(), u, bits_of(h),
               bits_of(back)));
  if (f32_to_f16_bits(x) != bits_of(h)) out.line("    MISMATCH with the reference");
}

void run_cast(Printer& out, uint64_t seed) {
  out.title("cast: f32 -> f16 = round-to-nearest-even(clamp(x, -65504, 65504))");
  out.line("f16: 1 sign bit, 5 exponent bits E (bias 15), 10 mantissa bits M.");
  out.line("Each value goes through cast_f32_to_f16_fast (F16C when built with it) and");
  out.line("back through cast_f16_to_f32_fast; the bit-level reference must agree.");

  out.section("fixed values");
  const std::vector<float> fixed = {1.0f,  0.1f,  1000.0f, 65504.0f, 65520.0f, 1e6f,
                                    -1e6f, 1e-6f, 1e-8f,   2049.0f,  2051.0f};
  const std::vector<std::string> notes = {"",
                                          "",
                                          "",
                                          "  the f16 max",
                                          "  halfway 65504..65536",
                                          "",
                                          "",
                                          "  subnormal range",
                                          "  underflow",
                                          "  tie (f16 step 2)",
                                          "  tie (f16 step 2)"};
  for (size_t i = 0; i < fixed.size(); ++i) explain_value(out, fixed[i], notes[i]);

  out.section("two weight-like values from the seed, in [-5, 5)");
  Inputs in(seed);
  for (double w : in.uniform(2, -5, 5)) explain_value(out, float(w), "");

  out.section("infinity and NaN (the CPU contract; WGSL leaves clamp(NaN) open)");
  explain_nan(out, 0x7F800000, "+Inf (clamped):");
  explain_nan(out, 0x7FC00000, "quiet NaN:");
  explain_nan(out, 0xFFC02000, "-NaN, payload 0x2000:");
  explain_nan(out, 0x7F800001, "signaling NaN:");
  out.line("  NaN stays NaN, made quiet, sign and payload bits 22..13 kept.");

  out.section("backward");
  out.line("  none: the cast is not differentiated. The fp16 mirror is a read-only copy");
  out.line("  of the fp32 master weights; the gradient computed with the mirror is applied");
  out.line("  to the master as if the cast were the identity. There is no gradient to");
  out.line("  check, so no finite-difference check either.");
}

}  // namespace

void add_cast(std::vector<Explainer>& v) {
  v.push_back({"cast", "f32 -> f16 (saturating, nearest-even) and back", "docs/kernels/08_cast.md",
               run_cast});
}

}  // namespace reftrain::explain
