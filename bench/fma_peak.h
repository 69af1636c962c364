// The FMA-throughput ceiling of a core: independent chains of acc = acc·a + b in the widest
// float vectors of the build, no loads or stores. Every matmul figure is read as a fraction of
// what this loop reaches on the same machine in the same run (bench/bench_peak.cpp runs it;
// another benchmark program can include this header to report "% of peak" beside its own
// GFLOP/s). An FMA counts as 2 floating-point operations.
#pragma once

#include <cstdint>

#include "simd/simd.h"

namespace reftrain::bench {

// Independent accumulator chains: FMA latency (4 cycles) × FMA pipes (2) = 8 in flight covers
// every x86 core we run on; 12 leaves a margin and, with the two operands, still fits AVX2's 16
// vector registers, so no chain spills. aarch64 cores have up to 4 FMA pipes (Apple's M
// series, Neoverse V1/V2: 4 × 4 = 16 in flight) and 32 registers: 24 chains.
#if defined(__aarch64__)
constexpr int kFmaChains = 24;
#else
constexpr int kFmaChains = 12;
#endif

// Floating-point operations one call of fma_chains(iters, ...) performs.
constexpr double fma_chain_flops(int64_t iters) {
  return 2.0 * kFmaChains * double(simd::Batch<float>::size) * double(iters);
}

// `iters` rounds of kFmaChains independent FMAs. The multiplier is just below 1 and the addend
// small, so the values stay normal and finite for any iters; the result depends on every chain,
// so the compiler cannot drop any of the work.
inline float fma_chains(int64_t iters, float seed) {
  using Vec = simd::Batch<float>;
  const Vec a(0.999999f), b(1e-7f);
  Vec acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = Vec(seed + float(c));
  for (int64_t i = 0; i < iters; ++i) {
    for (int c = 0; c < kFmaChains; ++c) acc[c] = simd::fma(acc[c], a, b);
  }
  Vec sum = acc[0];
  for (int c = 1; c < kFmaChains; ++c) sum += acc[c];
  return simd::reduce_add(sum);
}

}  // namespace reftrain::bench
