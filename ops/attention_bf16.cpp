#include "ops/attention_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "ops/kernel_record.h"
#include "simd/bf16.h"
#include "simd/math.h"
#include "simd/reduce.h"

namespace reftrain {

namespace {

using simd::load;

// bf16(x) into dst, rounded as cast_f32_to_bf16 rounds: one value, or the 16 lanes of a Wide.
void store_bf16_of(bf16* dst, float x) {
  *dst = f32_to_bf16(x);
}
void store_bf16_of(bf16* dst, const simd::Wide& x) {
  for (size_t k = 0; k < simd::Wide::kParts; ++k) {
    simd::store_bf16(dst + k * simd::Wide::Part::size, x.part[k]);
  }
}

// Row t of the causal softmax of s·scale, in place, and its bf16 rounding into p16: the scale
// and the max in one pass, then exp (simd::exp) and Σ in the 16-lane order of simd/reduce.h, then
// times 1/Σ, rounded in the same pass (the row is still in registers: no second pass over the
// T×T probabilities); 0 past t.
void softmax_row(float* p, bf16* p16, int t, int Tn, float scale) {
  const size_t n = size_t(t) + 1;
  const float maxv = simd::max16(n, [&](auto acc, size_t u) {
    using L = decltype(acc);
    const L s = load<L>(p + u) * L(scale);
    simd::store(p + u, s);
    return simd::max(acc, s);
  });
  const float sum = simd::sum16(n, [&](auto acc, size_t u) {
    using L = decltype(acc);
    const L e = simd::exp(load<L>(p + u) - L(maxv));
    simd::store(p + u, e);
    return acc + e;
  });
  const float inv = 1.0f / sum;
  simd::for_each16(0, n, [&](auto lanes, size_t u) {
    using L = typename decltype(lanes)::type;
    const L x = load<L>(p + u) * L(inv);
    simd::store(p + u, x);
    store_bf16_of(p16 + u, x);
  });
  std::fill(p + n, p + Tn, 0.0f);
  std::fill(p16 + n, p16 + Tn, bf16{0});
}

// Row t of the softmax's gradient, in place over dP, and its bf16 rounding into ds16: D =
// Σ_u≤t p·dP (16-lane order), then ds = p·(dP − D)·scale for u ≤ t, 0 past t.
void softmax_grad_row(float* dr, bf16* ds16, const float* pr, int t, int Tn, float scale) {
  const size_t n = size_t(t) + 1;
  const float D = simd::sum16(n, [&](auto acc, size_t u) {
    using L = decltype(acc);
    return acc + load<L>(pr + u) * load<L>(dr + u);
  });
  simd::for_each16(0, n, [&](auto lanes, size_t u) {
    using L = typename decltype(lanes)::type;
    const L ds = load<L>(pr + u) * (load<L>(dr + u) - L(D)) * L(scale);
    simd::store(dr + u, ds);
    store_bf16_of(ds16 + u, ds);
  });
  std::fill(dr + n, dr + Tn, 0.0f);
  std::fill(ds16 + n, ds16 + Tn, bf16{0});
}

// Whether no element is Inf or NaN (exponent field all ones): the condition under which the
// products over keys may skip their exact +0 blocks (Bf16Causal).
bool all_finite(const bf16* x, size_t n) {
  uint16_t any = 0;
  for (size_t i = 0; i < n; ++i) any |= uint16_t((x[i].bits & 0x7F80u) == 0x7F80u);
  return any == 0;
}

// The head (b, h) of the forward: S, the softmax, P16, out.
// The causal structure the products may use: the masked scores are never read, and the masked
// p and ds are +0, so with finite operands a product over keys may skip their blocks.
struct Masks {
  Bf16Causal lower_a, upper_a;
};
Masks masks(bool finite) {
  return finite ? Masks{Bf16Causal::kLowerA, Bf16Causal::kUpperA}
                : Masks{Bf16Causal::kNone, Bf16Causal::kNone};
}

void forward_head(MatmulBf16& mm, float* out, float* s, bf16* p16, const bf16* q, int Tn, int C,
                  int hs, Masks m) {
  const size_t C3 = size_t(3) * C;
  const float scale = 1.0f / std::sqrt(float(hs));
  // S[t,u] = Σ_i q[t,i]·k[u,i]: B = Kᵀ, the key rows read transposed; only u ≤ t is read.
  mm.run({Tn, Tn, hs, q, Trans::kNo, C3, q + C, Trans::kYes, C3, s, size_t(Tn), false, nullptr,
          Bf16Causal::kLowerOutput});
  for (int t = 0; t < Tn; ++t) softmax_row(s + size_t(t) * Tn, p16 + size_t(t) * Tn, t, Tn, scale);
  mm.run({Tn, hs, Tn, p16, Trans::kNo, size_t(Tn), q + 2 * C, Trans::kNo, C3, out, size_t(C), false,
          nullptr, m.lower_a});
}

// The head (b, h) of the backward; dp and ds16 [T,T] are this thread's scratch.
void backward_head(MatmulBf16& mm, float* dq, float* dp, bf16* ds16, const bf16* dout,
                   const bf16* q, const float* p, const bf16* p16, int Tn, int C, int hs, Masks m,
                   bool accumulate) {
  const size_t C3 = size_t(3) * C;
  const float scale = 1.0f / std::sqrt(float(hs));
  // dP[t,u] = Σ_i dout[t,i]·v[u,i]; only u ≤ t is read
  mm.run({Tn, Tn, hs, dout, Trans::kNo, size_t(C), q + 2 * C, Trans::kYes, C3, dp, size_t(Tn),
          false, nullptr, Bf16Causal::kLowerOutput});
  for (int t = 0; t < Tn; ++t) {
    const size_t row = size_t(t) * Tn;
    softmax_grad_row(dp + row, ds16 + row, p + row, t, Tn, scale);
  }
  // dQ += dS·K;  dK += dSᵀ·Q;  dV += Pᵀ·dOut (each from +0 when not accumulating)
  mm.run({Tn, hs, Tn, ds16, Trans::kNo, size_t(Tn), q + C, Trans::kNo, C3, dq, C3, accumulate,
          nullptr, m.lower_a});
  mm.run({Tn, hs, Tn, ds16, Trans::kYes, size_t(Tn), q, Trans::kNo, C3, dq + C, C3, accumulate,
          nullptr, m.upper_a});
  mm.run({Tn, hs, Tn, p16, Trans::kYes, size_t(Tn), dout, Trans::kNo, size_t(C), dq + 2 * C, C3,
          accumulate, nullptr, m.upper_a});
}

}  // namespace

void attention_forward_bf16(MatmulBf16& mm, float* out, float* att, bf16* att16, const bf16* qkv16,
                            int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const size_t C3 = size_t(3) * C, TT = size_t(Tn) * Tn;
  // the (b, h) pairs spread over the threads, each product on one thread (a product is the same
  // sum whoever runs it)
  std::vector<MatmulBf16>& engines = mm.single_thread_engines();
  const Masks m = masks(all_finite(qkv16, size_t(B) * Tn * C3));
#pragma omp parallel for schedule(dynamic) num_threads(mm.threads())
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH;
    forward_head(engines[size_t(omp_get_thread_num())], out + size_t(b) * Tn * C + size_t(h) * hs,
                 att + size_t(bh) * TT, att16 + size_t(bh) * TT,
                 qkv16 + size_t(b) * Tn * C3 + size_t(h) * hs, Tn, C, hs, m);
  }
}

