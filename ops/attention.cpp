#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "ops/kernel_record.h"

namespace reftrain {

template <typename T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  const size_t C3 = size_t(3) * C;
#pragma omp parallel for collapse(3) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < Tn; ++t) {
        const T* q = qkv + (size_t(b) * Tn + t) * C3 + size_t(h) * hs;
        T* p = att + ((size_t(b) * NH + h) * Tn + t) * Tn;
        T maxv = -INFINITY;
        for (int u = 0; u <= t; ++u) {
          const T* k = qkv + (size_t(b) * Tn + u) * C3 + C + size_t(h) * hs;
          T s = 0;
          for (int i = 0; i < hs; ++i) s += q[i] * k[i];
          p[u] = s * scale;
          if (p[u] > maxv) maxv = p[u];
        }
        T sum = 0;
        for (int u = 0; u <= t; ++u) {
          p[u] = std::exp(p[u] - maxv);
          sum += p[u];
        }
        const T inv = T(1) / sum;
        for (int u = 0; u <= t; ++u) p[u] *= inv;
        for (int u = t + 1; u < Tn; ++u) p[u] = 0;
        T* o = out + (size_t(b) * Tn + t) * C + size_t(h) * hs;
        for (int i = 0; i < hs; ++i) o[i] = 0;
        for (int u = 0; u <= t; ++u) {
          const T* v = qkv + (size_t(b) * Tn + u) * C3 + 2 * size_t(C) + size_t(h) * hs;
          for (int i = 0; i < hs; ++i) o[i] += p[u] * v[i];
        }
      }
    }
  }
}

// attention_forward's loop body for (b = 0, h, t) alone: the same operations in the same order,
// with only this row's probabilities kept.
template <typename T>
void attention_decode(T* out, T* att, const T* qkv, int t, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  const size_t C3 = size_t(3) * C;
#pragma omp parallel for schedule(static)
  for (int h = 0; h < NH; ++h) {
    const T* q = qkv + size_t(t) * C3 + size_t(h) * hs;
    T* p = att + size_t(h) * (t + 1);
    T maxv = -INFINITY;
    for (int u = 0; u <= t; ++u) {
      const T* k = qkv + size_t(u) * C3 + C + size_t(h) * hs;
      T s = 0;
      for (int i = 0; i < hs; ++i) s += q[i] * k[i];
      p[u] = s * scale;
      if (p[u] > maxv) maxv = p[u];
    }
    T sum = 0;
    for (int u = 0; u <= t; ++u) {
      p[u] = std::exp(p[u] - maxv);
      sum += p[u];
    }
    const T inv = T(1) / sum;
    for (int u = 0; u <= t; ++u) p[u] *= inv;
    T* o = out + size_t(h) * hs;
    for (int i = 0; i < hs; ++i) o[i] = 0;
    for (int u = 0; u <= t; ++u) {
      const T* v = qkv + size_t(u) * C3 + 2 * size_t(C) + size_t(h) * hs;
      for (int i = 0; i < hs; ++i) o[i] += p[u] * v[i];
    }
  }
}

template <typename T>
void attention_backward(T* dqkv, T* dp_scratch, const T* dout, const T* qkv, const T* att, int B,
                        int Tn, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  const size_t C3 = size_t(3) * C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      T* dp = dp_scratch + (size_t(b) * NH + h) * Tn;
      const size_t hoff = size_t(h) * hs;
      for (int t = 0; t < Tn; ++t) {
        const T* p = att + ((size_t(b) * NH + h) * Tn + t) * Tn;
        const T* dy = dout + (size_t(b) * Tn + t) * C + hoff;
        T dot = 0;  // Σ_u p[t,u]·dp[t,u]
        for (int u = 0; u <= t; ++u) {
          const T* v = qkv + (size_t(b) * Tn + u) * C3 + 2 * size_t(C) + hoff;
          T* dv = dqkv + (size_t(b) * Tn + u) * C3 + 2 * size_t(C) + hoff;
          T s = 0;
          for (int i = 0; i < hs; ++i) {
            s += dy[i] * v[i];
            dv[i] += p[u] * dy[i];
          }
          dp[u] = s;
          dot += p[u] * s;
        }
        const T* q = qkv + (size_t(b) * Tn + t) * C3 + hoff;
        T* dq = dqkv + (size_t(b) * Tn + t) * C3 + hoff;
        for (int u = 0; u <= t; ++u) {
          const T ds = p[u] * (dp[u] - dot) * scale;
          const T* k = qkv + (size_t(b) * Tn + u) * C3 + C + hoff;
          T* dk = dqkv + (size_t(b) * Tn + u) * C3 + C + hoff;
          for (int i = 0; i < hs; ++i) {
            dq[i] += ds * k[i];
            dk[i] += ds * q[i];
          }
        }
      }
    }
  }
}

#define REFTRAIN_INSTANTIATE(T)                                             \
  template void attention_forward<T>(T*, T*, const T*, int, int, int, int); \
  template void attention_decode<T>(T*, T*, const T*, int, int, int);       \
  template void attention_backward<T>(T*, T*, const T*, const T*, const T*, int, int, int, int);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)
