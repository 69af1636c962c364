#include "ops/linear_bf16.h"

#include "ops/kernel_record.h"
#include "ops/linear.h"

namespace reftrain {

// out = b + inp16·w16ᵀ: A = inp16 [N,K], B(k,o) = w16[o,k] (transposed).
void linear_forward_bf16(MatmulBf16& mm, float* out, const bf16* inp16, const bf16* w16,
                         const float* b, int N, int K, int O) {
  mm.run({N, O, K, inp16, Trans::kNo, size_t(K), w16, Trans::kYes, size_t(K), out, size_t(O), false,
          b});
}

// dinp (+)= dout16·w16: A = dout16 [N,O], B = w16 [O,K].
void linear_backward_data_bf16(MatmulBf16& mm, float* dinp, const bf16* dout16, const bf16* w16,
                               int N, int K, int O, bool accumulate) {
  mm.run({N, K, O, dout16, Trans::kNo, size_t(O), w16, Trans::kNo, size_t(K), dinp, size_t(K),
          accumulate, nullptr});
}

// dw += dout16ᵀ·inp16: A(o,r) = dout16[r,o] (transposed), B = inp16 [N,K].
void linear_backward_weight_bf16(MatmulBf16& mm, float* dw, float* db, const float* dout,
                                 const bf16* dout16, const bf16* inp16, int N, int K, int O) {
  mm.run({O, K, N, dout16, Trans::kYes, size_t(O), inp16, Trans::kNo, size_t(K), dw, size_t(K),
          true, nullptr});
  if (db) bias_backward(db, dout, N, O);
}

// ---- the records -----------------------------------------------------------------------
// One function each for every path: the reference and the fast version are the MatmulBf16
// passed in, on Bf16Path::kReference or on the best path (ops/matmul_bf16.h).
std::vector<KernelRecord> linear_bf16_records() {
  using namespace record;
  const std::string h = "ops/linear_bf16.h",
                    tests = "tests/ops/test_bf16.cpp, tests/golden/test_golden_bf16.cpp";
  const std::string variants =
      "the MatmulBf16's Bf16Path: reference, emulated, dpbf16, amx (all bit-identical)";
  const std::string how =
      "on MatmulBf16's best path (AMX tiles, VDPBF16PS, or FMAs under FTZ and DAZ): packed panels, "
      "threads over M×N; bit-identical";
  const std::string page = "docs/kernels/14_bf16.md", wgsl = "linear_bf16.wgsl";
  const std::string bench = "bench/bench_bf16.cpp (one layer's three products, fp32 and bf16)";
  return {
      {"linear_forward_bf16",
       "out[r,o] = b[o] ⊕ Σ_k inp16[r,k]·w16[o,k] (canonical bf16 order; no b: from +0)",
       {out("out", "f32", "[N,O]"), in("inp16", "bf16", "[N,K]"), in("w16", "bf16", "[O,K]"),
        in("b", "f32", "[O]"), scalar("N"), scalar("K"), scalar("O")},
       "",
       "",
       h,
       "linear_forward_bf16",
       "linear_forward_bf16",
       how,
       variants,
       wgsl,
       page,
       "bf16_dot",
       tests,
       bench},
      {"linear_backward_data_bf16",
       "dinp[r,k] ⊕= Σ_o dout16[r,o]·w16[o,k] (canonical bf16 order)",
       {inout("dinp", "f32", "[N,K]"), in("dout16", "bf16", "[N,O]"), in("w16", "bf16", "[O,K]"),
        scalar("N"), scalar("K"), scalar("O")},
       "",
       "",
       h,
       "linear_backward_data_bf16",
       "linear_backward_data_bf16",
       how,
       variants,
       wgsl,
       page,
       "bf16_dot",
       tests,
       bench},
      {"linear_backward_weight_bf16",
       "dw[o,k] ⊕= Σ_r dout16[r,o]·inp16[r,k] (canonical bf16 order); db[o] += Σ_r dout[r,o] "
       "(f32, rows in order)",
       {inout("dw", "f32", "[O,K]"), inout("db", "f32", "[O]"), in("dout", "f32", "[N,O]"),
        in("dout16", "bf16", "[N,O]"), in("inp16", "bf16", "[N,K]"), scalar("N"), scalar("K"),
        scalar("O")},
       "",
       "",
       h,
       "linear_backward_weight_bf16",
       "linear_backward_weight_bf16",
       how,
       variants,
       wgsl,
       page,
       "bf16_dot",
       tests,
       bench},
  };
}

}  // namespace reftrain
