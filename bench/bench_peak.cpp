// The FMA peak of this machine: bench/fma_peak.h's independent FMA chains on every OpenMP
// thread at once. Counters: FLOPS (all threads together) and FLOPS_per_core (that divided by the
// thread count). bench/run_all.sh reads them (--benchmark_format=json) to state each training
// step's model FLOP/s as a fraction of the measured peak at the same thread count.
//
// Run: OMP_NUM_THREADS=N ./build/bench/bench_peak
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>

#include "bench/fma_peak.h"

namespace {

using reftrain::bench::fma_chain_flops;
using reftrain::bench::fma_chains;

// 2^22 rounds: about 15 ms per thread at 100 GFLOP/s, long enough that the parallel region's
// start-up is noise.
constexpr int64_t kIters = int64_t(1) << 22;

void BM_fma_peak(benchmark::State& state) {
  const int threads = omp_get_max_threads();
  float sink = 0.0f;
  for (auto _ : state) {
#pragma omp parallel reduction(+ : sink)
    sink += fma_chains(kIters, float(omp_get_thread_num()));
  }
  benchmark::DoNotOptimize(sink);
  const double flops = fma_chain_flops(kIters) * threads * double(state.iterations());
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  state.counters["FLOPS_per_core"] =
      benchmark::Counter(flops / threads, benchmark::Counter::kIsRate);
  state.counters["threads"] = threads;
}
// Real time: the work runs on OpenMP's threads, not only on the one the library times.
BENCHMARK(BM_fma_peak)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
