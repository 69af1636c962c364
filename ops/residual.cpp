#include "ops/residual.h"

#include "ops/kernel_record.h"
#include "simd/wide.h"

namespace reftrain {

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void residual_backward(T* da, T* db, const T* dout, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

// The fast float path: the same single addition per element, 16 lanes at a time, so it is
// bit-identical to the reference.
void residual_forward_fast(float* out, const float* a, const float* b, size_t n) {
  simd::parallel_for_each16(n, [&](auto lanes, size_t i) {
    using V = typename decltype(lanes)::type;
    simd::store(out + i, simd::load<V>(a + i) + simd::load<V>(b + i));
  });
}

void residual_backward_fast(float* da, float* db, const float* dout, size_t n, bool accumulate) {
  simd::parallel_for_each16(n, [&](auto lanes, size_t i) {
    using V = typename decltype(lanes)::type;
    const V g = simd::load<V>(dout + i);
    simd::store(da + i, simd::prior<V>(da + i, accumulate) + g);
    simd::store(db + i, simd::prior<V>(db + i, accumulate) + g);
  });
}

#define REFTRAIN_INSTANTIATE(T)                                      \
  template void residual_forward<T>(T*, const T*, const T*, size_t); \
  template void residual_backward<T>(T*, T*, const T*, size_t);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)
#undef REFTRAIN_INSTANTIATE

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> residual_records() {
  using namespace record;
  const std::string page = "docs/kernels/09_backward_ffn.md", tests = "tests/ops/test_residual.cpp";
  return {
      {"residual_forward",
       "out = a + b",
       {out("out", "f32", "[n]"), in("a", "f32", "[n]"), in("b", "f32", "[n]"), scalar("n")},
       "09_backward_ffn.wgsl",
       "",
       "ops/residual.h",
       "residual_forward",
       "residual_forward_fast",
       "16 lanes; bit-identical",
       "",
       "residual.wgsl",
       page,
       "",
       tests,
       "bench/bench_ops.cpp residual_forward/{ref,fast}"},
      {"residual_backward",
       "da += dout; db += dout",
       {inout("da", "f32", "[n]"), inout("db", "f32", "[n]"), in("dout", "f32", "[n]"),
        scalar("n")},
       "09_backward_ffn.wgsl",
       "",
       "ops/residual.h",
       "residual_backward",
       "residual_backward_fast",
       "16 lanes; bit-identical",
       "",
       "residual.wgsl",
       page,
       "",
       tests,
       "bench/bench_ops.cpp residual_backward/{ref,fast}"},
  };
}

}  // namespace reftrain
