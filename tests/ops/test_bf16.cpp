// bf16 (ops/bf16.h, ops/matmul_bf16.h): the conversions against a reference written here by value
// (double arithmetic, not bit fields), the canonical product's flush rule against values measured
// on x86 hardware, and every fast product path (emulated FMAs, VDPBF16PS, AMX: those this build
// and CPU have) bit for bit against the scalar reference at 1, 2, 3 and 16 threads, on edge
// shapes, every transpose, and inputs made to underflow. The PyTorch oracle of the same order is
// test_bf16_oracle.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/attention.h"
#include "ops/attention_bf16.h"
#include "ops/bf16.h"
#include "ops/matmul_bf16.h"
#include "simd/dot_bf16.h"
#ifdef REFTRAIN_AVX2_TWIN
#include "tests/common/avx2_kernels.h"
#endif

namespace reftrain {
namespace {

uint32_t f32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
float f32_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// f32 -> bf16 by value: NaN -> 0x7FC0; otherwise x rounded to bf16's grid with nearbyint (the
// default round-to-nearest-even mode): 8 significant bits read off frexp, or multiples of 2^-133
// below 2^-126 (bf16's subnormal spacing: the rounding is that of the format, as PyTorch's), then
// |result| < 2^-126 -> ±0. Exponents past 127 give ±Inf.
uint16_t ref_to_bf16(float x) {
  if (std::isnan(x)) return 0x7FC0;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isinf(x) || x == 0) return uint16_t(f32_bits(x) >> 16);
  const double a = std::fabs(double(x));
  int e;
  const double m = std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1)
  const double r = a < std::ldexp(1.0, -126) ? std::ldexp(std::nearbyint(std::ldexp(a, 133)), -133)
                                             : std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
  if (r < std::ldexp(1.0, -126)) return sign;
  if (r >= std::ldexp(1.0, 128)) return sign | 0x7F80;
  return uint16_t(f32_bits(float(r)) >> 16) | sign;
}

// Every upper half with low halves around the rounding points: 0, 1, just under/at/over half,
// all ones; plus the f32 subnormals' band and NaNs.
std::vector<float> conversion_cases() {
  std::vector<float> v;
  for (uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      v.push_back(f32_from_bits(hi << 16 | lo));
    }
  }
  return v;
}

TEST(Bf16Cast, ReferenceMatchesRoundingByValue) {
  for (float x : conversion_cases()) {
    ASSERT_EQ(f32_to_bf16(x).bits, ref_to_bf16(x)) << "x bits 0x" << std::hex << f32_bits(x);
  }
  EXPECT_EQ(f32_to_bf16(3.4028235e38f).bits, 0x7F80);  // rounds up past the largest bf16
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x007FFFFF)).bits, 0x0080);  // rounds up to 2^-126: kept
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x007F8000)).bits, 0x0080);  // a tie, to even: 2^-126
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x807F7FFF)).bits, 0x8000);  // stays subnormal: -0
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0xFFC12345)).bits, 0x7FC0);  // NaN: one quiet NaN
}

TEST(Bf16Cast, FastEqualsReferenceAndWideningIsExact) {
  const std::vector<float> x = conversion_cases();
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(33), size_t(4097), x.size()}) {
    std::vector<bf16> ref(n), fast(n);
    cast_f32_to_bf16(ref.data(), x.data(), n);
    cast_f32_to_bf16_fast(fast.data(), x.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(ref[i].bits, fast[i].bits) << "n " << n << " i " << i;
    std::vector<float> back_ref(n), back_fast(n);
    cast_bf16_to_f32(back_ref.data(), ref.data(), n);
    cast_bf16_to_f32_fast(back_fast.data(), ref.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(f32_bits(back_ref[i]), uint32_t(ref[i].bits) << 16);
      ASSERT_EQ(f32_bits(back_fast[i]), uint32_t(ref[i].bits) << 16);
    }
  }
}

