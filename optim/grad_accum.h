// Gradient accumulation: the sum of K micro-batch gradients, in micro-batch order.
//   PyTorch:  for k in range(K): (loss_k / K).backward()   # autograd adds into p.grad
// PyTorch adds each micro-batch straight into the running gradient. Here every micro-batch's
// gradient g_k is computed from zero and then added to the sum: sum = ((g_0 + g_1) + g_2) + ...
// That defines the step's gradient as one fixed expression of the K micro-batch gradients, so a
// data-parallel run that computes them on different machines and gathers them adds the same
// floats in the same order and gets the same bits. (Accumulating micro-batch k inside backward
// into a buffer that already holds 0..k-1 would round every partial product against a
// different running value.)
#pragma once

#include <cstddef>

namespace reftrain {

// sum = g (first micro-batch) or sum + g (every later one), element by element; then g = 0,
// ready for the next micro-batch's backward. n elements; any thread count gives the same bits.
void accumulate_grad(float* sum, float* g, size_t n, bool first);

}  // namespace reftrain
