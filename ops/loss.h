// Cross-entropy over softmax(logits) with an optional z-loss, fused with its gradient.
// GPU twin: 07_loss.wgsl. With x_ij the logits and z the z-loss coefficient:
//   lse_i    = m + log Σ_j exp(x_ij - m),  m = max_j x_ij              (j < V)
//   p_ij     = exp(x_ij - lse_i)                                       (softmax)
//   loss_i   = (lse_i - x_i,target) + z·lse_i²
//   dx_ij    = (p_ij - [j = target])·dloss + 2·z·lse_i·p_ij·dloss     (j < V);  0 for V ≤ j < Vp
// The z-loss term z·lse² (∂/∂x_ij = 2·z·lse_i·p_ij) pulls the log-partition towards 0. With
// dloss = 1/N the model's loss is mean_i loss_i: mean cross-entropy + z·mean(lse²). With z = 0
// neither term is evaluated, so losses and dlogits are bit-identical to plain cross-entropy.
// Columns V..Vp-1 are vocabulary padding (gpt2-124m pads 50257 to 50304): they take no part in
// the softmax and get zero gradient.
// Shapes: logits/dlogits [N,Vp], targets [N], losses [N].
#pragma once

#include <cstdint>

namespace reftrain {

// Writes losses; writes (=) dlogits when it is not null: the start of the backward pass.
template <typename T>
void crossentropy_forward_backward(T* losses, T* dlogits, const T* logits, const int32_t* targets,
                                   int N, int V, int Vp, T dloss, T z);

// The fast float path, used by the models: the same contract with 16-lane xsimd code — the max
// and Σexp in the fixed order of simd/reduce.h, simd::exp, one exponential per logit (dlogits
// holds e^(x-m) between the two passes). The same bits on every ISA; within the bound
// tests/ops/test_loss.cpp states of the reference.

// Same as crossentropy_forward_backward except float only, 16 lanes at a time, simd::exp.
void crossentropy_forward_backward_fast(float* losses, float* dlogits, const float* logits,
                                        const int32_t* targets, int N, int V, int Vp, float dloss,
                                        float z);

}  // namespace reftrain