// Values measured with VFMADD under MXCSR FTZ|DAZ on x86 (AMD Zen 4), the rule AMX and VDPBF16PS
// apply: tininess is decided after rounding to 24 bits with an unbounded exponent.
TEST(Bf16Product, FlushRuleMatchesMeasuredX86) {
  const float min_normal = 0x1p-126f;
  // Exactly 2^-126 - 2^-150: std::fma rounds it up to 2^-126 (gradual underflow), the hardware
  // rounds it to 2^-126 - 2^-150 (24 bits), which is tiny: 0.
  EXPECT_EQ(f32_bits(fma_flush(1.0f - 0x1p-8f, 0x1p-126f, 0x1p-126f * 0x1p-16f * 0 + 0.0f)), 0u)
      << "a product exactly representable as a subnormal";
  EXPECT_EQ(f32_bits(fma_flush(0x1p-52f, -0x1p-100f, min_normal)),
            f32_bits(min_normal));                                         // -2^-152
  EXPECT_EQ(f32_bits(fma_flush(0x1p-52f, -0x1p-98f, min_normal)), 0u);     // exact 2^-126 - 2^-150
  EXPECT_EQ(f32_bits(fma_flush(-0x1p-70f, 0x1p-70f, 0.0f)), 0x80000000u);  // -tiny: -0
  EXPECT_EQ(f32_bits(add_flush(0x1.8p-126f, -0x1p-126f)), 0u);      // an exact subnormal sum: 0
  EXPECT_EQ(f32_bits(add_flush(0x1p-130f, 1.0f)), f32_bits(1.0f));  // a subnormal input reads as 0
  EXPECT_EQ(f32_bits(fma_flush(0x1p-127f, 0x1p100f, 0.0f)), 0u);    // a subnormal factor reads as 0
  // Non-finite results stay what the FMA makes: 0·Inf and Inf − Inf are NaN, Inf stays Inf.
  EXPECT_TRUE(std::isnan(fma_flush(0.0f, INFINITY, 1.0f)));
  EXPECT_TRUE(std::isnan(fma_flush(1.0f, INFINITY, -INFINITY)));
  EXPECT_TRUE(std::isnan(fma_flush(NAN, 1.0f, 0.0f)));
  EXPECT_EQ(f32_bits(fma_flush(2.0f, INFINITY, 1.0f)), f32_bits(INFINITY));
}

// The canonical order, spelled out differently from dot_bf16_canonical: all even terms of a
// block, then all odd ones, then the block's sum into c.
TEST(Bf16Product, CanonicalDotIsTheBlockedTwoChainOrder) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (int K : {1, 2, 31, 32, 33, 64, 100}) {
    std::vector<bf16> a(K), b(K);
    for (int k = 0; k < K; ++k) a[k] = f32_to_bf16(nd(rng)), b[k] = f32_to_bf16(nd(rng));
    float c = 0.25f;
    for (int k0 = 0; k0 < K; k0 += 32) {
      float e = 0, o = 0;
      for (int k = k0; k < k0 + 32; k += 2) {
        e = fma_flush(k < K ? bf16_to_f32(a[k]) : 0.0f, k < K ? bf16_to_f32(b[k]) : 0.0f, e);
      }
      for (int k = k0 + 1; k < k0 + 32; k += 2) {
        o = fma_flush(k < K ? bf16_to_f32(a[k]) : 0.0f, k < K ? bf16_to_f32(b[k]) : 0.0f, o);
      }
      c = add_flush(c, add_flush(e, o));
    }
    EXPECT_EQ(f32_bits(dot_bf16_canonical(0.25f, a.data(), 1, b.data(), 1, K)), f32_bits(c))
        << "K " << K;
  }
}

// Random bf16 values with a share of specials: exact zeros of both signs, bf16 subnormals, and
// magnitudes near 2^-63 whose products land at the flush boundary.
std::vector<bf16> random_bf16(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> pick(0, 19);
  std::vector<bf16> v(n);
  for (bf16& x : v) {
    const int p = pick(rng);
    float f = nd(rng);
    if (p == 0) f = 0.0f * f;
    if (p == 1) f = std::ldexp(f, -130);
    if (p == 2 || p == 3) f = std::ldexp(f, -63);
    x = f32_to_bf16(f);
  }
  return v;
}

struct Bf16Shape {
  int M, N, K;
};

const std::vector<Bf16Path> kFastPaths = {Bf16Path::kEmulated, Bf16Path::kDpbf16, Bf16Path::kAmx};

// Whether A(i, k) is one of the +0 terms a causal product declares, and whether output (i, j)
// is one it wants (ops/matmul_bf16.h, Bf16Causal).
bool masked_a(Bf16Causal causal, int i, int k) {
  return (causal == Bf16Causal::kLowerA && k > i) || (causal == Bf16Causal::kUpperA && k < i);
}
bool wanted(Bf16Causal causal, int i, int j) {
  return causal != Bf16Causal::kLowerOutput || j <= i;
}

