// Causal multi-head self-attention. GPU twins: 05_attention.wgsl (forward) and
// 10_attention_backward.wgsl (backward). Derivation: docs/kernels/05_attention.md and
// 10_attention_backward.md.
//
// attention_forward / attention_backward: the reference, with the probabilities materialised.
//   q, k, v = qkv[b,t, 0:C], qkv[b,t, C:2C], qkv[b,t, 2C:3C];  head h owns channels h·hs..
//   s[t,u]   = (q_t · k_u) / √hs                 for u ≤ t (causal)
//   p[t,u]   = exp(s[t,u] - max_u s) / Σ_u exp(s[t,u] - max_u s)
//   out[t]   = Σ_u p[t,u]·v_u
// backward:
//   dp[t,u]  = dout_t · v_u;       dv_u += p[t,u]·dout_t
//   ds[t,u]  = p[t,u]·(dp[t,u] - Σ_u' p[t,u']·dp[t,u'])
//   dq_t    += Σ_u ds[t,u]·k_u / √hs;   dk_u += ds[t,u]·q_t / √hs
// Shapes: qkv/dqkv [B,T,3C], out/dout [B,T,C], att [B,NH,T,T] (u > t stored as 0),
// dp_scratch [B,NH,T].
//
// attention_forward_fast / attention_backward_fast (ops/attention_fast.cpp): the same as the
// reference except fused, FlashAttention-2 style: no [B,NH,T,T] tensor exists at any point.
// Forward, per (b, h, query row t), walking the keys u = 0..t in tiles of 32:
//   s_u = (q_t · k_u)/√hs;   m' = max(m, s_u);   c = exp(m − m')
//   ℓ = ℓ·c + exp(s_u − m');  acc = acc·c + exp(s_u − m')·v_u;  m = m'   (online softmax)
//   out_t = acc/ℓ,   lse_t = m + log ℓ                          (only lse is kept: [B,NH,T])
// Backward recomputes p[t,u] = exp(s_u − lse_t) tile by tile:
//   D_t = dout_t · out_t  (= Σ_u p·dp);  dp = dout_t · v_u;  ds = p·(dp − D_t)/√hs
//   dq_t += Σ_u ds·k_u,   dk_u += Σ_t ds·q_t,   dv_u += Σ_t p·dout_t
// Shapes: qkv/dqkv [B,T,3C] (q | k | v, head h owns channels h·hs..), out/dout [B,T,C],
// lse [B,NH,T]. Extra memory: a per-thread workspace of O(T·hs) (the head's keys and values
// packed), reused from call to call (attention_fast_workspace_bytes).
//
// Every output element of the fast kernels is one fixed chain of fused multiply-adds in
// ascending key (or query) order, and every reduction runs over 16 logical lanes combined in a
// fixed tree, so the result is the same bits for any thread count, for either backward split,
// and on AVX2 and AVX-512.
//
// attention_decode / attention_decode_fast: one query row against the keys and values already
// computed (text generation with a KV cache, B = 1). qkv holds rows 0..t of one sequence in the
// layout above; the kernels read row t's q and rows 0..t's k and v, and write row t of the
// output: exactly row t of attention_forward (decode) or of attention_forward_fast
// (decode_fast), bit for bit, since each repeats that row's own arithmetic: the reference its
// loops, the fast version its key tiles of 32, online-softmax steps and FMA chains. Cost O(t·C)
// instead of the O(t²·C) of a forward over the t+1 rows.
#pragma once

#include <cstddef>

namespace reftrain {

// The attention a model runs. fused: online softmax, only the row logsumexp [B,NH,T] kept for
// the backward (attention_forward_fast). materialised: the reference, keeping the probabilities
// [B,NH,T,T].
enum class AttentionKind { kFused, kMaterialised };

template <typename T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH);

// Accumulates (+=) into dqkv. Parallel over (b, h): a head's dq, dk, dv belong to one thread,
// which walks t in order, so the sums do not depend on the thread count.
template <typename T>
void attention_backward(T* dqkv, T* dp_scratch, const T* dout, const T* qkv, const T* att, int B,
                        int Tn, int C, int NH);

// How the backward shares its work among threads. kPerHead: one thread owns a (b, h) head and
// computes its dq, dk and dv in one pass. kTwoPass: a pass over (head, query tile) computes dq,
// a second over (head, key tile) computes dk and dv, recomputing p (7 tile products instead of
// 5, but finer units). kAuto picks per call from B·NH and the thread count. All give the same
// bits; only the speed differs.
enum class AttentionSplit { kAuto, kPerHead, kTwoPass };

// Same as attention_forward except fused: online softmax over key tiles, only the row logsumexp
// (lse [B,NH,T]) kept instead of the probabilities.
template <typename T>
void attention_forward_fast(T* out, T* lse, const T* qkv, int B, int Tn, int C, int NH);

// Same as attention_backward except that it recomputes the probabilities tile by tile from lse.
// Accumulates (+=) into dqkv; with accumulate false, writes it (each element 0 + its sum, never
// read: the bits of zeroing dqkv first). `out` and `lse` are the forward's.
template <typename T>
void attention_backward_fast(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                             int B, int Tn, int C, int NH,
                             AttentionSplit split = AttentionSplit::kAuto, bool accumulate = true);

// Row t of attention_forward over qkv rows 0..t [t+1, 3C]: out [C]; att [NH, t+1] receives the
// row's probabilities (scratch). Parallel over heads.
template <typename T>
void attention_decode(T* out, T* att, const T* qkv, int t, int C, int NH);

// Same as attention_decode except that it computes row t of attention_forward_fast (the same key
// tiles and chains, so the same bits): lse [NH] receives the row's logsumexp per head.
template <typename T>
void attention_decode_fast(T* out, T* lse, const T* qkv, int t, int C, int NH);

// qkv[n] = [q[n] | k[n] | v[n]] over N rows of C channels: the layout the attention reads (the
// llama family computes q, k and v as three products). unpack_qkv is its backward: dqkv's thirds
// written (not accumulated) to dq, dk, dv. Threaded over rows; copies, so bit-exact.
void pack_qkv(float* qkv, const float* q, const float* k, const float* v, size_t N, int C);
void unpack_qkv(float* dq, float* dk, float* dv, const float* dqkv, size_t N, int C);

// Bytes of the per-thread workspace the forward (backward = false) or backward uses at (Tn, hs)
// for elements of `elem_bytes` (4: float): the only memory the fused kernels add besides lse.
size_t attention_fast_workspace_bytes(int Tn, int hs, bool backward,
                                      size_t elem_bytes = sizeof(float));

}  // namespace reftrain
