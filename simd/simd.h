// The thin layer over xsimd. Debian 12 ships xsimd 8.1, where the horizontal sum is `hadd`;
// xsimd 9 renamed it `reduce_add`. Kernels include this header, never <xsimd/xsimd.hpp>, so
// the spelling lives in one place.
#pragma once

#include <xsimd/xsimd.hpp>

namespace reftrain::simd {

// The instruction set xsimd targets in this build (chosen by -march at compile time).
using Arch = xsimd::default_arch;
template <typename T>
using Batch = xsimd::batch<T, Arch>;

inline const char* arch_name() {
  return Arch::name();
}

// Sum of a batch's lanes. (GCC 12 warns falsely about _mm512_undefined_ps inside xsimd 8's
// AVX-512 hadd; the lanes it calls undefined are overwritten before use.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <typename T>
T reduce_add(const Batch<T>& b) {
#if XSIMD_VERSION_MAJOR >= 9
  return xsimd::reduce_add(b);
#else
  return xsimd::hadd(b);
#endif
}
#pragma GCC diagnostic pop

}  // namespace reftrain::simd