#ifdef REFTRAIN_AVX2_TWIN
// The x86-64-v3 build's emulated path (its AVX2 pair packing, the f32 widening and the 4×3 tile)
// on the same product: the reference's bits.
void check_avx2_emulated(const GemmBf16& g, const std::vector<float>& c0,
                         const std::vector<float>& ref, Bf16Causal causal) {
  for (int threads : {1, 3}) {
    std::vector<float> got = c0;
    reftrain_avx2::bf16_emulated_product(g.M, g.N, g.K, reinterpret_cast<const uint16_t*>(g.a),
                                         int(g.ta), g.lda, reinterpret_cast<const uint16_t*>(g.b),
                                         int(g.tb), g.ldb, got.data(), g.ldc, g.accumulate, g.bias,
                                         int(g.causal), threads);
    for (size_t i = 0; i < got.size(); ++i) {
      if (!wanted(causal, int(i / g.N), int(i % g.N))) continue;
      ASSERT_EQ(f32_bits(got[i]), f32_bits(ref[i]))
          << "AVX2 emulated, threads " << threads << " M" << g.M << " N" << g.N << " K" << g.K
          << " at " << i;
    }
  }
}
#endif

// One product on every available path and thread count against the reference, bit for bit
// (a causal product: with A's declared terms set to +0, on the outputs it wants).
void check_all_paths(const Bf16Shape& s, Trans ta, Trans tb, int init_kind, std::mt19937& rng,
                     Bf16Causal causal = Bf16Causal::kNone) {
  const size_t lda = ta == Trans::kNo ? s.K + 3 : s.M + 3,
               ldb = tb == Trans::kNo ? s.N + 5 : s.K + 5;
  std::vector<bf16> a = random_bf16(lda * (ta == Trans::kNo ? s.M : s.K), rng);
  for (int i = 0; i < s.M; ++i) {
    for (int k = 0; k < s.K; ++k) {
      if (masked_a(causal, i, k)) a[ta == Trans::kNo ? i * lda + k : k * lda + i] = bf16{0};
    }
  }
  const std::vector<bf16> b = random_bf16(ldb * (tb == Trans::kNo ? s.K : s.N), rng);
  std::normal_distribution<float> nd;
  std::vector<float> c0(size_t(s.M) * s.N), bias(s.N);
  for (float& x : c0) x = nd(rng);
  for (float& x : bias) x = nd(rng);
  if (!c0.empty()) c0[0] = 0x1p-130f;  // a subnormal initial value: read as 0
  GemmBf16 g{s.M,
             s.N,
             s.K,
             a.data(),
             ta,
             lda,
             b.data(),
             tb,
             ldb,
             nullptr,
             size_t(s.N),
             init_kind == 1,
             init_kind == 2 ? bias.data() : nullptr,
             causal};
  std::vector<float> ref = c0;
  g.c = ref.data();
  gemm_bf16_reference(g, 1);
  for (Bf16Path p : kFastPaths) {
    if (!bf16_path_available(p)) continue;
    for (int threads : {1, 2, 3, 16}) {
      std::vector<float> got = c0;
      g.c = got.data();
      MatmulBf16 mm(p, threads);
      mm.run(g);
      for (size_t i = 0; i < got.size(); ++i) {
        if (!wanted(causal, int(i / s.N), int(i % s.N))) continue;
        ASSERT_EQ(f32_bits(got[i]), f32_bits(ref[i]))
            << bf16_path_name(p) << " threads " << threads << " M" << s.M << " N" << s.N << " K"
            << s.K << " ta " << int(ta) << " tb " << int(tb) << " init " << init_kind << " causal "
            << int(causal) << " at " << i << ": " << got[i] << " vs " << ref[i];
      }
    }
  }
#ifdef REFTRAIN_AVX2_TWIN
  check_avx2_emulated(g, c0, ref, causal);
#endif
}

// check_all_paths on each shape, with either layout of A and of B and each kind of init.
void check_all_layouts(const std::vector<Bf16Shape>& shapes, std::mt19937& rng) {
  for (const Bf16Shape& s : shapes) {
    for (Trans ta : {Trans::kNo, Trans::kYes}) {
      for (Trans tb : {Trans::kNo, Trans::kYes}) {
        for (int init = 0; init < 3; ++init) check_all_paths(s, ta, tb, init, rng);
      }
    }
  }
}

