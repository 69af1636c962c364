// explain: bf16, the format, and the canonical bf16 product against the sequential FMA chain
// (docs/kernels/14_bf16.md).
#include "ops/bf16.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/explain/explain.h"
#include "ops/cast.h"

namespace reftrain::explain {

namespace {

constexpr int kBlock = 32;     // the canonical order's block (ops/matmul_bf16.h)
constexpr int kMaxDraws = 16;  // redraws allowed for the two orders to differ

// Floats in the order of their values as integers, so that the difference of two is the number of
// floats between them (ulps).
int64_t ordered(float x) {
  const uint32_t u = bits_of(x);
  return u & 0x80000000u ? -int64_t(u & 0x7FFFFFFFu) : int64_t(u);
}

// The two orders of one draw, step by step. The canonical order is written out here the way
// dot_bf16_canonical runs it, so that every intermediate can be printed; the final value must be
// dot_bf16_canonical's, bit for bit.
Bf16Dot trace(std::vector<bf16> x, std::vector<bf16> w) {
  Bf16Dot d;
  const int K = int(x.size());
  auto at = [&](const std::vector<bf16>& v, int k) { return k < K ? bf16_to_f32(v[k]) : 0.0f; };
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kBlock) {
    float even = 0.0f, odd = 0.0f;
    for (int k = k0; k < k0 + kBlock; ++k) {
      float& chain = k % 2 == 0 ? even : odd;
      chain = fma_flush(at(x, k), at(w, k), chain);
      d.chain.push_back(chain);
    }
    acc = add_flush(acc, add_flush(even, odd));
    d.even.push_back(even);
    d.odd.push_back(odd);
    d.acc.push_back(acc);
  }
  float s = 0.0f;
  for (int k = 0; k < K; ++k) d.seq.push_back(s = fma_flush(at(x, k), at(w, k), s));
  const float kernel = dot_bf16_canonical(0.0f, x.data(), 1, w.data(), 1, K);
  if (bits_of(kernel) != bits_of(acc)) {
    throw std::logic_error("explain bf16_dot: the order written out gives " +
                           fmt("0x%08X", bits_of(acc)) + ", dot_bf16_canonical " +
                           fmt("0x%08X", bits_of(kernel)));
  }
  d.x = std::move(x);
  d.w = std::move(w);
  return d;
}

// Values of [-1, 1) scaled by 2^-s, s = 0..7: products of many sizes, so that the accumulator's
// rounding drops the low bits of some of them. (Products of 2-decimal values of one size mostly
// fit its 24 bits, and then both orders are exact.)
std::vector<bf16> draw(Inputs& in) {
  const Vec u = in.uniform(Bf16Dot::kK, -1, 1);
  const std::vector<int> s = in.tokens(Bf16Dot::kK, 8);
  std::vector<bf16> v;
  for (size_t k = 0; k < u.size(); ++k) v.push_back(f32_to_bf16(float(std::ldexp(u[k], -s[k]))));
  return v;
}

}  // namespace

int64_t ulps_between(float a, float b) {
  return std::abs(ordered(a) - ordered(b));
}

Bf16Dot bf16_dot_example(uint64_t seed) {
  Inputs in(seed);
  Bf16Dot d;
  for (int n = 1; n <= kMaxDraws; ++n) {
    std::vector<bf16> x = draw(in), w = draw(in);
    d = trace(std::move(x), std::move(w));
    d.draws = n;
    if (bits_of(d.canonical()) != bits_of(d.sequential())) break;
  }
  return d;
}