void attention_backward_bf16(MatmulBf16& mm, float* dqkv, float* dp, bf16* ds16, const bf16* dout16,
                             const bf16* qkv16, const float* att, const bf16* att16, int B, int Tn,
                             int C, int NH, bool accumulate) {
  const int hs = C / NH;
  const size_t C3 = size_t(3) * C, TT = size_t(Tn) * Tn;
  std::vector<MatmulBf16>& engines = mm.single_thread_engines();
  const Masks m =
      masks(all_finite(qkv16, size_t(B) * Tn * C3) && all_finite(dout16, size_t(B) * Tn * C));
#pragma omp parallel for schedule(dynamic) num_threads(mm.threads())
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH, me = omp_get_thread_num();
    const size_t head = size_t(b) * Tn * C3 + size_t(h) * hs;
    backward_head(engines[size_t(me)], dqkv + head, dp + size_t(me) * TT, ds16 + size_t(me) * TT,
                  dout16 + size_t(b) * Tn * C + size_t(h) * hs, qkv16 + head, att + size_t(bh) * TT,
                  att16 + size_t(bh) * TT, Tn, C, hs, m, accumulate);
  }
}

void attention_decode_bf16(MatmulBf16& mm, float* out, float* p, bf16* p16, const bf16* qkv16,
                           int pos, int C, int NH) {
  const int hs = C / NH, n = pos + 1;
  const float scale = 1.0f / std::sqrt(float(hs));
  const size_t C3 = size_t(3) * C;
  for (int h = 0; h < NH; ++h) {
    const bf16* k = qkv16 + C + size_t(h) * hs;
    const bf16* q = qkv16 + size_t(pos) * C3 + size_t(h) * hs;
    mm.run({1, n, hs, q, Trans::kNo, C3, k, Trans::kYes, C3, p, size_t(n), false, nullptr});
    softmax_row(p, p16, pos, n, scale);
    mm.run({1, hs, n, p16, Trans::kNo, size_t(n), k + C, Trans::kNo, C3, out + size_t(h) * hs,
            size_t(C), false, nullptr});
  }
}