TEST(Bf16Matmul, EveryPathEqualsReferenceBitForBit) {
  std::mt19937 rng(29);
  const std::vector<Bf16Shape> shapes = {{1, 1, 1},    {3, 5, 7},     {4, 32, 32},   {5, 33, 31},
                                         {17, 40, 64}, {33, 65, 100}, {64, 96, 130}, {130, 50, 0}};
  check_all_layouts(shapes, rng);
}

// On the emulated path, products of at most kRowsPathMax rows take their own path (decoding's):
// one row against a layer's weight (either layout, wide enough for several threads' panels), a
// few rows with ragged K and N, K = 0, and one row past the limit, on the general path; every
// path is held to the reference on them.
TEST(Bf16Matmul, FewRowProductsEqualReference) {
  std::mt19937 rng(32);
  const std::vector<Bf16Shape> shapes = {{1, 1152, 384},
                                         {1, 4096, 64},
                                         {2, 100, 1000},
                                         {3, 70, 33},
                                         {kRowsPathMax, 257, 96},
                                         {1, 33, 0},
                                         {kRowsPathMax + 1, 65, 65}};
  check_all_layouts(shapes, rng);
}

// keep_weights (decoding's engine): the rows against a kept weight [N,K] have the reference's
// bits at every call, on every path and thread count; the kept panels are what is read (a weight
// changed without forget_weights() still gives the old weight's product); after forget_weights()
// the new weight's.
TEST(Bf16Matmul, KeptWeightsEqualReferenceUntilForgotten) {
  std::mt19937 rng(33);
  const int N = 200, K = 100;
  std::vector<bf16> w = random_bf16(size_t(N) * K, rng);
  const std::vector<bf16> w_old = w, w_new = random_bf16(w.size(), rng);
  std::vector<float> bias(N);
  for (float& x : bias) x = std::normal_distribution<float>()(rng);
  auto product = [&](MatmulBf16& mm, const std::vector<bf16>& x, int M) {
    std::vector<float> c(size_t(M) * N);
    mm.run({M, N, K, x.data(), Trans::kNo, size_t(K), w.data(), Trans::kYes, size_t(K), c.data(),
            size_t(N), false, bias.data()});
    return c;
  };
  auto expect = [&](const std::vector<float>& got, const std::vector<bf16>& x, int M,
                    const std::vector<bf16>& weight, const std::string& what) {
    std::vector<bf16> saved = w;
    w = weight;
    MatmulBf16 reference(Bf16Path::kReference, 1);
    const std::vector<float> ref = product(reference, x, M);
    w = saved;
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_EQ(f32_bits(got[i]), f32_bits(ref[i])) << what << " at " << i;
  };
  for (Bf16Path p : kFastPaths) {
    if (!bf16_path_available(p)) continue;
    for (int threads : {1, 2, 3}) {
      const std::string name =
          std::string(bf16_path_name(p)) + " threads " + std::to_string(threads);
      MatmulBf16 mm(p, threads);
      mm.keep_weights(true);
      w = w_old;
      for (int call = 0; call < 3; ++call) {
        const int M = 1 + call % kRowsPathMax;
        const std::vector<bf16> x = random_bf16(size_t(M) * K, rng);
        expect(product(mm, x, M), x, M, w_old, name + " call " + std::to_string(call));
      }
      EXPECT_EQ(mm.kept_bytes(), MatmulBf16::kept_weight_bytes(p, N, K)) << name;
      w = w_new;  // not forgotten: the old panels are still read
      const std::vector<bf16> x = random_bf16(K, rng);
      expect(product(mm, x, 1), x, 1, w_old, name + " unforgotten");
      mm.forget_weights();
      expect(product(mm, x, 1), x, 1, w_new, name + " forgotten");
    }
  }
}

