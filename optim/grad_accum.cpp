#include "optim/grad_accum.h"

#include <cstdint>

#include "optim/kernel_table.h"

namespace reftrain {

void accumulate_grad(float* sum, float* g, size_t n, bool first) {
  const int64_t count = int64_t(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    sum[i] = first ? g[i] : sum[i] + g[i];
    g[i] = 0.0f;
  }
}

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> grad_accum_records() {
  using namespace record;
  return {
      {"accumulate_grad",
       "sum = g (the first micro-batch) or sum + g; then g = 0",
       {inout("sum", "f32", "[n]"), inout("g", "f32", "[n]"), scalar("n"), scalar("first", "bool")},
       "",
       "",
       "optim/grad_accum.h",
       "accumulate_grad",
       "",
       "",
       "",
       "",
       "docs/kernels/11_linear_backward.md",
       "",
       "tests/optim/test_grad_accum.cpp",
       ""},
  };
}

}  // namespace reftrain
