// The matmul family (ops/matmul.h) against its ceiling and its peers, in one run:
//   - fma_peak: bench/fma_peak.h's independent FMA chains on every thread, the ceiling in GFLOP/s;
//   - every variant (naive, tiled, blocked, eigen) and OpenBLAS's cblas_sgemm on the three
//     products of a linear layer: fwd Y = X·Wᵀ + b, bwd_data dX += dY·W, bwd_weight dW += dYᵀ·X,
//     at cubes 256..2048 and at the training shapes of `baby` (B=8, T=256: M = 2048) and
//     `gpt2-124m` (B=4, T=64: M = 256).
// Counters: GFLOP/s (2·M·N·K per product, from wall time) and pct_peak, the percentage of the
// FMA loop's GFLOP/s at the same thread count, measured once at start (the context line
// fma_peak_gflops). OpenBLAS gets no bias in fwd (it cannot fuse one); ours adds it.
//
// Threads: --threads=1,2 runs every benchmark at 1 and at 2 threads; without it, at
// omp_get_max_threads() (OMP_NUM_THREADS, or every core) alone, which is how bench/run_all.sh
// calls it once per count. reftrain's variants get the count through Matmul(kind, t) and
// omp_set_num_threads; OpenBLAS (Debian's libopenblas-dev: the pthread build, its own thread
// pool) through openblas_set_num_threads. naive runs only where a product is ≤ 2.5 GFLOP.
//
//   ./build/bench/bench_matmul --threads=1,2 --benchmark_repetitions=3 --benchmark_filter=blas
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "bench/fma_peak.h"
#include "core/model/model_config.h"
#include "ops/linear.h"
#include "simd/simd.h"

namespace {

using reftrain::Matmul;
using reftrain::MatmulKind;

// GFLOP/s of `threads` threads running bench/fma_peak.h's independent FMA chains at once, the
// best of three runs of about 20 ms each.
double fma_gflops(int threads) {
  constexpr int64_t kIters = int64_t(1) << 22;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    float sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += reftrain::bench::fma_chains(kIters, float(omp_get_thread_num()));
    const std::chrono::duration<double> s = std::chrono::steady_clock::now() - t0;
    benchmark::DoNotOptimize(sink);
    best = std::max(best, reftrain::bench::fma_chain_flops(kIters) * threads / s.count() / 1e9);
  }
  return best;
}

std::map<int, double> g_peak;  // GFLOP/s of the FMA loop at each thread count, measured in main

void set_counters(benchmark::State& s, double flops, int threads) {
  const double gflop = flops * double(s.iterations()) / 1e9;
  s.counters["GFLOP/s"] = benchmark::Counter(gflop, benchmark::Counter::kIsRate);
  s.counters["pct_peak"] =
      benchmark::Counter(gflop * 100.0 / g_peak.at(threads), benchmark::Counter::kIsRate);
}

void BM_fma_peak(benchmark::State& s, int threads) {
  double best = 0;
  for (auto _ : s) best = std::max(best, fma_gflops(threads));
  s.counters["GFLOP/s"] = best;
  s.counters["GFLOP/s_per_core"] = best / threads;
}

enum class Product { kFwd, kBwdData, kBwdWeight };
const char* product_name(Product p) {
  return p == Product::kFwd ? "fwd" : p == Product::kBwdData ? "bwd_data" : "bwd_weight";
}

// A linear layer's buffers: X [M,K], W [O,K], b [O], Y, dY [M,O]; products named by M, K→O.
struct Layer {
  int M, K, O;
  std::vector<float> x, w, b, y, dy, dx, dw;
  Layer(int m, int k, int o)
      : M(m),
        K(k),
        O(o),
        x(size_t(m) * k),
        w(size_t(o) * k),
        b(size_t(o)),
        y(size_t(m) * o),
        dy(size_t(m) * o),
        dx(size_t(m) * k),
        dw(size_t(o) * k) {
    auto fill = [](std::vector<float>& v, float scale) {
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = scale * float(int(i * 2654435761u % 2001) - 1000);
    };
    fill(x, 1e-3f), fill(w, 2e-5f), fill(b, 1e-4f), fill(dy, 1e-6f);
  }
  double flops() const { return 2.0 * M * K * O; }
};

void run_ours(const Matmul& mm, Layer& l, Product p) {
  switch (p) {
    case Product::kFwd:
      return reftrain::linear_forward(mm, l.y.data(), l.x.data(), l.w.data(), l.b.data(), l.M, l.K,
                                      l.O);
    case Product::kBwdData:  // dX += dY·W
      return mm.run(reftrain::Gemm<float, float>{
          l.M, l.K, l.O, l.dy.data(), reftrain::Trans::kNo, size_t(l.O), l.w.data(),
          reftrain::Trans::kNo, size_t(l.K), l.dx.data(), size_t(l.K), true, nullptr});
    case Product::kBwdWeight:  // dW += dYᵀ·X
      return mm.run(reftrain::Gemm<float, float>{
          l.O, l.K, l.M, l.dy.data(), reftrain::Trans::kYes, size_t(l.O), l.x.data(),
          reftrain::Trans::kNo, size_t(l.K), l.dw.data(), size_t(l.K), true, nullptr});
  }
}