// A KV cache kept by decoding's engine grows by a position a token: its keys as a transposed
// op(B) that gains a row (N), its values as an untransposed op(B) that gains a k (K). Each of a
// token's two products has the reference's bits on every path and thread count, across the
// panels' and the blocks' boundaries, and again after forget_weights() (a prefill) from a later
// start; at the full length the engine keeps what kept_weight_bytes says.
TEST(Bf16Matmul, KeptCacheThatGrowsEqualsReference) {
  std::mt19937 rng(34);
  const int T = 70, hs = 12;
  const size_t ld = 3 * size_t(hs);  // a [T, 3·hs] cache: the keys at hs, the values at 2·hs
  const std::vector<bf16> cache = random_bf16(size_t(T) * ld, rng);
  const bf16 *keys = cache.data() + hs, *values = cache.data() + 2 * hs;
  MatmulBf16 reference(Bf16Path::kReference, 1);
  auto same_bits = [&](MatmulBf16& mm, const GemmBf16& g, const std::string& what) {
    std::vector<float> got(size_t(g.N)), ref(size_t(g.N));
    GemmBf16 into = g;
    into.c = got.data();
    mm.run(into);
    into.c = ref.data();
    reference.run(into);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_EQ(f32_bits(got[i]), f32_bits(ref[i])) << what << " at " << i;
  };
  for (Bf16Path p : kFastPaths) {
    if (!bf16_path_available(p)) continue;
    for (int threads : {1, 2, 3}) {
      MatmulBf16 mm(p, threads);
      mm.keep_weights(true);
      for (const int start : {1, 6}) {
        for (int n = start; n <= T; ++n) {
          const std::string what = std::string(bf16_path_name(p)) + " threads " +
                                   std::to_string(threads) + " n " + std::to_string(n);
          const std::vector<bf16> q = random_bf16(size_t(hs), rng),
                                  p16 = random_bf16(size_t(n), rng);
          same_bits(mm,
                    {1, n, hs, q.data(), Trans::kNo, size_t(hs), keys, Trans::kYes, ld, nullptr,
                     size_t(n), false},
                    what + " keys");
          same_bits(mm,
                    {1, hs, n, p16.data(), Trans::kNo, size_t(n), values, Trans::kNo, ld, nullptr,
                     size_t(hs), false},
                    what + " values");
        }
        EXPECT_EQ(mm.kept_bytes(), MatmulBf16::kept_weight_bytes(p, T, hs) +
                                       MatmulBf16::kept_weight_bytes(p, hs, T));
        mm.forget_weights();
      }
    }
  }
}

// The causal products (the attention's): every path skips the declared +0 blocks and unwanted
// tiles and still gives the reference's bits, for square and ragged shapes, either layout of A.
TEST(Bf16Matmul, CausalProductsEqualReference) {
  std::mt19937 rng(31);
  const std::vector<Bf16Shape> shapes = {{64, 64, 64}, {96, 40, 96}, {37, 37, 37}, {130, 33, 130}};
  for (Bf16Causal causal : {Bf16Causal::kLowerOutput, Bf16Causal::kLowerA, Bf16Causal::kUpperA}) {
    for (const Bf16Shape& s : shapes) {
      for (Trans ta : {Trans::kNo, Trans::kYes}) {
        for (int init = 0; init < 3; ++init) check_all_paths(s, ta, Trans::kNo, init, rng, causal);
      }
    }
  }
}

// A skipped +0 block still counts: C + (+0) turns −0 into +0. Rows whose sum is −0 (an init of
// −0 plus products that flush to −0) must come out +0 where the reference adds the masked blocks.
TEST(Bf16Matmul, SkippedBlocksTurnMinusZeroIntoPlusZero) {
  const int n = 64;
  for (Bf16Causal causal : {Bf16Causal::kLowerA, Bf16Causal::kUpperA}) {
    std::vector<bf16> a(size_t(n) * n), b(size_t(n) * n, f32_to_bf16(-0x1p-64f));
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < n; ++k)
        a[size_t(i) * n + k] = masked_a(causal, i, k) ? bf16{0} : f32_to_bf16(0x1p-64f);
    }
    GemmBf16 g{n,          n,         n,       a.data(),  Trans::kNo, size_t(n), b.data(),
               Trans::kNo, size_t(n), nullptr, size_t(n), true,       nullptr,   causal};
    std::vector<float> ref(size_t(n) * n, -0.0f);
    g.c = ref.data();
    gemm_bf16_reference(g, 1);
    // The row with no masked block keeps −0; the row with one becomes +0.
    const bool lower = causal == Bf16Causal::kLowerA;
    EXPECT_EQ(f32_bits(ref[0]), lower ? 0u : 0x80000000u);
    EXPECT_EQ(f32_bits(ref[size_t(n - 1) * n]), lower ? 0x80000000u : 0u);
    for (Bf16Path p : kFastPaths) {
      if (!bf16_path_available(p)) continue;
      std::vector<float> got(size_t(n) * n, -0.0f);
      g.c = got.data();
      MatmulBf16(p, 2).run(g);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(f32_bits(got[i]), f32_bits(ref[i]))
            << bf16_path_name(p) << " causal " << int(causal) << " at " << i;
    }
  }
}

