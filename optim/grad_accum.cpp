#include "optim/grad_accum.h"

#include <cstdint>

namespace reftrain {

void accumulate_grad(float* sum, float* g, size_t n, bool first) {
  const int64_t count = int64_t(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    sum[i] = first ? g[i] : sum[i] + g[i];
    g[i] = 0.0f;
  }
}

}  // namespace reftrain