// ---- the records -----------------------------------------------------------------------
// As the bf16 linear products: one function, the MatmulBf16 passed in picks the path.
std::vector<KernelRecord> attention_bf16_records() {
  using namespace record;
  const std::string h = "ops/attention_bf16.h",
                    tests = "tests/ops/test_bf16.cpp, tests/golden/test_golden_bf16.cpp";
  const std::string variants =
      "the MatmulBf16's Bf16Path: reference, emulated, dpbf16, amx (all bit-identical)";
  const std::string how =
      "its four products on MatmulBf16's best path (AMX, VDPBF16PS or FMAs under FTZ and DAZ); "
      "bit-identical";
  const std::string page = "docs/kernels/14_bf16.md";
  return {
      {"attention_forward_bf16",
       "causal: S = Q·Kᵀ (bf16 product); att = softmax_u≤t(S/√hs) (f32); att16 = bf16(att); "
       "out = att16·V (bf16 product over all T keys)",
       {out("out", "f32", "[B,T,C]"), out("att", "f32", "[B,NH,T,T]"),
        out("att16", "bf16", "[B,NH,T,T]"), in("qkv16", "bf16", "[B,T,3C]"), scalar("B"),
        scalar("T"), scalar("C"), scalar("NH")},
       "",
       "",
       h,
       "attention_forward_bf16",
       "attention_forward_bf16",
       how,
       variants,
       "attention_bf16.wgsl attention_bf16.wgsl:attention_round_bf16 "
       "attention_bf16.wgsl:attention_forward_bf16_out",
       page,
       "",
       tests,
       ""},
      {"attention_backward_bf16",
       "dP = dOut16·Vᵀ; ds = att·(dP − Σ_u att·dP)/√hs (f32); dS = bf16(ds); dQ ⊕= dS·K; "
       "dK ⊕= dSᵀ·Q; dV ⊕= att16ᵀ·dOut16 (bf16 products)",
       {inout("dqkv", "f32", "[B,T,3C]"), scratch("dp", "[threads,T,T]"),
        scratch("ds16", "[threads,T,T]", "bf16"), in("dout16", "bf16", "[B,T,C]"),
        in("qkv16", "bf16", "[B,T,3C]"), in("att", "f32", "[B,NH,T,T]"),
        in("att16", "bf16", "[B,NH,T,T]"), scalar("B"), scalar("T"), scalar("C"), scalar("NH")},
       "",
       "",
       h,
       "attention_backward_bf16",
       "attention_backward_bf16",
       how,
       variants,
       "attention_bf16.wgsl attention_bf16.wgsl:attention_round_bf16 "
       "attention_bf16.wgsl:attention_backward_bf16_dqkv",
       page,
       "",
       tests,
       ""},
  };
}

}  // namespace reftrain