// The shapes of a linear layer at training size, where chunks and panels are many and threads
// take several units each.
TEST(Bf16Matmul, TrainingShapesEqualReference) {
  std::mt19937 rng(30);
  check_all_paths({256, 384, 128}, Trans::kNo, Trans::kYes, 2, rng);  // forward: inp · wᵀ + b
  check_all_paths({256, 128, 384}, Trans::kNo, Trans::kNo, 1, rng);   // backward data
  check_all_paths({384, 128, 256}, Trans::kYes, Trans::kNo, 1, rng);  // backward weight
}

// Bits equal, or both NaN (a NaN's payload is whatever the instruction makes).
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& ref,
                      const char* what) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(ref[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << what << " " << i;
    } else {
      ASSERT_EQ(f32_bits(got[i]), f32_bits(ref[i])) << what << " " << i;
    }
  }
}

// The bf16 attention's forward and backward on every path and thread count against the
// reference path, bit for bit; out and dqkv of the reference returned. inf_row ≥ 0 puts an Inf
// into that row of V, which must turn the causal skipping off (the reference's NaNs kept).
void check_attention_paths(int B, int Tn, int C, int NH, int inf_row, std::vector<float>& qkv,
                           std::vector<float>& dout, std::vector<float>& out_ref,
                           std::vector<float>& dqkv_ref) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  qkv.resize(size_t(B) * Tn * 3 * C), dout.resize(size_t(B) * Tn * C);
  for (float& x : qkv) x = bf16_to_f32(f32_to_bf16(nd(rng)));
  for (float& x : dout) x = bf16_to_f32(f32_to_bf16(nd(rng)));
  if (inf_row >= 0) qkv[size_t(inf_row) * 3 * C + 2 * C] = INFINITY;
  std::vector<bf16> qkv16(qkv.size()), dout16(dout.size());
  cast_f32_to_bf16(qkv16.data(), qkv.data(), qkv.size());
  cast_f32_to_bf16(dout16.data(), dout.data(), dout.size());
  const size_t TT = size_t(Tn) * Tn, att_n = size_t(B) * NH * TT;
  auto run = [&](Bf16Path path, int threads, std::vector<float>& out, std::vector<float>& dqkv) {
    MatmulBf16 mm(path, threads);
    std::vector<float> att(att_n), dp(threads * TT);
    std::vector<bf16> att16(att_n), ds16(threads * TT);
    out.assign(dout.size(), 0.0f);
    dqkv.assign(qkv.size(), 0.5f);
    attention_forward_bf16(mm, out.data(), att.data(), att16.data(), qkv16.data(), B, Tn, C, NH);
    attention_backward_bf16(mm, dqkv.data(), dp.data(), ds16.data(), dout16.data(), qkv16.data(),
                            att.data(), att16.data(), B, Tn, C, NH);
  };
  std::vector<float> out, dqkv;
  run(Bf16Path::kReference, 1, out_ref, dqkv_ref);
  for (Bf16Path p : kFastPaths) {
    if (!bf16_path_available(p)) continue;
    for (int threads : {1, 3}) {
      run(p, threads, out, dqkv);
      expect_same_bits(out, out_ref, bf16_path_name(p));
      expect_same_bits(dqkv, dqkv_ref, bf16_path_name(p));
    }
  }
}

