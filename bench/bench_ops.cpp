// The non-matmul kernels at the training shapes of `baby` (B=8, T=256, C=384, NH=6, Vp=256,
// gelu width 4C = 1536) and `llama-small` (SwiGLU width F=1024): each kernel's fast float path
// (the *_fast functions the models call) beside its scalar reference, the peer, in one run.
// Compare the two as a ratio; bench/RESULTS.md.
//
// Run: OMP_NUM_THREADS=1 ./bench_ops, then OMP_NUM_THREADS=2 (the kernels are OpenMP-parallel).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "optim/kernel_table.h"

namespace {

using namespace reftrain;

constexpr int B = 8, T = 256, C = 384, NH = 6, Vp = 256, kGeluWidth = 4 * C, kSwigluWidth = 1024;
constexpr int N = B * T;
constexpr double kTheta = 10000.0;
constexpr float kZLoss = 1e-4f;

// Deterministic values in [lo, hi): a fixed linear congruential sequence (no <random>
// distributions, so every run and machine benchmarks the same numbers).
std::vector<float> values(size_t n, float lo, float hi, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * float(s >> 8) * 0x1p-24f;
  }
  return v;
}

// Inputs and outputs of every kernel, allocated once.
struct Buffers {
  std::vector<float> x = values(size_t(N) * C, -2, 2, 1), w = values(C, 0.5f, 1.5f, 2),
                     b = values(C, -0.5f, 0.5f, 3), dout = values(size_t(N) * C, -1, 1, 4);
  std::vector<float> out = std::vector<float>(size_t(N) * C), dx = out, dw = w, db = b;
  std::vector<float> mean = std::vector<float>(N), rstd = mean;
  std::vector<float> act_x = values(size_t(N) * kGeluWidth, -4, 4, 5), act_y = act_x,
                     act_g = values(size_t(N) * kGeluWidth, -1, 1, 6), act_out = act_g,
                     act_d = act_g, act_d2 = act_g;
  std::vector<bf16> act_bf16 = std::vector<bf16>(size_t(N) * kGeluWidth);
  std::vector<f16> act_f16 = std::vector<f16>(size_t(N) * kGeluWidth);
  std::vector<float> logits = values(size_t(N) * Vp, -4, 4, 7), dlogits = logits, losses = mean;
  std::vector<int32_t> tokens;
  std::vector<float> wte = values(size_t(Vp) * C, -1, 1, 8), wpe = values(size_t(T) * C, -1, 1, 9),
                     dwte = wte, dwpe = wpe;
  Buffers() {
    for (float r : values(N, 0, float(Vp), 10)) tokens.push_back(int32_t(r));
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  }
};

Buffers& buffers() {
  static Buffers bufs;
  return bufs;
}

