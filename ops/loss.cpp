#include "ops/loss.h"

#include <cmath>
#include <cstddef>

#include "ops/kernel_record.h"
#include "simd/parallel.h"
#include "simd/reduce.h"

namespace reftrain {

template <typename T>
void crossentropy_forward_backward(T* losses, T* dlogits, const T* logits, const int32_t* targets,
                                   int N, int V, int Vp, T dloss, T z) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* x = logits + size_t(i) * Vp;
    T m = x[0];
    for (int j = 1; j < V; ++j) m = x[j] > m ? x[j] : m;
    T sum = 0;
    for (int j = 0; j < V; ++j) sum += std::exp(x[j] - m);
    const T lse = m + std::log(sum);
    T loss = lse - x[targets[i]];
    if (z != T(0)) loss += z * lse * lse;
    losses[i] = loss;
    if (!dlogits) continue;
    T* dx = dlogits + size_t(i) * Vp;
    for (int j = 0; j < V; ++j) {
      const T p = std::exp(x[j] - lse);
      const T onehot = j == targets[i] ? T(1) : T(0);
      T g = (p - onehot) * dloss;
      if (z != T(0)) g += T(2) * z * lse * p * dloss;
      dx[j] = g;
    }
    for (int j = V; j < Vp; ++j) dx[j] = 0;
  }
}

// ---------------------------------------------------------------------------------------------
// The fast float path. Per row, in the fixed 16-lane order of simd/reduce.h:
//   m = max_j x_j;  e_j = exp(x_j - m) (simd::exp), stored in dlogits when it is wanted;
//   sum = Σ e_j;  lse = m + log(sum)
//   dx_j = e_j·(dloss·(1 + 2·z·lse)/sum)   (= p_j·dloss + 2·z·lse·p_j·dloss, one multiply)
//   dx_target = (p_t - 1)·dloss + 2·z·lse·p_t·dloss   (the reference's form: no cancellation)
// One exponential per logit instead of the reference's two. Rows are independent (parallel
// over rows), so any thread count gives the same bits.

namespace {

using simd::load;

// dx[j] = e_j·scale for j < V (in place: dx holds e_j), 0 for the padding columns.
void scale_row(float* dx, float scale, int V, int Vp) {
  simd::for_each16(0, V, [&](auto lanes, size_t j) {
    using L = typename decltype(lanes)::type;
    simd::store(dx + j, load<L>(dx + j) * L(scale));
  });
  for (int j = V; j < Vp; ++j) dx[j] = 0.0f;
}

// The loss of one row, and its dlogits when dx is not null.
float crossentropy_row_fast(float* dx, const float* x, int target, int V, int Vp, float dloss,
                            float z) {
  const float m = simd::max16(
      V, [&](auto acc, size_t j) { return simd::max(acc, load<decltype(acc)>(x + j)); });
  const float sum = simd::sum16(V, [&](auto acc, size_t j) {
    using L = decltype(acc);
    const L e = simd::exp(load<L>(x + j) - L(m));
    if (dx) simd::store(dx + j, e);
    return acc + e;
  });
  const float lse = m + std::log(sum);
  float loss = lse - x[target];
  if (z != 0.0f) loss += z * lse * lse;
  if (!dx) return loss;
  const float p_t = dx[target] / sum;
  const float coef = z != 0.0f ? dloss + 2.0f * z * lse * dloss : dloss;
  scale_row(dx, coef / sum, V, Vp);
  float g_t = (p_t - 1.0f) * dloss;
  if (z != 0.0f) g_t += 2.0f * z * lse * p_t * dloss;
  dx[target] = g_t;
  return loss;
}

}  // namespace

void crossentropy_forward_backward_fast(float* losses, float* dlogits, const float* logits,
                                        const int32_t* targets, int N, int V, int Vp, float dloss,
                                        float z) {
  simd::parallel_shares(size_t(N), [&](size_t item) {
    const int i = int(item);
    float* dx = dlogits ? dlogits + size_t(i) * Vp : nullptr;
    losses[i] = crossentropy_row_fast(dx, logits + size_t(i) * Vp, targets[i], V, Vp, dloss, z);
  });
}

template void crossentropy_forward_backward<float>(float*, float*, const float*, const int32_t*,
                                                   int, int, int, float, float);
template void crossentropy_forward_backward<double>(double*, double*, const double*, const int32_t*,
                                                    int, int, int, double, double);

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> loss_records() {
  using namespace record;
  return {
      {"crossentropy_forward_backward",
       "lse = logsumexp(logits[:V]); loss = lse − logits[target] + z·lse²; dlogits = "
       "(softmax − onehot)·dloss + 2·z·lse·softmax·dloss for j < V, 0 for V ≤ j < Vp",
       {out("losses", "f32", "[N]"), out("dlogits", "f32", "[N,Vp]"), in("logits", "f32", "[N,Vp]"),
        in("targets", "i32", "[N]"), scalar("N"), scalar("V"), scalar("Vp"), scalar("dloss", "f32"),
        scalar("z", "f32")},
       "07_loss.wgsl",
       "",
       "ops/loss.h",
       "crossentropy_forward_backward",
       "crossentropy_forward_backward_fast",
       "16 lanes, simd::exp, one exponential per logit; within a bound",
       "",
       "loss.wgsl",
       "docs/kernels/07_loss.md",
       "crossentropy",
       "tests/ops/test_loss.cpp",
       "bench/bench_ops.cpp crossentropy_fwd_bwd/{ref,fast}"},
  };
}

}  // namespace reftrain
