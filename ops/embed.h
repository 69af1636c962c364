// Token + position embedding (gpt2 family). GPU twin: 01_embed.wgsl.
//   forward:  out[b,t,:] = wte[tok[b,t],:] + wpe[t,:]
//   backward: dwte[tok[b,t],:] += dout[b,t,:];  dwpe[t,:] += dout[b,t,:]
// Shapes: tok [B,T] int32, wte [V,C], wpe [maxT,C], out/dout [B,T,C].
#pragma once

#include <cstddef>
#include <cstdint>

namespace reftrain {

// Token embedding alone (llama family): out[n,:] = wte[tok[n],:]; dwte[tok[n],:] += dout[n,:].
template <typename T>
void token_embed_forward(T* out, const int32_t* tokens, const T* wte, size_t N, int C);
template <typename T>
void token_embed_backward(T* dwte, const T* dout, const int32_t* tokens, size_t N, int C);

template <typename T>
void embed_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C);

// Accumulates (+=) into dwte and dwpe. A token that appears twice adds twice, in position
// order, so the sum is the same for any thread count.
template <typename T>
void embed_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tn, int C);

// The fast float path, used by the models: the same contracts, 16 channels at a time, and
// bit-identical to the reference (the same additions in the same order). The backward is
// parallel over chunks of 16 channels, each walking the positions in order: no atomics.

// Same as embed_forward except float only, 16 channels at a time: bit-identical.
void embed_forward_fast(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                        int B, int Tn, int C);
// Same as embed_backward except float only, parallel over 16-channel chunks: bit-identical.
void embed_backward_fast(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                         int Tn, int C);
// Same as token_embed_forward except float only, 16 channels at a time: bit-identical.
void token_embed_forward_fast(float* out, const int32_t* tokens, const float* wte, size_t N, int C);
// Same as token_embed_backward except float only, parallel over 16-channel chunks: bit-identical.
void token_embed_backward_fast(float* dwte, const float* dout, const int32_t* tokens, size_t N,
                               int C);

}  // namespace reftrain
