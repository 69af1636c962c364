// The optimizer's memory-bound kernels on a 100M-element mega-buffer (w, g, m, v fp32, plus the
// fp16 mirror w16 or the bf16 mirror wb16), against a STREAM-like triad over arrays of the same
// length (the peer: what this machine's memory moves). Compare each kernel's GB/s to the triad's as
// a ratio within one run; bench/RESULTS.md.
//
// Bytes counted per element (what the kernel must read and write, not what the cache moves):
//   triad                  a = b + s·c          12 B  (read b, c; write a)
//   adamw_update           w, g, m, v r+w        32 B
//   adamw_update_f16       + write w16           34 B
//   adamw_update + cast    32 B, then read w and write w16 in a second pass: 32 + 6 = 38 B
//   (the bf16 mirror's two variants move the same bytes: 34 B fused, 38 B with the cast pass;
//   bf16-pure's stochastically rounded update 34 B too; bf16-kahan's update reads and writes its
//   bf16 compensation as well: 38 B)
//   reduce_norm_sq         read g                 4 B
// Write-allocate: a store to a line not in cache first reads it (read-for-ownership), so the
// triad's real traffic is 16 B per element, 4/3 of what STREAM's convention (used here) counts.
// AdamW writes only lines it has just read, so its 32 B are its real traffic; w16 in the f16
// variant and the cast pass is write-only, so those 2 B cost 4 B. A purely bandwidth-bound
// adamw_update can therefore show up to 4/3 of the triad's counted GB/s.
//
// Run: OMP_NUM_THREADS=1 ./bench_optimizer, then OMP_NUM_THREADS=2. Each iteration moves
// 1.2–3.8 GB, so five iterations per benchmark keep the whole run near a minute.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <memory>

#include "core/model/model.h"
#include "core/train/config.h"
#include "ops/bf16.h"
#include "ops/cast.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"

namespace {

using reftrain::bf16;
using reftrain::f16;

constexpr size_t kN = 100'000'000;
constexpr int kIters = 5;

// Allocated once for all benchmarks and first touched in parallel (the threads that will use
// each page).
struct Buffers {
  std::unique_ptr<float[]> w, g, m, v, a, b, c;
  std::unique_ptr<f16[]> w16;
  std::unique_ptr<bf16[]> wb16, comp;
  Buffers()
      : w(new float[kN]),
        g(new float[kN]),
        m(new float[kN]),
        v(new float[kN]),
        a(new float[kN]),
        b(new float[kN]),
        c(new float[kN]),
        w16(new f16[kN]),
        wb16(new bf16[kN]),
        comp(new bf16[kN]) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < kN; ++i) {
      const float x = float(i % 1000) * 1e-3f;  // [0, 1)
      w[i] = x - 0.5f;
      g[i] = (x - 0.5f) * 1e-2f;
      m[i] = (0.5f - x) * 1e-3f;
      v[i] = x * 1e-5f;
      a[i] = 0.0f;
      b[i] = x;
      c[i] = 1.0f - x;
      w16[i] = f16(0.0f);
      wb16[i] = comp[i] = bf16{0};
    }
  }
  // Every update zeroes g, so from the second iteration on the kernels see g = 0. Their speed
  // does not depend on the values (no data-dependent branches; m and v decay by β per step,
  // nowhere near subnormal within these few steps), so g is not refilled (a pass per iteration).
};

Buffers& buffers() {
  static Buffers bufs;
  return bufs;
}

constexpr reftrain::GradStats kStats{0.5f, 1.0f};
constexpr reftrain::AdamWHyper kHp{3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f};

