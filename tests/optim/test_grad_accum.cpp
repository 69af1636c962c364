// accumulate_grad (optim/grad_accum.h): the first micro-batch's gradient is copied, every later
// one added in micro-batch order, and the gradient buffer is left zeroed each time; the sum is
// the same bits for any thread count. The expected values are written out here, one float add
// per micro-batch in order, so a kernel that summed in another order or forgot to zero fails.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "optim/grad_accum.h"
#include "tests/common/fast_check.h"

namespace reftrain {
namespace {

// Micro-batch k's gradient element i: values whose float sum depends on the order of the adds.
float grad_of(int k, size_t i) {
  const float scale[3] = {1e8f, 1.0f, -1e8f};
  return scale[k] + float(i % 7) * 0.25f;
}

std::vector<float> accumulate(size_t n) {
  std::vector<float> sum(n, 123.0f), g(n);
  for (int k = 0; k < 3; ++k) {
    for (size_t i = 0; i < n; ++i) g[i] = grad_of(k, i);
    accumulate_grad(sum.data(), g.data(), n, k == 0);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(g[i], 0.0f) << "g not zeroed after micro-batch " << k;
  }
  return sum;
}

TEST(GradAccum, FirstCopiesLaterAddInOrderAndGradIsZeroed) {
  const size_t n = 4099;  // not a multiple of any vector width
  const std::vector<float> sum = accumulate(n);
  for (size_t i = 0; i < n; ++i) {
    const float want = (grad_of(0, i) + grad_of(1, i)) + grad_of(2, i);
    ASSERT_EQ(std::memcmp(&sum[i], &want, 4), 0) << "element " << i;
  }
}

TEST(GradAccum, ThreadCountInvariant) {
  fast_check::expect_thread_count_invariant([] { return accumulate(3 * 65536 + 5); });
}

}  // namespace
}  // namespace reftrain