// Two benchmarks per kernel, name/ref and name/fast: `call` run with the reference table and
// with the fast one (optim/kernel_table.h), the same slots the models call. `bytes` is what one
// call must read and write.
using Call = void (*)(const KernelTable& k, Buffers& s);
void add(const std::string& name, double bytes, Call call) {
  for (const auto& [variant, table] :
       {std::pair{"ref", reference_kernels()}, std::pair{"fast", fast_kernels()}}) {
    benchmark::RegisterBenchmark(
        (name + "/" + variant).c_str(),
        [bytes, call, table = table](benchmark::State& state) {
          Buffers& buf = buffers();
          for (auto _ : state) {
            call(table, buf);
            benchmark::ClobberMemory();
          }
          state.SetBytesProcessed(int64_t(bytes * double(state.iterations())));
        })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
}

constexpr double kF = sizeof(float);
constexpr double kRow = double(N) * C * kF;  // one [N, C] tensor

void register_norms() {
  add("layernorm_forward", 2 * kRow, [](const KernelTable& k, Buffers& s) {
    k.layernorm_forward(s.out.data(), s.mean.data(), s.rstd.data(), s.x.data(), s.w.data(),
                        s.b.data(), N, C);
  });
  add("layernorm_backward", 4 * kRow, [](const KernelTable& k, Buffers& s) {
    k.layernorm_backward(s.dx.data(), s.dw.data(), s.db.data(), s.dout.data(), s.x.data(),
                         s.w.data(), s.mean.data(), s.rstd.data(), N, C);
  });
  add("rmsnorm_forward", 2 * kRow, [](const KernelTable& k, Buffers& s) {
    k.rmsnorm_forward(s.out.data(), s.rstd.data(), s.x.data(), s.w.data(), N, C);
  });
  add("rmsnorm_backward", 4 * kRow, [](const KernelTable& k, Buffers& s) {
    k.rmsnorm_backward(s.dx.data(), s.dw.data(), s.dout.data(), s.x.data(), s.w.data(),
                       s.rstd.data(), N, C);
  });
}

constexpr size_t kGeluElems = size_t(N) * kGeluWidth, kSwigluElems = size_t(N) * kSwigluWidth;

void register_activations() {
  add("gelu_forward", 2 * kF * kGeluElems, [](const KernelTable& k, Buffers& s) {
    k.gelu_forward(s.act_out.data(), s.act_x.data(), kGeluElems);
  });
  add("gelu_backward", 4 * kF * kGeluElems, [](const KernelTable& k, Buffers& s) {
    k.gelu_backward(s.act_d.data(), s.act_x.data(), s.act_g.data(), kGeluElems, true);
  });
  add("gelu_erf_forward", 2 * kF * kGeluElems, [](const KernelTable& k, Buffers& s) {
    k.gelu_erf_forward(s.act_out.data(), s.act_x.data(), kGeluElems);
  });
  add("gelu_erf_backward", 4 * kF * kGeluElems, [](const KernelTable& k, Buffers& s) {
    k.gelu_erf_backward(s.act_d.data(), s.act_x.data(), s.act_g.data(), kGeluElems, true);
  });
  add("swiglu_forward", 3 * kF * kSwigluElems, [](const KernelTable& k, Buffers& s) {
    k.swiglu_forward(s.act_out.data(), s.act_x.data(), s.act_y.data(), kSwigluElems);
  });
  add("swiglu_backward", 7 * kF * kSwigluElems, [](const KernelTable& k, Buffers& s) {
    k.swiglu_backward(s.act_d.data(), s.act_d2.data(), s.act_g.data(), s.act_x.data(),
                      s.act_y.data(), kSwigluElems, true);
  });
}

constexpr size_t kNC = size_t(N) * C;

void register_rope_residual() {
  add("rope_forward", 2 * kRow, [](const KernelTable& k, Buffers& s) {
    k.rope_forward(s.out.data(), s.x.data(), B, T, NH, C / NH, kTheta, 0);
  });
  add("rope_backward", 3 * kRow, [](const KernelTable& k, Buffers& s) {
    k.rope_backward(s.dx.data(), s.dout.data(), B, T, NH, C / NH, kTheta, 0, true);
  });
  add("residual_forward", 3 * kRow, [](const KernelTable& k, Buffers& s) {
    k.residual_forward(s.out.data(), s.x.data(), s.dout.data(), kNC);
  });
  add("residual_backward", 5 * kRow, [](const KernelTable& k, Buffers& s) {
    k.residual_backward(s.dx.data(), s.out.data(), s.dout.data(), kNC, true);
  });
}

void register_loss_embed() {
  add("crossentropy_fwd_bwd", 2.0 * N * Vp * kF, [](const KernelTable& k, Buffers& s) {
    k.crossentropy_forward_backward(s.losses.data(), s.dlogits.data(), s.logits.data(),
                                    s.tokens.data(), N, Vp, Vp, 1.0f / N, kZLoss);
  });
  add("embed_forward", kRow, [](const KernelTable& k, Buffers& s) {
    k.embed_forward(s.out.data(), s.tokens.data(), s.wte.data(), s.wpe.data(), B, T, C);
  });
  add("embed_backward", kRow, [](const KernelTable& k, Buffers& s) {
    k.embed_backward(s.dwte.data(), s.dwpe.data(), s.dout.data(), s.tokens.data(), B, T, C);
  });
}

// The precision casts of the mixed modes, at the MLP's hidden width (each operand of a product
// is rounded as it enters it: ops/bf16.h, ops/cast.h).
void register_casts() {
  add("cast_f32_to_bf16", (kF + 2) * kGeluElems, [](const KernelTable& k, Buffers& s) {
    k.cast_f32_to_bf16(s.act_bf16.data(), s.act_x.data(), kGeluElems);
  });
  add("cast_f32_to_f16", (kF + 2) * kGeluElems, [](const KernelTable& k, Buffers& s) {
    k.cast_f32_to_f16(s.act_f16.data(), s.act_x.data(), kGeluElems);
  });
}

}  // namespace

int main(int argc, char** argv) {
  register_norms();
  register_activations();
  register_rope_residual();
  register_loss_embed();
  register_casts();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
