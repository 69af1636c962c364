// Cross-entropy over softmax(logits), fused with its gradient. GPU twin: 07_loss.wgsl.
//   lse_i    = m + log Σ_j exp(z_ij - m),  m = max_j z_ij          (j < V)
//   loss_i   = lse_i - z_i,target
//   dz_ij    = (exp(z_ij - lse_i) - [j = target]) · dloss          (j < V);  0 for V ≤ j < Vp
// With dloss = 1/N the model's loss is mean_i loss_i. Columns V..Vp-1 are vocabulary padding
// (gpt2-124m pads 50257 to 50304): they take no part in the softmax and get zero gradient.
// Shapes: logits/dlogits [N,Vp], targets [N], losses [N].
#pragma once

#include <cstdint>

namespace reftrain {

// Writes losses; writes (=) dlogits when it is not null: the start of the backward pass.
template <typename T>
void crossentropy_forward_backward(T* losses, T* dlogits, const T* logits, const int32_t* targets,
                                   int N, int V, int Vp, T dloss);

}  // namespace reftrain