namespace {

// One value through both 16-bit formats: f16 keeps precision, bf16 keeps range.
void compare_formats(Printer& out) {
  out.section("bf16 against f16 (cast_f32_to_f16_fast, f32_to_bf16)");
  out.line("  x              f16                      bf16");
  auto row = [&](float x, const std::string& note) {
    f16 h;
    cast_f32_to_f16_fast(&h, &x, 1);
    const bf16 b = f32_to_bf16(x);
    out.line(fmt("  %-13.6g  0x%04X %-15.8g  0x%04X %-14.8g %s", double(x), bits_of(h),
                 double(f16_bits_to_f32(bits_of(h))), b.bits, double(bf16_to_f32(b)),
                 note.c_str()));
  };
  row(0.1f, "f16: 3 more bits");
  row(100000.0f, "f16 saturates");
  row(float(1.0 / 50257 / 4096), "f16 underflows");
  out.line("  (the last: 1/V/N, a dlogits value of gpt2-124m at init, B = 4, T = 1024)");
}

void print_step(Printer& out, const Bf16Dot& d, int k) {
  const int K = int(d.x.size());
  const std::string chain = fmt("%-4s %13.6e", k % 2 == 0 ? "even" : "odd", double(d.chain[k]));
  out.line(fmt("  %2d  0x%04X %10.3e   0x%04X %10.3e   %s  %13.6e", k, d.x[k].bits,
               double(bf16_to_f32(d.x[k])), d.w[k].bits, double(bf16_to_f32(d.w[k])), chain.c_str(),
               double(d.seq[k])));
  if (k == K - 1 && K % kBlock != 0) {
    out.line(fmt("  k %d..%d: zero padding; fma(0, 0, chain) leaves each chain as it is", K,
                 (K / kBlock + 1) * kBlock - 1));
  }
}

void print_block(Printer& out, const Bf16Dot& d, size_t b) {
  const float before = b == 0 ? 0.0f : d.acc[b - 1];
  out.line(fmt("  block %zu: even %.6e + odd %.6e = %.6e", b, double(d.even[b]), double(d.odd[b]),
               double(add_flush(d.even[b], d.odd[b]))));
  out.line(fmt("           acc = %.6e + %.6e = %.6e (0x%08X)", double(before),
               double(add_flush(d.even[b], d.odd[b])), double(d.acc[b]), bits_of(d.acc[b])));
}

void print_orders(Printer& out, const Bf16Dot& d) {
  out.section("both orders, step by step");
  out.line("  canonical: K in blocks of 32, the last padded with zeros; per block an even");
  out.line("  chain (even k) and an odd chain (odd k) of fma from +0, then");
  out.line("  acc = acc + (even + odd). sequential: one fma chain over k = 0, 1, .., K-1");
  out.line("  (the fp32 matmul's order). Every fma is fma_flush: one rounding to f32.");
  out.line("   k  x[k] (bf16)          w[k] (bf16)          chain after its fma  sequential");
  const int K = int(d.x.size());
  for (int k = 0; k < K; ++k) {
    print_step(out, d, k);
    if (k % kBlock == kBlock - 1 || k == K - 1) print_block(out, d, size_t(k / kBlock));
  }
}

void print_results(Printer& out, const Bf16Dot& d) {
  const float c = d.canonical(), s = d.sequential();
  // Exact in double: every product of two bf16 has 16 significant bits, and the inputs lie in
  // [0.01·2^-7, 1) in magnitude (or are 0), so every term is a multiple of 2^-42 below 1: the
  // 40-term sum spans fewer than 48 bits of float64's 53.
  double exact = 0.0;
  for (size_t k = 0; k < d.x.size(); ++k) {
    exact += double(bf16_to_f32(d.x[k])) * double(bf16_to_f32(d.w[k]));
  }
  const double ulp = std::ldexp(1.0, std::max(std::ilogb(exact), -126) - 23);
  out.section("results");
  out.line(fmt("  canonical   %.9g   bits 0x%08X   %+.2f ulp from exact", double(c), bits_of(c),
               (double(c) - exact) / ulp));
  out.line(fmt("  sequential  %.9g   bits 0x%08X   %+.2f ulp from exact", double(s), bits_of(s),
               (double(s) - exact) / ulp));
  out.line(fmt("  exact       %.12f (float64: every product and sum exact)", exact));
  out.line("  dot_bf16_canonical gives the canonical bits (checked on every run)");
  if (ulps_between(c, s) == 0) {
    out.line(fmt("  the two orders agree on these numbers (on all %d draws of the seed)", d.draws));
    return;
  }
  out.line(fmt("  the two orders differ by %lld ulp; which one is closer to the exact sum",
               static_cast<long long>(ulps_between(c, s))));
  out.line("  changes from input to input. The canonical one is the order the fastest");
  out.line("  hardware (AMX) runs, so every bf16 product of reftrain runs it.");
}

void print_subnormals(Printer& out) {
  out.section("subnormals: read as zero, flushed after rounding (x86's rule)");
  auto row = [&](const char* what, float a, float b, float c, const char* exact) {
    const float plain = std::fma(a, b, c), flushed = fma_flush(a, b, c);
    out.line(fmt("  fma(%s)   exact %s", what, exact));
    out.line(fmt("    std::fma %.9g (0x%08X)   fma_flush %.9g (0x%08X)", double(plain),
                 bits_of(plain), double(flushed), bits_of(flushed)));
  };
  row("2^-64, 2^-63, 0", 0x1p-64f, 0x1p-63f, 0.0f, "2^-127, a subnormal: 0");
  row("2^-75, -2^-75, 2^-126", 0x1p-75f, -0x1p-75f, 0x1p-126f,
      "2^-126 - 2^-150: tiny after rounding too: 0");
  row("2^-75, -2^-76, 2^-126", 0x1p-75f, -0x1p-76f, 0x1p-126f,
      "2^-126 - 2^-151: rounds to 2^-126, kept");
  out.line("  the last is the band [2^-126 - 2^-151, 2^-126): AArch64 decides tininess");
  out.line("  before rounding and gives 0 there. Random data does not reach it.");
}

void run_bf16_dot(Printer& out, uint64_t seed) {
  const Bf16Dot d = bf16_dot_example(seed);
  out.title("bf16_dot: out = sum_k x[k]*w[k] over K = 40 bf16 pairs, sums in f32");
  out.line("bf16: 1 sign bit, 8 exponent bits (f32's, bias 127), 7 mantissa bits: an f32");
  out.line("rounded to its top 16 bits (nearest even; subnormals to 0, NaN to 0x7FC0).");
  compare_formats(out);
  out.section("inputs");
  out.line(fmt("  x, w: %d values each from the seed, u*2^-s with u in [-1, 1) and s in 0..7,",
               Bf16Dot::kK));
  out.line("  rounded to bf16");
  if (d.draws > 1 && ulps_between(d.canonical(), d.sequential()) > 0) {
    out.line(fmt("  (the seed's first %d draw%s gave both orders the same bits: this is draw %d)",
                 d.draws - 1, d.draws > 2 ? "s" : "", d.draws));
  }
  print_orders(out, d);
  print_results(out, d);
  print_subnormals(out);
  out.section("backward");
  out.line("  dx[k] = dout*w[k], dw[k] = dout*x[k]: for a whole layer, two more products");
  out.line("  (linear_backward_data_bf16, linear_backward_weight_bf16), each in this same");
  out.line("  canonical order over its own sum, with dout rounded to bf16 first (dout16).");
}

}  // namespace

void add_bf16(std::vector<Explainer>& v) {
  v.push_back({"bf16_dot", "a bf16 dot product in the canonical and sequential orders",
               "docs/kernels/14_bf16.md", run_bf16_dot});
}

}  // namespace reftrain::explain
