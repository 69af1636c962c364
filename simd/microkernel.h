// The one register micro-kernel of reftrain's CPU matrix products: the blocked matmul
// (ops/matmul_blocked.cpp, on packed panels) and every tile product of the fused attention
// (ops/attention_fast.cpp, on its packed head rows) call `simd::microkernel::run`. The pieces of
// the products that are written per ISA (register constraints, packing transposes, the gemv
// kernel) are in one file per ISA, chosen below: simd/microkernel_x86.h (AVX2 and AVX-512),
// simd/microkernel_neon.h (aarch64).
//
// In BLIS's terms the products are three separate pieces: packing (copying operands into the
// layout the kernel streams), cache blocks (the loop nest choosing which panels meet), and this
// small register kernel. Each caller keeps its own packing and cache blocks; only this piece is
// shared, so its contract is the arithmetic of both:
//
//   C[i][j] = (load_c ? C[i][j] : 0), then C[i][j] = fma(A(i,p), B(p,j), C[i][j]) for p = 0..P-1
//   in ascending order, then + bias[j] when a bias is given (one more rounding).
//
// One chain per output element; a SIMD lane is an element, so no sum crosses lanes and neither
// the register shape, the vector width nor the caller's loop nest changes a bit.
#pragma once

#include <cstddef>

#include "simd/simd.h"

namespace reftrain::simd::microkernel {

// One row against a transposed B, for the ISA's gemv kernel (gemv_transposed below):
//   c[j] = (accumulate ? c[j] : 0) + Σ_p a[p]·b[j·ldb + p] (+ bias[j]) for j < N, p < K.
template <typename BT>
struct GemvRows {
  int N, K;
  const float* a;
  const BT* b;
  size_t ldb;
  float* c;
  bool accumulate;
  const float* bias;
};

// The corner [0, p) × [0, j) of a packing panel that the ISA's register transposes filled.
struct Transposed {
  int p, j;
};

}  // namespace reftrain::simd::microkernel

// What each ISA adds, with the same names in each file:
//   in_register(Batch&)                   keeps a loaded vector in a register (an asm constraint)
//   interleave_in_registers<T, MR>(...)   the matmul's A packing through register transposes
//   transpose_in_registers<NR>(...)       the matmul's transposed-B packing, likewise
//   gemv_transposed(GemvRows, threads)    one row against a transposed B, or false: no kernel
#if defined(__x86_64__)
#include "simd/microkernel_x86.h"
#elif defined(__aarch64__)
#include "simd/microkernel_neon.h"
#else
#error "reftrain's micro-kernel is written for x86-64 and aarch64"
#endif

namespace reftrain::simd::microkernel {

// The operands of one register tile of MR rows × NV vectors of C.
//   A(i, p) = a[i·as + p·ap]: any strides (a packed matmul panel has as = 1, ap = MR).
//   B(p, ·) = NV vectors from b + p·ldb; aligned (kAlignedB) or not.
//   C rows at c + i·ldc; bias (NV vectors) or null.
template <typename T>
struct Tile {
  T* c;
  size_t ldc;
  const T* a;
  size_t as, ap;
  const T* b;
  size_t ldb;
};

// Per step p: NV vector loads of B, MR broadcasts of A, MR·NV independent FMAs, the MR·NV
// accumulators in registers for all P steps. Always inlined: the callers' strides and flags are
// constants, and folded into the loop they cost nothing.
template <typename T, int MR, int NV, bool kAlignedB>
__attribute__((always_inline)) inline void run(const Tile<T>& t, int P, bool load_c,
                                               const T* bias) {
  using V = simd::Batch<T>;
  constexpr int W = int(V::size);
  V acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      acc[i][v] = load_c ? V::load_unaligned(t.c + i * t.ldc + v * W) : V(T(0));
    }
  }
  for (int p = 0; p < P; ++p) {
    const T* bp = t.b + size_t(p) * t.ldb;
    V b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      b[v] = kAlignedB ? V::load_aligned(bp + v * W) : V::load_unaligned(bp + v * W);
      in_register(b[v]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const V a(t.a[i * t.as + size_t(p) * t.ap]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = simd::fma(a, b[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const V r = bias ? acc[i][v] + V::load_unaligned(bias + v * W) : acc[i][v];
      r.store_unaligned(t.c + i * t.ldc + v * W);
    }
  }
}

}  // namespace reftrain::simd::microkernel
