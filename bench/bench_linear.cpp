// The linear layer's three products at the shapes of the `laptop` and `baby` presets, reftrain's
// scalar-reference loop order against Eigen's product on the same buffers (the peer). Compare
// as ratios within one run: bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <vector>

#include "ops/linear.h"

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Shapes {
  int N, K, O;
  std::vector<float> inp, w, b, out, w_t, dout, dinp, dw, db;
  explicit Shapes(const benchmark::State& s)
      : N(int(s.range(0))),
        K(int(s.range(1))),
        O(int(s.range(2))),
        inp(size_t(N) * K, 0.5f),
        w(size_t(O) * K, 0.25f),
        b(O, 0.1f),
        out(size_t(N) * O),
        w_t(size_t(K) * O),
        dout(size_t(N) * O, 0.01f),
        dinp(size_t(N) * K),
        dw(size_t(O) * K),
        db(O) {}
  double flops() const { return 2.0 * N * K * O; }
};

void set_rate(benchmark::State& s, double flops_per_iter) {
  s.counters["GFLOP/s"] = benchmark::Counter(flops_per_iter * double(s.iterations()) / 1e9,
                                             benchmark::Counter::kIsRate);
}

void BM_forward_reftrain(benchmark::State& s) {
  Shapes x(s);
  for (auto _ : s) {
    reftrain::linear_forward(x.out.data(), x.inp.data(), x.w.data(), x.b.data(), x.w_t.data(), x.N,
                             x.K, x.O);
    benchmark::ClobberMemory();
  }
  set_rate(s, x.flops());
}

void BM_forward_eigen(benchmark::State& s) {
  Shapes x(s);
  Eigen::Map<const RowMat> inp(x.inp.data(), x.N, x.K), w(x.w.data(), x.O, x.K);
  Eigen::Map<const Eigen::RowVectorXf> b(x.b.data(), x.O);
  Eigen::Map<RowMat> out(x.out.data(), x.N, x.O);
  for (auto _ : s) {
    out.noalias() = inp * w.transpose();
    out.rowwise() += b;
    benchmark::ClobberMemory();
  }
  set_rate(s, x.flops());
}

void BM_backward_reftrain(benchmark::State& s) {
  Shapes x(s);
  for (auto _ : s) {
    reftrain::linear_backward(x.dinp.data(), x.dw.data(), x.db.data(), x.dout.data(), x.inp.data(),
                              x.w.data(), x.N, x.K, x.O);
    benchmark::ClobberMemory();
  }
  set_rate(s, 2 * x.flops());
}

void BM_backward_eigen(benchmark::State& s) {
  Shapes x(s);
  Eigen::Map<const RowMat> inp(x.inp.data(), x.N, x.K), w(x.w.data(), x.O, x.K),
      dout(x.dout.data(), x.N, x.O);
  Eigen::Map<RowMat> dinp(x.dinp.data(), x.N, x.K), dw(x.dw.data(), x.O, x.K);
  Eigen::Map<Eigen::RowVectorXf> db(x.db.data(), x.O);
  for (auto _ : s) {
    dinp.noalias() += dout * w;
    dw.noalias() += dout.transpose() * inp;
    db += dout.colwise().sum();
    benchmark::ClobberMemory();
  }
  set_rate(s, 2 * x.flops());
}

// {N = B·T, K = in, O = out}: laptop's qkv and fc, baby's fc (one 64-row slice of its batch).
#define SHAPES Args({768, 128, 384})->Args({768, 128, 512})->Args({1024, 384, 1536})
BENCHMARK(BM_forward_reftrain)->SHAPES->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_forward_eigen)->SHAPES->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_backward_reftrain)->SHAPES->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_backward_eigen)->SHAPES->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