void set_rate(benchmark::State& s, double bytes_per_element) {
  s.counters["GB/s"] = benchmark::Counter(
      bytes_per_element * double(kN) * double(s.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void BM_triad(benchmark::State& s) {
  Buffers& x = buffers();
  float* a = x.a.get();
  const float* b = x.b.get();
  const float* c = x.c.get();
  const float scalar = 3.0f;
  for (auto _ : s) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < kN; ++i) a[i] = b[i] + scalar * c[i];
    benchmark::ClobberMemory();
  }
  set_rate(s, 12);
}

void BM_adamw_update_fast(benchmark::State& s) {
  Buffers& x = buffers();
  int t = 1;
  for (auto _ : s) {
    reftrain::adamw_update_fast(x.w.get(), x.g.get(), x.m.get(), x.v.get(), kN, kStats, kHp, t++);
    benchmark::ClobberMemory();
  }
  set_rate(s, 32);
}

void BM_adamw_update(benchmark::State& s) {
  Buffers& x = buffers();
  int t = 1;
  for (auto _ : s) {
    reftrain::adamw_update(x.w.get(), x.g.get(), x.m.get(), x.v.get(), kN, kStats, kHp, t++);
    benchmark::ClobberMemory();
  }
  set_rate(s, 32);
}

void BM_adamw_update_f16_fast(benchmark::State& s) {
  Buffers& x = buffers();
  int t = 1;
  for (auto _ : s) {
    reftrain::adamw_update_f16_fast(x.w.get(), x.g.get(), x.m.get(), x.v.get(), x.w16.get(), kN,
                                    kStats, kHp, t++);
    benchmark::ClobberMemory();
  }
  set_rate(s, 34);
}

void BM_adamw_update_fast_then_cast(benchmark::State& s) {
  Buffers& x = buffers();
  int t = 1;
  for (auto _ : s) {
    reftrain::adamw_update_fast(x.w.get(), x.g.get(), x.m.get(), x.v.get(), kN, kStats, kHp, t++);
    reftrain::cast_f32_to_f16_fast(x.w16.get(), x.w.get(), kN);
    benchmark::ClobberMemory();
  }
  set_rate(s, 38);
}

void BM_adamw_update_bf16_fast(benchmark::State& s) {
  Buffers& x = buffers();
  int t = 1;
  for (auto _ : s) {
    reftrain::adamw_update_bf16_fast(x.w.get(), x.g.get(), x.m.get(), x.v.get(), x.wb16.get(), kN,
                                     kStats, kHp, t++);
    benchmark::ClobberMemory();
  }
  set_rate(s, 34);
}

// bf16-pure's update: the same bytes as the bf16 mirror's, plus the noise hash (two integer
// multiplies and shifts per element) and the stochastic rounding.
void BM_adamw_update_bf16_sr_fast(benchmark::State& s) {
  Buffers& x = buffers();
  int t = 1;
  for (auto _ : s) {
    reftrain::adamw_update_bf16_sr_fast(x.w.get(), x.g.get(), x.m.get(), x.v.get(), x.wb16.get(),
                                        kN, kStats, kHp, t++, 1234, 0);
    benchmark::ClobberMemory();
  }
  set_rate(s, 34);
}

// bf16-kahan's update: the bf16 mirror's bytes plus the compensation, read and written.
void BM_adamw_update_bf16_kahan_fast(benchmark::State& s) {
  Buffers& x = buffers();
  int t = 1;
  for (auto _ : s) {
    reftrain::adamw_update_bf16_kahan_fast(x.w.get(), x.g.get(), x.m.get(), x.v.get(), x.wb16.get(),
                                           x.comp.get(), kN, kStats, kHp, t++);
    benchmark::ClobberMemory();
  }
  set_rate(s, 38);
}

// What --precision bf16 ran before the AdamW kernel wrote the bf16 mirror itself.
void BM_adamw_update_fast_then_bf16(benchmark::State& s) {
  Buffers& x = buffers();
  int t = 1;
  for (auto _ : s) {
    reftrain::adamw_update_fast(x.w.get(), x.g.get(), x.m.get(), x.v.get(), kN, kStats, kHp, t++);
    reftrain::cast_f32_to_bf16_fast(x.wb16.get(), x.w.get(), kN);
    benchmark::ClobberMemory();
  }
  set_rate(s, 38);
}

void BM_reduce_norm_sq_fast(benchmark::State& s) {
  Buffers& x = buffers();
  for (auto _ : s) benchmark::DoNotOptimize(reftrain::reduce_norm_sq_fast(x.g.get(), kN));
  set_rate(s, 4);
}

void BM_reduce_norm_sq(benchmark::State& s) {
  Buffers& x = buffers();
  for (auto _ : s) benchmark::DoNotOptimize(reftrain::reduce_norm_sq(x.g.get(), kN));
  set_rate(s, 4);
}

// A whole optimizer step of gpt2-124m (reduce_norm_sq, finalize_grad_stats, the wd and no-wd
// dispatches) as the trainer runs it, on the real mega-buffer (124.5M parameters, 124.6M slots
// with alignment padding). Bytes counted per slot: 4 (norm) + 32 (adamw) or, for adamw8bit,
// 4 + 8 (w) + 8 (g) + 2 (m, v codes) + 2 (m, v codes written) = 24, scales aside.
void optimizer_step_bench(benchmark::State& s, reftrain::Optimizer kind, double bytes) {
  const reftrain::ModelConfig cfg = reftrain::find_preset("gpt2-124m").model;
  auto model = reftrain::make_model(cfg, reftrain::ModelOptions{});
  reftrain::OptimizerState opt(kind, model->layout().wd_end(), model->layout().total());
  reftrain::TrainConfig train = reftrain::find_preset("gpt2-124m").train;
  train.clip = 1.0f;
  int t = 1;
  for (auto _ : s) {
    const reftrain::AdamWHyper hp{1e-4f, train.beta1, train.beta2, train.eps, train.wd};
    opt.step(model->weights(), model->grads(), model->weight_mirror(), hp, train.clip, t++);
    benchmark::ClobberMemory();
  }
  s.counters["GB/s"] =
      benchmark::Counter(bytes * double(model->layout().total()) * double(s.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}
void BM_gpt2_124m_step_adamw(benchmark::State& s) {
  optimizer_step_bench(s, reftrain::Optimizer::kAdamW, 36);
}
void BM_gpt2_124m_step_adamw8bit(benchmark::State& s) {
  optimizer_step_bench(s, reftrain::Optimizer::kAdamW8bit, 24);
}

// Wall time: the kernels run on an OpenMP team, so the main thread's CPU time is not the cost.
#define REFTRAIN_BENCH(fn) \
  BENCHMARK(fn)->Iterations(kIters)->UseRealTime()->Unit(benchmark::kMillisecond)
REFTRAIN_BENCH(BM_triad);
REFTRAIN_BENCH(BM_adamw_update_fast);
REFTRAIN_BENCH(BM_adamw_update_f16_fast);
REFTRAIN_BENCH(BM_adamw_update_fast_then_cast);
REFTRAIN_BENCH(BM_adamw_update_bf16_fast);
REFTRAIN_BENCH(BM_adamw_update_bf16_sr_fast);
REFTRAIN_BENCH(BM_adamw_update_bf16_kahan_fast);
REFTRAIN_BENCH(BM_adamw_update_fast_then_bf16);
REFTRAIN_BENCH(BM_reduce_norm_sq_fast);
REFTRAIN_BENCH(BM_adamw_update);
REFTRAIN_BENCH(BM_reduce_norm_sq);
REFTRAIN_BENCH(BM_gpt2_124m_step_adamw);
REFTRAIN_BENCH(BM_gpt2_124m_step_adamw8bit);

}  // namespace

BENCHMARK_MAIN();
