// Causal self-attention with its four products in bf16 (the canonical order, ops/matmul_bf16.h)
// and its softmax in f32: what `--precision bf16` runs, the split PyTorch's CPU autocast makes
// (scaled-dot-product attention's matmuls in bf16, softmax in f32). Per (b, h), with Q, K, V the
// head's rows of qkv16 [T, hs] and scale = 1/√hs:
//   forward:  S = Q·Kᵀ (bf16 product, f32 result);  s = S·scale;  p = softmax over u ≤ t (f32:
//             simd::exp, Σ in the 16-lane order of simd/reduce.h, times 1/Σ), 0 for u > t;
//             P = bf16(p);  out = P·V
//   backward: dP = dOut·Vᵀ;  D_t = Σ_u p·dP (the 16-lane order);  ds = p·(dP − D_t)·scale (f32);
//             dS = bf16(ds);  dQ += dS·K;  dK += dSᵀ·Q;  dV += Pᵀ·dOut
// The products over keys run over all T positions (K = T, the masked p being exact zeros), so a
// row's sum has one fixed length and blocking whatever the row. The fast paths skip the work the
// mask makes exact (ops/matmul_bf16.h, Bf16Causal: scores above the diagonal, which are never
// read, and whole +0 blocks of keys when qkv16 and dout16 are finite) without changing a bit. The
// probabilities are materialised ([B,NH,T,T] in f32 for the backward and in bf16 for the product).
// Every product runs on the MatmulBf16's path: Bf16Path::kReference is the reference, the fast
// paths give the same bits (tests/ops/test_bf16.cpp). The (b, h) pairs are spread over
// mm.threads() threads, each running its head's products on one thread.
#pragma once

#include "ops/bf16.h"
#include "ops/matmul_bf16.h"

namespace reftrain {

// qkv16 [B,T,3C] bf16; out [B,T,C] f32; att [B,NH,T,T] f32 and att16 (its bf16 copy) written.
void attention_forward_bf16(MatmulBf16& mm, float* out, float* att, bf16* att16, const bf16* qkv16,
                            int B, int Tn, int C, int NH);

// Accumulates (+=) into dqkv [B,T,3C] f32. dout16 [B,T,C] is the output gradient rounded to
// bf16; dp [mm.threads(),T,T] f32 and ds16 [mm.threads(),T,T] bf16 are scratch (one [T,T] each
// per thread). With accumulate false, dqkv is written (its products start from +0), never read:
// the bits of zeroing it first.
void attention_backward_bf16(MatmulBf16& mm, float* dqkv, float* dp, bf16* ds16, const bf16* dout16,
                             const bf16* qkv16, const float* att, const bf16* att16, int B, int Tn,
                             int C, int NH, bool accumulate = true);

// Row pos of attention_forward_bf16 for a B = 1 sequence whose qkv16 rows 0..pos are in place
// (the KV cache): out [C] f32; p [pos+1] f32 and p16 [pos+1] bf16 are scratch. The products over
// keys run over pos+1 positions instead of T: the terms past pos are zeros in the forward, so the
// row has the forward's bits (tests/ops/test_bf16.cpp).
void attention_decode_bf16(MatmulBf16& mm, float* out, float* p, bf16* p16, const bf16* qkv16,
                           int pos, int C, int NH);

}  // namespace reftrain
