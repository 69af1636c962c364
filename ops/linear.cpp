#include "ops/linear.h"

#include <algorithm>
#include <cstddef>

#include "ops/cast.h"
#include "ops/kernel_record.h"
#include "simd/parallel.h"
#include "simd/simd.h"

namespace reftrain {

template <typename T, typename W>
void linear_forward(const Matmul& mm, T* out, const T* inp, const W* w, const T* b, int N, int K,
                    int O) {
  // out[N,O] = inp[N,K] · (w[O,K])ᵀ + b
  mm.run(Gemm<T, W>{N, O, K, inp, Trans::kNo, size_t(K), w, Trans::kYes, size_t(K), out, size_t(O),
                    false, b});
}

template <typename T, typename W>
void linear_backward_data(const Matmul& mm, T* dinp, const T* dout, const W* w, int N, int K, int O,
                          bool accumulate) {
  // dinp[N,K] (+)= dout[N,O] · w[O,K]
  mm.run(Gemm<T, W>{N, K, O, dout, Trans::kNo, size_t(O), w, Trans::kNo, size_t(K), dinp, size_t(K),
                    accumulate, nullptr});
}

template <typename T>
void linear_backward_weight(const Matmul& mm, T* dw, T* db, const T* dout, const T* inp, int N,
                            int K, int O) {
  // dw[O,K] += (dout[N,O])ᵀ · inp[N,K];  db[O] += Σ_r dout[r,:] (the sums of doutᵀ's rows)
  mm.run(Gemm<T, T>{O, K, N, dout, Trans::kYes, size_t(O), inp, Trans::kNo, size_t(K), dw,
                    size_t(K), true, nullptr, db});
}

template <typename T, typename W>
void linear_backward(const Matmul& mm, T* dinp, T* dw, T* db, const T* dout, const T* inp,
                     const W* w, int N, int K, int O) {
  if (dinp) linear_backward_data(mm, dinp, dout, w, N, K, O, true);
  linear_backward_weight(mm, dw, db, dout, inp, N, K, O);
}

template <typename T>
void bias_backward(T* db, const T* dout, int N, int O) {
  using B = simd::Batch<T>;
  // Columns per task: one vector (one cache line of a float row of dout at 16 lanes). Wider
  // tasks left threads idle: O = 384 at 4 vectors was 6 tasks for 16 threads. A column's sum
  // is the same whichever task runs it.
  constexpr int L = int(B::size), kCols = L;
  const int blocks = (O + kCols - 1) / kCols;
  simd::parallel_shares(size_t(blocks), [&](size_t item) {
    const int blk = int(item);
    const int o0 = blk * kCols, o1 = std::min(O, o0 + kCols);
    int o = o0;
    for (; o + L <= o1; o += L) {
      B s = B::load_unaligned(db + o);
      for (int r = 0; r < N; ++r) s = s + B::load_unaligned(dout + size_t(r) * O + o);
      s.store_unaligned(db + o);
    }
    for (; o < o1; ++o) {
      T s = db[o];
      for (int r = 0; r < N; ++r) s += dout[size_t(r) * O + o];
      db[o] = s;
    }
  });
}

template void linear_forward<float, float>(const Matmul&, float*, const float*, const float*,
                                           const float*, int, int, int);
template void linear_forward<float, f16>(const Matmul&, float*, const float*, const f16*,
                                         const float*, int, int, int);
template void linear_forward<double, double>(const Matmul&, double*, const double*, const double*,
                                             const double*, int, int, int);
template void linear_backward<float, float>(const Matmul&, float*, float*, float*, const float*,
                                            const float*, const float*, int, int, int);
template void linear_backward<float, f16>(const Matmul&, float*, float*, float*, const float*,
                                          const float*, const f16*, int, int, int);
template void linear_backward<double, double>(const Matmul&, double*, double*, double*,
                                              const double*, const double*, const double*, int, int,
                                              int);
template void linear_backward_data<float, float>(const Matmul&, float*, const float*, const float*,
                                                 int, int, int, bool);
template void linear_backward_data<float, f16>(const Matmul&, float*, const float*, const f16*, int,
                                               int, int, bool);
template void linear_backward_weight<float>(const Matmul&, float*, float*, const float*,
                                            const float*, int, int, int);
template void bias_backward<float>(float*, const float*, int, int);
template void bias_backward<double>(double*, const double*, int, int);

// ---- the records -----------------------------------------------------------------------
// The linear products have one function each for every variant: the reference and the fast
// version are the naive and the blocked Matmul passed in (ops/matmul.h).
std::vector<KernelRecord> linear_records() {
  using namespace record;
  const std::string h = "ops/linear.h", tests = "tests/ops/test_linear.cpp";
  const std::string ours = "linear.wgsl linear_tiled.wgsl linear_reg4x4.wgsl";
  const std::string variants =
      "matmul naive (the reference), tiled, blocked (the fast default), eigen (`--matmul`)";
  const std::string fwd = "docs/kernels/03_linear.md", bwd = "docs/kernels/11_linear_backward.md";
  const std::string how =
      "on the blocked Matmul: packed panels, a register micro-kernel, OpenMP; "
      "bit-identical";
  auto bench = [](const char* p) {
    return std::string("bench/bench_matmul.cpp {naive,tiled,blocked,eigen}/") + p + "/SHAPE";
  };
  return {
      {"linear_forward",
       "out[r,o] = b[o] + Σ_k inp[r,k]·w[o,k] (llama: no bias, the same with b = 0)",
       {out("out", "f32", "[N,O]"), in("inp", "f32", "[N,K]"), in("w", "f32", "[O,K]"),
        in("b", "f32", "[O]"), scalar("N"), scalar("K"), scalar("O")},
       "03_linear.wgsl",
       "",
       h,
       "linear_forward",
       "linear_forward",
       how,
       variants,
       ours,
       fwd,
       "linear",
       tests,
       bench("fwd")},
      {"linear_forward_f16",
       "mixed precision: out[r,o] = b[o] + Σ_k inp[r,k]·f32(w16[o,k]) (the fp16 mirror widened)",
       {out("out", "f32", "[N,O]"), in("inp", "f32", "[N,K]"), in("w16", "f16", "[O,K]"),
        in("b", "f32", "[O]"), scalar("N"), scalar("K"), scalar("O")},
       "03_linear.wgsl",
       "linear_forward",
       h,
       "linear_forward",
       "linear_forward",
       how,
       variants,
       ours,
       fwd,
       "linear",
       tests,
       bench("fwd")},
      {"linear_backward_data",
       "dinp[r,k] += Σ_o dout[r,o]·w[o,k]",
       {inout("dinp", "f32", "[N,K]"), in("dout", "f32", "[N,O]"), in("w", "f32", "[O,K]"),
        scalar("N"), scalar("K"), scalar("O")},
       "11_linear_backward.wgsl",
       "",
       h,
       "linear_backward_data",
       "linear_backward_data",
       how,
       variants,
       ours,
       bwd,
       "linear_backward",
       tests,
       bench("bwd_data")},
      {"linear_backward_data_f16",
       "mixed precision: dinp[r,k] += Σ_o dout[r,o]·f32(w16[o,k])",
       {inout("dinp", "f32", "[N,K]"), in("dout", "f32", "[N,O]"), in("w16", "f16", "[O,K]"),
        scalar("N"), scalar("K"), scalar("O")},
       "11_linear_backward.wgsl",
       "linear_backward_data",
       h,
       "linear_backward_data",
       "linear_backward_data",
       how,
       variants,
       ours,
       bwd,
       "linear_backward",
       tests,
       bench("bwd_data")},
      {"linear_backward_weight",
       "dw[o,k] += Σ_r dout[r,o]·inp[r,k]; db[o] += Σ_r dout[r,o] (rows in order)",
       {inout("dw", "f32", "[O,K]"), inout("db", "f32", "[O]"), in("dout", "f32", "[N,O]"),
        in("inp", "f32", "[N,K]"), scalar("N"), scalar("K"), scalar("O")},
       "11_linear_backward.wgsl",
       "",
       h,
       "linear_backward_weight",
       "linear_backward_weight",
       how,
       variants,
       ours,
       bwd,
       "linear_backward",
       tests,
       bench("bwd_weight")},
  };
}

}  // namespace reftrain
