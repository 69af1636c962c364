// The block loop every cast kernel runs (ops/cast.h's f16 casts, ops/bf16.h's bf16 casts):
// element i of dst from element i of src, threaded over blocks of kCastBlock elements, so no
// result depends on the thread count.
#pragma once

#include <cstddef>
#include <cstring>

#include "simd/parallel.h"

namespace reftrain {

// Elements per OpenMP block: 16 KiB of f32, a multiple of every ISA's lane count.
constexpr size_t kCastBlock = 4096;

// dst[i] = one(src[i]) for i < n: the references, one element at a time.
template <typename To, typename From, typename One>
void cast_elements(To* dst, const From* src, size_t n, One one) {
  const size_t nblocks = (n + kCastBlock - 1) / kCastBlock;
#pragma omp parallel for schedule(static)
  for (size_t blk = 0; blk < nblocks; ++blk) {
    const size_t end = blk * kCastBlock + kCastBlock < n ? blk * kCastBlock + kCastBlock : n;
    for (size_t i = blk * kCastBlock; i < end; ++i) dst[i] = one(src[i]);
  }
}

// The same over L elements per call of Lanes(dst, src): the fast casts. A block's last < L
// elements go through the same lanes on a zero-padded copy. Lanes is a template argument, not a
// function pointer handed in, so that each call is inlined: with a call per 8 lanes the bf16
// casts of a baby step took 1.4-1.8x as long on an AVX2 core (bench/RESULTS.md). dst and src
// are captured by value: the narrowing's integer vector stores may alias any object, so the
// loop reloaded pointers captured by reference from memory at every step.
template <size_t L, auto Lanes, typename To, typename From>
void cast_lanes(To* dst, const From* src, size_t n) {
  simd::parallel_blocks(n, kCastBlock, [=](size_t begin, size_t end) {
    size_t i = begin;
    for (; i + L <= end; i += L) Lanes(dst + i, src + i);
    if (i < end) {
      From in[L] = {};
      To out[L];
      std::memcpy(in, src + i, (end - i) * sizeof(From));
      Lanes(out, in);
      std::memcpy(dst + i, out, (end - i) * sizeof(To));
    }
  });
}

}  // namespace reftrain
