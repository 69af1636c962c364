#include "ops/embed.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "ops/kernel_record.h"
#include "simd/wide.h"

namespace reftrain {

template <typename T>
void embed_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                   int C) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < Tn; ++t) {
      const size_t bt = size_t(b) * Tn + t;
      T* o = out + bt * C;
      const T* e = wte + size_t(tokens[bt]) * C;
      const T* p = wpe + size_t(t) * C;
      for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
    }
  }
}

template <typename T>
void token_embed_forward(T* out, const int32_t* tokens, const T* wte, size_t N, int C) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    const T* e = wte + size_t(tokens[n]) * C;
    for (int c = 0; c < C; ++c) out[n * C + c] = e[c];
  }
}

template <typename T>
void token_embed_backward(T* dwte, const T* dout, const int32_t* tokens, size_t N, int C) {
  // dwte rows are shared by repeated tokens: split the work over channel blocks instead of
  // positions, so each element of dwte is summed by one thread in position order.
  constexpr int kBlock = 32;
  const int nblocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int cb = 0; cb < nblocks; ++cb) {
    const int c0 = cb * kBlock;
    const int c1 = c0 + kBlock < C ? c0 + kBlock : C;
    for (size_t n = 0; n < N; ++n) {
      T* d = dwte + size_t(tokens[n]) * C;
      const T* g = dout + n * C;
      for (int c = c0; c < c1; ++c) d[c] += g[c];
    }
  }
}

template <typename T>
void embed_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tn, int C) {
  token_embed_backward(dwte, dout, tokens, size_t(B) * Tn, C);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < Tn; ++t) {
    T* d = dwpe + size_t(t) * C;
    for (int b = 0; b < B; ++b) {
      const T* g = dout + (size_t(b) * Tn + t) * C;
      for (int c = 0; c < C; ++c) d[c] += g[c];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The fast float path: the reference's additions in the reference's order, 16 channels at a
// time, so every result is bit-identical to it.

namespace {

using simd::load;

// dst[c] += src[c] for c in [c0, c1).
void add_into(float* dst, const float* src, size_t c0, size_t c1) {
  simd::for_each16(c0, c1, [&](auto lanes, size_t c) {
    using V = typename decltype(lanes)::type;
    simd::store(dst + c, load<V>(dst + c) + load<V>(src + c));
  });
}

}  // namespace

void embed_forward_fast(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                        int B, int Tn, int C) {
#pragma omp parallel for schedule(static)
  for (size_t bt = 0; bt < size_t(B) * Tn; ++bt) {
    const float* e = wte + size_t(tokens[bt]) * C;
    const float* p = wpe + (bt % Tn) * C;
    float* o = out + bt * C;
    simd::for_each16(0, C, [&](auto lanes, size_t c) {
      using V = typename decltype(lanes)::type;
      simd::store(o + c, load<V>(e + c) + load<V>(p + c));
    });
  }
}

void token_embed_forward_fast(float* out, const int32_t* tokens, const float* wte, size_t N,
                              int C) {
#pragma omp parallel for schedule(static)
  for (size_t n = 0; n < N; ++n) {
    std::memcpy(out + n * C, wte + size_t(tokens[n]) * C, sizeof(float) * C);
  }
}

// Parallel over chunks of 16 channels (one cache line of a row); each chunk walks the positions
// in order, so a token that appears twice adds in position order, as in the reference.
void token_embed_backward_fast(float* dwte, const float* dout, const int32_t* tokens, size_t N,
                               int C) {
  const int nchunks = (C + int(simd::kWidth) - 1) / int(simd::kWidth);
#pragma omp parallel for schedule(static)
  for (int chunk = 0; chunk < nchunks; ++chunk) {
    const size_t c0 = size_t(chunk) * simd::kWidth;
    const size_t c1 = std::min(c0 + simd::kWidth, size_t(C));
    for (size_t n = 0; n < N; ++n) add_into(dwte + size_t(tokens[n]) * C, dout + n * C, c0, c1);
  }
}

void embed_backward_fast(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                         int Tn, int C) {
  token_embed_backward_fast(dwte, dout, tokens, size_t(B) * Tn, C);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < Tn; ++t) {
    for (int b = 0; b < B; ++b) {
      add_into(dwpe + size_t(t) * C, dout + (size_t(b) * Tn + t) * C, 0, C);
    }
  }
}

#define REFTRAIN_INSTANTIATE(T)                                                          \
  template void embed_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int); \
  template void embed_backward<T>(T*, T*, const T*, const int32_t*, int, int, int);      \
  template void token_embed_forward<T>(T*, const int32_t*, const T*, size_t, int);       \
  template void token_embed_backward<T>(T*, const T*, const int32_t*, size_t, int);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)
#undef REFTRAIN_INSTANTIATE

// ---- the records -----------------------------------------------------------------------
std::vector<KernelRecord> embed_records() {
  using namespace record;
  const std::string page = "docs/kernels/01_embed.md", tests = "tests/ops/test_embed.cpp";
  return {
      {"embed_forward",
       "out[b,t,:] = wte[tok[b,t],:] + wpe[t,:]",
       {out("out", "f32", "[B,T,C]"), in("tokens", "i32", "[B,T]"), in("wte", "f32", "[Vp,C]"),
        in("wpe", "f32", "[maxT,C]"), scalar("B"), scalar("T"), scalar("C")},
       "01_embed.wgsl",
       "",
       "ops/embed.h",
       "embed_forward",
       "embed_forward_fast",
       "16 channels at a time; bit-identical",
       "",
       "embed.wgsl",
       page,
       "embed",
       tests,
       "bench/bench_ops.cpp embed_forward/{ref,fast}"},
      {"embed_backward",
       "dwte[tok[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:] (positions in order)",
       {inout("dwte", "f32", "[Vp,C]"), inout("dwpe", "f32", "[maxT,C]"),
        in("dout", "f32", "[B,T,C]"), in("tokens", "i32", "[B,T]"), scalar("B"), scalar("T"),
        scalar("C")},
       "01_embed.wgsl",
       "",
       "ops/embed.h",
       "embed_backward",
       "embed_backward_fast",
       "parallel over channel chunks, positions in order; bit-identical",
       "",
       "embed.wgsl",
       page,
       "embed",
       tests,
       "bench/bench_ops.cpp embed_backward/{ref,fast}"},
      {"token_embed_forward",
       "out[n,:] = wte[tok[n],:]",
       {out("out", "f32", "[N,C]"), in("tokens", "i32", "[N]"), in("wte", "f32", "[Vp,C]"),
        scalar("N"), scalar("C")},
       "01_embed.wgsl",
       "",
       "ops/embed.h",
       "token_embed_forward",
       "token_embed_forward_fast",
       "as embed_forward_fast; bit-identical",
       "",
       "embed.wgsl",
       page,
       "embed",
       tests,
       ""},
      {"token_embed_backward",
       "dwte[tok[n],:] += dout[n,:] (positions in order)",
       {inout("dwte", "f32", "[Vp,C]"), in("dout", "f32", "[N,C]"), in("tokens", "i32", "[N]"),
        scalar("N"), scalar("C")},
       "01_embed.wgsl",
       "",
       "ops/embed.h",
       "token_embed_backward",
       "token_embed_backward_fast",
       "as embed_backward_fast; bit-identical",
       "",
       "embed.wgsl",
       page,
       "embed",
       tests,
       ""},
  };
}

}  // namespace reftrain
