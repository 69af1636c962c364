// The one register micro-kernel of reftrain's CPU matrix products: the blocked matmul
// (ops/matmul_blocked.cpp, on packed panels) and every tile product of the fused attention
// (ops/attention_fast.cpp, on its packed head rows) call `microkernel::run`.
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

namespace reftrain::microkernel {

// Pins a loaded vector in a register. Without it GCC folds each B load into all MR of the FMAs
// that use it (vfmadd231ps mem, ...): MR·NV loads per step instead of NV, and the load ports, not
// the FMA unit, become the limit (measured on the matmul: 82 % of the FMA peak instead of 9x %).
template <typename T>
inline void in_register(simd::Batch<T>& b) {
  typename simd::Batch<T>::register_type r = b;
#if defined(__x86_64__)
  __asm__("" : "+v"(r));  // "v": any xmm/ymm/zmm register
#elif defined(__aarch64__)
  __asm__("" : "+w"(r));  // "w": any NEON register (v0-v31)
#endif
  b = r;
}

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

}  // namespace reftrain::microkernel