#undef REFTRAIN_INSTANTIATE

// qkv[n] = [q[n] | k[n] | v[n]]: the layout attention_forward reads, C channels each.
void pack_qkv(float* qkv, const float* q, const float* k, const float* v, size_t N, int C) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    std::copy(q + n * C, q + (n + 1) * C, qkv + n * 3 * C);
    std::copy(k + n * C, k + (n + 1) * C, qkv + n * 3 * C + C);
    std::copy(v + n * C, v + (n + 1) * C, qkv + n * 3 * C + 2 * C);
  }
}

// The backward of pack_qkv: splits dqkv into dq, dk, dv (written, not accumulated).
void unpack_qkv(float* dq, float* dk, float* dv, const float* dqkv, size_t N, int C) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    const float* row = dqkv + n * 3 * C;
    std::copy(row, row + C, dq + n * C);
    std::copy(row + C, row + 2 * C, dk + n * C);
    std::copy(row + 2 * C, row + 3 * C, dv + n * C);
  }
}

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> attention_records() {
  using namespace record;
  const std::string h = "ops/attention.h", tests = "tests/ops/test_attention.cpp";
  const std::string variants =
      "materialised (the reference: the probabilities kept) or fused (the fast default: online "
      "softmax, only the logsumexp kept, which no dump records) (`--attention`)";
  const std::string how =
      "fused online softmax, only the logsumexp kept, tiles of 32 keys; "
      "within a bound";
  const std::string bench =
      "bench/bench_attention.cpp BM_Attention<kMaterialised>, "
      "BM_Attention<kFusedAuto>";
  return {
      {"attention_forward",
       "causal: s = q·k/√hs (u ≤ t); att = softmax_u(s); out_t = Σ_u att[t,u]·v_u. A fused "
       "(online-softmax) twin that keeps no att checks out only",
       {out("out", "f32", "[B,T,C]"), out("att", "f32", "[B,NH,T,T]"), in("qkv", "f32", "[B,T,3C]"),
        scalar("B"), scalar("T"), scalar("C"), scalar("NH")},
       "05_attention.wgsl",
       "",
       h,
       "attention_forward",
       "attention_forward_fast",
       how,
       variants,
       "attention.wgsl attention_fused.wgsl:attention_forward_fused",
       "docs/kernels/05_attention.md",
       "attention",
       tests,
       bench},
      {"attention_backward",
       "dp = dout·v; dv += att·dout; ds = att·(dp − Σ att·dp); dq += ds·k/√hs; dk += ds·q/√hs",
       {inout("dqkv", "f32", "[B,T,3C]"), scratch("dp_scratch", "[B,NH,T]"),
        in("dout", "f32", "[B,T,C]"), in("qkv", "f32", "[B,T,3C]"), in("att", "f32", "[B,NH,T,T]"),
        scalar("B"), scalar("T"), scalar("C"), scalar("NH")},
       "10_attention_backward.wgsl",
       "",
       h,
       "attention_backward",
       "attention_backward_fast",
       how,
       variants,
       "attention.wgsl attention_fused.wgsl:attention_backward_fused",
       "docs/kernels/10_attention_backward.md",
       "attention_backward",
       tests,
       bench},
      {"attention_decode",
       "one query row t against the cached rows 0..t: out = Σ_u softmax(q_t·k_u/√hs)·v_u",
       {out("out", "f32", "[C]"), scratch("att", "[NH,rows]"), in("qkv", "f32", "[rows,3C]"),
        scalar("t"), scalar("C"), scalar("NH")},
       "",
       "",
       h,
       "attention_decode",
       "attention_decode_fast",
       "the fused forward's row; the forward row's bits",
       variants,
       "",
       "docs/kernels/05_attention.md",
       "",
       "tests/ops/test_decode.cpp",
       ""},
      {"pack_qkv",
       "qkv[n] = [q[n] | k[n] | v[n]]: the layout attention reads",
       {out("qkv", "f32", "[N,3C]"), in("q", "f32", "[N,C]"), in("k", "f32", "[N,C]"),
        in("v", "f32", "[N,C]"), scalar("N"), scalar("C")},
       "",
       "",
       h,
       "pack_qkv",
       "",
       "",
       "",
       "replay.wgsl",
       "docs/kernels/05_attention.md",
       "",
       "tests/golden/test_kernel_dump.cpp",
       ""},
      {"unpack_qkv",
       "the backward of pack_qkv: dq, dk, dv = the thirds of dqkv (written)",
       {out("dq", "f32", "[N,C]"), out("dk", "f32", "[N,C]"), out("dv", "f32", "[N,C]"),
        in("dqkv", "f32", "[N,3C]"), scalar("N"), scalar("C")},
       "",
       "",
       h,
       "unpack_qkv",
       "",
       "",
       "",
       "replay.wgsl",
       "docs/kernels/10_attention_backward.md",
       "",
       "tests/golden/test_kernel_dump.cpp",
       ""},
  };
}

}  // namespace reftrain