// The bf16 attention gives the same bits on every path and thread count (T ragged, and T whole
// blocks, where the fast paths skip whole +0 blocks of keys and AMX reads P in place), and is
// the attention: within bf16's rounding of the f32 reference (attention_forward and
// attention_backward on the same bf16-valued inputs).
TEST(Bf16Attention, EveryPathEqualsReferenceAndIsTheAttention) {
  for (int Tn : {37, 96}) {
    const int B = 2, C = 24, NH = 3;
    std::vector<float> qkv, dout, out_ref, dqkv_ref;
    check_attention_paths(B, Tn, C, NH, -1, qkv, dout, out_ref, dqkv_ref);
    const size_t att_n = size_t(B) * NH * Tn * Tn;
    std::vector<float> out32(dout.size()), att32(att_n), dqkv32(qkv.size(), 0.5f),
        dp32(size_t(B) * NH * Tn);
    attention_forward(out32.data(), att32.data(), qkv.data(), B, Tn, C, NH);
    attention_backward(dqkv32.data(), dp32.data(), dout.data(), qkv.data(), att32.data(), B, Tn, C,
                       NH);
    for (size_t i = 0; i < out_ref.size(); ++i) EXPECT_NEAR(out_ref[i], out32[i], 0.02f) << i;
    for (size_t i = 0; i < dqkv_ref.size(); ++i) EXPECT_NEAR(dqkv_ref[i], dqkv32[i], 0.05f) << i;
  }
}

// An Inf in V makes 0·Inf = NaN in the reference's masked terms: the fast paths must not skip
// them then (the rows before the Inf's row would come out finite).
TEST(Bf16Attention, AnInfInTheOperandsTurnsSkippingOff) {
  std::vector<float> qkv, dout, out_ref, dqkv_ref;
  check_attention_paths(1, 96, 24, 3, 80, qkv, dout, out_ref, dqkv_ref);
  EXPECT_TRUE(std::isnan(out_ref[0]));  // row 0 reads V's row 80 through a masked +0: 0·Inf
}

// The decode row (a KV cache's next position) has the bits of the same row of a forward over
// rows 0..pos, on every path: its products run over pos+1 keys instead of T, and the terms past
// pos are zeros in the forward.
TEST(Bf16Attention, DecodeRowEqualsTheForwardsRow) {
  const int Tn = 45, C = 24, NH = 3;
  std::mt19937 rng(8);
  std::normal_distribution<float> nd;
  std::vector<float> qkv(size_t(Tn) * 3 * C);
  for (float& x : qkv) x = nd(rng);
  std::vector<bf16> qkv16(qkv.size());
  cast_f32_to_bf16(qkv16.data(), qkv.data(), qkv.size());
  for (Bf16Path path :
       {Bf16Path::kReference, Bf16Path::kEmulated, Bf16Path::kDpbf16, Bf16Path::kAmx}) {
    if (!bf16_path_available(path)) continue;
    MatmulBf16 mm(path, 2);
    for (int pos : {0, 1, 31, 32, 44}) {
      const int n = pos + 1;
      std::vector<float> out(size_t(n) * C), att(size_t(NH) * n * n), row(C), p(n);
      std::vector<bf16> att16(att.size()), p16(n);
      attention_forward_bf16(mm, out.data(), att.data(), att16.data(), qkv16.data(), 1, n, C, NH);
      attention_decode_bf16(mm, row.data(), p.data(), p16.data(), qkv16.data(), pos, C, NH);
      for (int c = 0; c < C; ++c) {
        ASSERT_EQ(f32_bits(row[c]), f32_bits(out[size_t(pos) * C + c]))
            << bf16_path_name(path) << " pos " << pos << " c " << c;
      }
    }
  }
}

TEST(Bf16Matmul, ReportsItsPaths) {
  EXPECT_TRUE(bf16_path_available(Bf16Path::kReference));
  EXPECT_TRUE(bf16_path_available(Bf16Path::kEmulated));
  EXPECT_TRUE(bf16_path_available(bf16_best_path()));
  // Without AMX, dpbf16 is chosen exactly where it multiplies faster than the emulation's FMAs.
  if (!bf16_path_available(Bf16Path::kAmx)) {
    const bool dpbf16 =
        bf16_path_available(Bf16Path::kDpbf16) && simd::bf16dot::dpbf16_outruns_fma();
    EXPECT_EQ(bf16_best_path(), dpbf16 ? Bf16Path::kDpbf16 : Bf16Path::kEmulated);
  }
  std::printf("bf16 paths: best %s, dpbf16 %s (%s the FMAs), amx %s\n",
              bf16_path_name(bf16_best_path()),
              bf16_path_available(Bf16Path::kDpbf16) ? "yes" : "no",
              simd::bf16dot::dpbf16_outruns_fma() ? "outruns" : "slower than",
              bf16_path_available(Bf16Path::kAmx) ? "yes" : "no");
}

}  // namespace
}  // namespace reftrain
