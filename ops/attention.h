// Causal multi-head self-attention with materialised probabilities (the reference; the fused
// online-softmax kernel is a later addition). GPU twins: 05_attention.wgsl and
// 10_attention_backward.wgsl.
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
#pragma once

namespace reftrain {

template <typename T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH);

// Accumulates (+=) into dqkv. Parallel over (b, h): a head's dq, dk, dv belong to one thread,
// which walks t in order, so the sums do not depend on the thread count.
template <typename T>
void attention_backward(T* dqkv, T* dp_scratch, const T* dout, const T* qkv, const T* att, int B,
                        int Tn, int C, int NH);

}  // namespace reftrain
