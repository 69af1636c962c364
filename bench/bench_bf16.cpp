// The bf16 matmul family (ops/matmul_bf16.h) against reftrain's fp32 blocked matmul on the three
// products of a linear layer at training shapes: per shape and thread count, the milliseconds of
// one layer's forward + backward-data + backward-weight (bf16: including the rounding of the
// input and of the output gradient to bf16, which a bf16 step pays; the weight mirror comes from
// the optimizer), the median of 7 runs after 2 warm-ups. Paths: fp32 blocked, bf16 best (amx,
// dpbf16 or emulated, whichever the CPU has), bf16 emulated. bench/torch_bf16.py times PyTorch's
// autocast on the same shapes.
//
//   ./build/bench/bench_bf16 1 16        (thread counts)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "ops/bf16.h"
#include "ops/linear.h"
#include "ops/matmul_bf16.h"

namespace {

using namespace reftrain;

struct Shape {
  const char* name;
  int N, K, O;  // rows, in features, out features
};

double median_ms(const std::function<void()>& f) {
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[3];
}

void run_shape(const Shape& s, int threads) {
  omp_set_num_threads(threads);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  auto randv = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
  };
  const size_t nk = size_t(s.N) * s.K, no = size_t(s.N) * s.O, ok = size_t(s.O) * s.K;
  std::vector<float> inp = randv(nk), w = randv(ok), b = randv(s.O), dout = randv(no);
  std::vector<float> out(no), dinp(nk), dw(ok), db(s.O);
  Matmul mm(MatmulKind::kBlocked, threads);
  const double fp32 = median_ms([&] {
    linear_forward<float, float>(mm, out.data(), inp.data(), w.data(), b.data(), s.N, s.K, s.O);
    linear_backward_data<float, float>(mm, dinp.data(), dout.data(), w.data(), s.N, s.K, s.O);
    linear_backward_weight<float>(mm, dw.data(), dout.data(), inp.data(), s.N, s.K, s.O);
  });
  std::vector<bf16> inp16(nk), w16(ok), dout16(no);
  cast_f32_to_bf16_fast(w16.data(), w.data(), ok);
  auto bf16_layer = [&](MatmulBf16& m) {
    return median_ms([&] {
      cast_f32_to_bf16_fast(inp16.data(), inp.data(), nk);
      m.run({s.N, s.O, s.K, inp16.data(), Trans::kNo, size_t(s.K), w16.data(), Trans::kYes,
             size_t(s.K), out.data(), size_t(s.O), false, b.data()});
      cast_f32_to_bf16_fast(dout16.data(), dout.data(), no);
      m.run({s.N, s.K, s.O, dout16.data(), Trans::kNo, size_t(s.O), w16.data(), Trans::kNo,
             size_t(s.K), dinp.data(), size_t(s.K), true, nullptr});
      m.run({s.O, s.K, s.N, dout16.data(), Trans::kYes, size_t(s.O), inp16.data(), Trans::kNo,
             size_t(s.K), dw.data(), size_t(s.K), true, nullptr});
    });
  };
  MatmulBf16 best(bf16_best_path(), threads), emu(Bf16Path::kEmulated, threads);
  const double tb = bf16_layer(best), te = bf16_layer(emu);
  const double gflop = 3 * 2.0 * s.N * s.K * s.O / 1e9;
  std::printf(
      "%-14s threads %2d  fp32 %8.2f ms (%6.0f GFLOP/s)  bf16 %s %8.2f ms (%6.0f)  "
      "emulated %8.2f ms (%6.0f)  best/fp32 %.2fx\n",
      s.name, threads, fp32, gflop / fp32 * 1e3, bf16_path_name(best.path()), tb, gflop / tb * 1e3,
      te, gflop / te * 1e3, fp32 / tb);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads;
  for (int i = 1; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads.push_back(omp_get_max_threads());
  const Shape shapes[] = {{"baby_qkv", 2048, 384, 1152},    {"baby_fc", 2048, 384, 1536},
                          {"baby_fcproj", 2048, 1536, 384}, {"gpt2_qkv", 4096, 768, 2304},
                          {"gpt2_fc", 4096, 768, 3072},     {"gpt2_fcproj", 4096, 3072, 768}};
  for (int t : threads) {
    for (const Shape& s : shapes) run_shape(s, t);
  }
  return 0;
}