void run_openblas(Layer& l, Product p) {
  switch (p) {
    case Product::kFwd:
      return cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, l.M, l.O, l.K, 1.0f, l.x.data(),
                         l.K, l.w.data(), l.K, 0.0f, l.y.data(), l.O);
    case Product::kBwdData:
      return cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, l.M, l.K, l.O, 1.0f,
                         l.dy.data(), l.O, l.w.data(), l.K, 1.0f, l.dx.data(), l.K);
    case Product::kBwdWeight:
      return cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, l.O, l.K, l.M, 1.0f, l.dy.data(),
                         l.O, l.x.data(), l.K, 1.0f, l.dw.data(), l.K);
  }
}

void BM_variant(benchmark::State& s, MatmulKind kind, Product p, int M, int K, int O, int threads) {
  Layer l(M, K, O);
  omp_set_num_threads(threads);
  const Matmul mm(kind, threads);
  for (auto _ : s) {
    run_ours(mm, l, p);
    benchmark::ClobberMemory();
  }
  set_counters(s, l.flops(), threads);
}

void BM_openblas(benchmark::State& s, Product p, int M, int K, int O, int threads) {
  Layer l(M, K, O);
  openblas_set_num_threads(threads);
  for (auto _ : s) {
    run_openblas(l, p);
    benchmark::ClobberMemory();
  }
  set_counters(s, l.flops(), threads);
}

struct Shape {
  const char* name;
  int M, K, O;
};

// The training products: baby's and gpt2-124m's linear layers (M = B·T rows, K in, O out). baby's
// lm_head has the default tokenizer's 4096 tokens (it had the byte tokenizer's 256 until
// 2026-12-05; bench/RESULTS.md's earlier baby_lmhead rows are that shape).
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> v = {
      {"cube256", 256, 256, 256},       {"cube512", 512, 512, 512},
      {"cube1024", 1024, 1024, 1024},   {"cube2048", 2048, 2048, 2048},
      {"baby_qkv", 2048, 384, 1152},    {"baby_attproj", 2048, 384, 384},
      {"baby_fc", 2048, 384, 1536},     {"baby_fcproj", 2048, 1536, 384},
      {"baby_lmhead", 2048, 384, 4096}, {"gpt2_qkv", 256, 768, 2304},
      {"gpt2_attproj", 256, 768, 768},  {"gpt2_fc", 256, 768, 3072},
      {"gpt2_fcproj", 256, 3072, 768},  {"gpt2_lmhead", 256, 768, 50304},
  };
  return v;
}

void register_all(const std::vector<int>& counts) {
  const MatmulKind kinds[] = {MatmulKind::kNaive, MatmulKind::kTiled, MatmulKind::kBlocked,
                              MatmulKind::kEigen};
  for (int t : counts) {
    benchmark::RegisterBenchmark(("fma_peak/threads:" + std::to_string(t)).c_str(), BM_fma_peak, t)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
  for (const Shape& sh : shapes()) {
    for (Product p : {Product::kFwd, Product::kBwdData, Product::kBwdWeight}) {
      for (int t : counts) {
        const std::string tail = std::string("/") + product_name(p) + "/" + sh.name + "/M" +
                                 std::to_string(sh.M) + "_K" + std::to_string(sh.K) + "_O" +
                                 std::to_string(sh.O) + "/threads:" + std::to_string(t);
        for (MatmulKind k : kinds) {
          const bool small = 2.0 * sh.M * sh.K * sh.O <= 2.5e9;
          if (k == MatmulKind::kNaive && !small) continue;
          auto* b =
              benchmark::RegisterBenchmark((std::string(reftrain::enum_name(k)) + tail).c_str(),
                                           BM_variant, k, p, sh.M, sh.K, sh.O, t);
          b->Unit(benchmark::kMillisecond)->UseRealTime();
          if (k == MatmulKind::kNaive) b->Iterations(1);
        }
        benchmark::RegisterBenchmark(("openblas" + tail).c_str(), BM_openblas, p, sh.M, sh.K, sh.O,
                                     t)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
}

// The thread counts to run: --threads=1,2 (taken out of argv before Google Benchmark sees it),
// else omp_get_max_threads() alone (OMP_NUM_THREADS, or every core).
std::vector<int> thread_counts(int* argc, char** argv) {
  std::vector<int> counts;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--threads=", 0) != 0) continue;
    for (size_t at = 10; at < arg.size();) {
      const size_t comma = std::min(arg.find(',', at), arg.size());
      counts.push_back(std::max(1, std::atoi(arg.substr(at, comma - at).c_str())));
      at = comma + 1;
    }
    std::copy(argv + i + 1, argv + *argc, argv + i);
    --*argc;
    break;
  }
  if (counts.empty()) counts.push_back(omp_get_max_threads());
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<int> counts = thread_counts(&argc, argv);
  benchmark::Initialize(&argc, argv);
  std::string peaks;
  for (int t : counts) {
    g_peak[t] = fma_gflops(t);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%d threads %.1f", peaks.empty() ? "" : ", ", t, g_peak[t]);
    peaks += buf;
  }
  benchmark::AddCustomContext("fma_peak_gflops", peaks + " (" + reftrain::simd::arch_name() + ")");
  register_all(counts);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
