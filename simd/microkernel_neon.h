// The aarch64 pieces of the matrix products (included by simd/microkernel.h alone). Only the
// register constraint is NEON's own: the packing has no register transposes here (the NEON float
// tile is 6 rows, and nothing has been measured on ARM hardware yet, bench/RESULTS.md), so the
// callers' element loops pack every panel, and one row against a transposed B goes through the
// packed loop nest like any other product.
#pragma once

#include <cstddef>

#include "simd/simd.h"

namespace reftrain::simd::microkernel {

// Pins a loaded vector in a register (simd/microkernel_x86.h says why).
template <typename T>
inline void in_register(Batch<T>& b) {
  typename Batch<T>::register_type r = b;
  __asm__("" : "+w"(r));  // "w": any NEON register (v0-v31)
  b = r;
}

// No register transposes: nothing of the panel is packed here.
template <typename T, int MR>
int interleave_in_registers(T*, const T* const*, int) {
  return 0;
}

// No register transposes: nothing of the panel is filled here.
template <int NR, typename T, typename BT>
Transposed transpose_in_registers(T*, const BT*, size_t, int, int) {
  return {0, 0};
}

// No gemv kernel: the packed loop nest serves this shape too.
template <typename BT>
bool gemv_transposed(const GemvRows<BT>&, int) {
  return false;
}

}  // namespace reftrain::simd::microkernel
