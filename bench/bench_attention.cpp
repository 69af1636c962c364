// Causal attention, forward + backward of one layer: the fused kernel (ops/attention.h)
// against the materialised reference (ops/attention.h), at NH = 6, hs = 64 (C = 384: baby and
// gpt2-small's head size) and T = 256 (B = 8, baby's shape), 1024 and 2048 (B = 1).
// bench/RESULTS.md has the figures.
//
// Counters:
//   GFLOP/s  the model's FLOPs per second: 6 products of 2·hs FLOPs over the B·NH·T(T+1)/2
//            causal (t, u) pairs (forward q·k and p·v; backward dp, dv, dq, dk). The fused
//            backward also recomputes q·k, and its two-pass split computes q·k and dp in both
//            passes: work done but not counted.
//   extra_MiB  memory the variant needs besides its inputs and outputs (qkv, out, dout, dqkv):
//            materialised: the probabilities [B,NH,T,T] and dp [B,NH,T]; fused: lse [B,NH,T]
//            and one workspace per thread (attention_fast_workspace_bytes).
//   busiest_ms  CPU time of the busiest OpenMP thread per iteration. On a machine shared with
//            other work the wall time includes waiting for a core; with OMP_WAIT_POLICY=passive
//            (waiting threads sleep instead of spinning) this is the time an idle machine
//            would show, up to cache and memory-bandwidth interference.
//
// Run: OMP_WAIT_POLICY=passive ./build/bench/bench_attention (threads: the third argument;
// 0 = all cores).
#include <benchmark/benchmark.h>
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "ops/attention.h"

namespace {

using reftrain::AttentionSplit;

constexpr int kNH = 6, kHs = 64, kC = kNH * kHs;

enum Variant { kMaterialised, kFusedAuto, kFusedPerHead, kFusedTwoPass };

struct Buffers {
  int B, T;
  std::vector<float> qkv, out, dout, dqkv;
  Buffers(int b, int t)
      : B(b),
        T(t),
        qkv(size_t(b) * t * 3 * kC),
        out(size_t(b) * t * kC),
        dout(size_t(b) * t * kC),
        dqkv(size_t(b) * t * 3 * kC) {
    // Deterministic values of the size a trained layer sees (scores within a few units).
    for (size_t i = 0; i < qkv.size(); ++i)
      qkv[i] = float(int(i * 2654435761u % 2001) - 1000) * 1e-3f;
    for (size_t i = 0; i < dout.size(); ++i) dout[i] = float(int(i * 40503u % 2001) - 1000) * 1e-4f;
  }
};

double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

// Runs f() and returns the largest CPU time any OpenMP thread spent in it (each thread reads its
// own clock in a parallel region before and after; the pool's threads are the kernels' threads).
template <typename F>
double busiest_thread_ms(F f) {
  std::vector<double> t0(omp_get_max_threads()), t1(t0.size());
#pragma omp parallel
  t0[omp_get_thread_num()] = thread_cpu_ms();
  f();
#pragma omp parallel
  t1[omp_get_thread_num()] = thread_cpu_ms();
  double m = 0;
  for (size_t i = 0; i < t0.size(); ++i) m = std::max(m, t1[i] - t0[i]);
  return m;
}

double mib(double bytes) {
  return bytes / (1 << 20);
}

void set_counters(benchmark::State& state, const Buffers& b, double extra_bytes) {
  const double pairs = double(b.B) * kNH * b.T * (b.T + 1) / 2.0;
  state.counters["GFLOP/s"] = benchmark::Counter(
      6.0 * 2.0 * kHs * pairs * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["extra_MiB"] = mib(extra_bytes);
}

// Times `step` (a whole forward + backward) and sets the counters.
template <typename Step>
void run(benchmark::State& state, const Buffers& b, double extra_bytes, Step step) {
  double busiest = 0;
  for (auto _ : state) {
    busiest += busiest_thread_ms(step);
    benchmark::DoNotOptimize(b.dqkv.data());
  }
  set_counters(state, b, extra_bytes);
  state.counters["busiest_ms"] = busiest / double(state.iterations());
}

void materialised(benchmark::State& state, Buffers& b) {
  std::vector<float> att(size_t(b.B) * kNH * b.T * b.T), dp(size_t(b.B) * kNH * b.T);
  auto step = [&] {
    reftrain::attention_forward(b.out.data(), att.data(), b.qkv.data(), b.B, b.T, kC, kNH);
    reftrain::attention_backward(b.dqkv.data(), dp.data(), b.dout.data(), b.qkv.data(), att.data(),
                                 b.B, b.T, kC, kNH);
  };
  run(state, b, double(att.size() + dp.size()) * sizeof(float), step);
}

void fused(benchmark::State& state, Buffers& b, AttentionSplit split) {
  std::vector<float> lse(size_t(b.B) * kNH * b.T);
  auto step = [&] {
    reftrain::attention_forward_fast(b.out.data(), lse.data(), b.qkv.data(), b.B, b.T, kC, kNH);
    reftrain::attention_backward_fast(b.dqkv.data(), b.dout.data(), b.qkv.data(), b.out.data(),
                                      lse.data(), b.B, b.T, kC, kNH, split);
  };
  const size_t workspace = std::max(reftrain::attention_fast_workspace_bytes(b.T, kHs, false),
                                    reftrain::attention_fast_workspace_bytes(b.T, kHs, true));
  run(state, b, double(lse.size()) * sizeof(float) + double(workspace) * omp_get_max_threads(),
      step);
}

// Args: B, T, threads (0 = all).
template <Variant V>
void BM_Attention(benchmark::State& state) {
  const int threads = state.range(2) > 0 ? int(state.range(2)) : omp_get_num_procs();
  omp_set_num_threads(threads);
  Buffers b(int(state.range(0)), int(state.range(1)));
  if (V == kMaterialised) materialised(state, b);
  if (V == kFusedAuto) fused(state, b, AttentionSplit::kAuto);
  if (V == kFusedPerHead) fused(state, b, AttentionSplit::kPerHead);
  if (V == kFusedTwoPass) fused(state, b, AttentionSplit::kTwoPass);
  state.counters["threads"] = threads;
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"B", "T", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();
  for (int threads : {1, 0}) {
    b->Args({8, 256, threads});
    b->Args({1, 1024, threads});
    b->Args({1, 2048, threads});
  }
}

BENCHMARK(BM_Attention<kMaterialised>)->Apply(shapes);
BENCHMARK(BM_Attention<kFusedAuto>)->Apply(shapes);
BENCHMARK(BM_Attention<kFusedPerHead>)->Apply(shapes);
BENCHMARK(BM_Attention<kFusedTwoPass>)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
