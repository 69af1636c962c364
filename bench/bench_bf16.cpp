// The bf16 matmul family (ops/matmul_bf16.h) against reftrain's fp32 blocked matmul on the three
// products of a linear layer at training shapes: per shape and thread count, the milliseconds of
// one layer's forward + backward-data + backward-weight (bf16: including the rounding of the
// input and of the output gradient to bf16, which a bf16 step pays; the weight mirror comes from
// the optimizer), the median of 7 runs after 2 warm-ups. Paths: fp32 blocked, bf16 best (amx,
// dpbf16 or emulated, whichever the CPU has), bf16 emulated. bench/torch_bf16.py times PyTorch's
// autocast on the same shapes. Each shape also prints the best path's three products alone. On
// an AVX512_BF16 build it first prints the two instruction rates bf16_best_path compares. Last,
// the forward product of 1 to 8 rows against baby's weights (decoding's product) on the best
// path, twice: packing the weight at every call, and with keep_weights on (decoding's engine).
// Rows up to kRowsPathMax take MatmulBf16's path for few rows (on every path where the weight is
// kept, on the emulated one always), the others the general path, whose time hardly grows with M
// below a tile's height, so the two sides of the limit compare the paths.
//
//   ./build/bench/bench_bf16 1 16        (thread counts)
//   ./build/bench/bench_bf16 rows 1 16   (the few-rows products alone)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "ops/bf16.h"
#include "ops/linear.h"
#include "ops/matmul_bf16.h"
#include "simd/dot_bf16.h"

namespace {

using namespace reftrain;

struct Shape {
  const char* name;
  int N, K, O;  // rows, in features, out features
};

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

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

#if defined(__AVX512BF16__)
// The fastest order VDPBF16PS offers, which no other ISA reproduces: natural pairs (k, k+1) in
// each word and one accumulator per output over the whole of K, so no even/odd chains and no
// per-block adds, and a taller register tile (12×2 accumulators instead of 4×2 plus 16 chains).
// Only here, to measure what the canonical order costs on this instruction; C is a padded copy
// (rows to 12, columns to 32), packed and computed with the same threads and unit walk as
// MatmulBf16's pair path.
namespace natural {

constexpr int MR = 12, NR = 32;

// Words (x(idx, 2p), x(idx, 2p + 1)) for p < kp, idx < width (zeros from n on), stored at
// w[p·width + idx]; element (idx, k) of x at x[k·sk + idx·si], K even. The two layouts a linear
// layer has: k contiguous (a word is one 32-bit load) or idx contiguous (two rows interleaved).
void pack_pairs(uint32_t* w, int width, const bf16* x, size_t sk, size_t si, int n, int kp) {
  for (int p = 0; p < kp; ++p) {
    uint32_t* out = w + size_t(p) * width;
    const bf16 *even = x + size_t(2 * p) * sk, *odd = even + sk;
    if (sk == 1) {
      for (int idx = 0; idx < n; ++idx) std::memcpy(out + idx, even + idx * si, 4);
    } else {
      for (int idx = 0; idx < n; ++idx) out[idx] = even[idx].bits | uint32_t(odd[idx].bits) << 16;
    }
    std::fill(out + n, out + width, 0u);
  }
}

// c: MR rows of NR floats (row stride ldc) += the product over kp pairs of k; a: per pair, MR
// words; b: per pair, NR words.
inline void tile(float* c, size_t ldc, const uint32_t* a, const uint32_t* b, int kp) {
  __m512 acc[MR][2];
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < 2; ++v) acc[i][v] = _mm512_loadu_ps(c + i * ldc + v * 16);
  }
  for (int p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b + p * NR);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + p * NR + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(a[p * MR + i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], b0, av);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], b1, av);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < 2; ++v) _mm512_storeu_ps(c + i * ldc + v * 16, acc[i][v]);
  }
}

// C (padded, mp × np, row stride np) = init + op(A)·op(B), init C itself (g.accumulate) or 0.
void run(const GemmBf16& g, float* C, int threads, AlignedBuffer<uint32_t>& pa,
         AlignedBuffer<uint32_t>& pb) {
  const int kp = g.K / 2, mp = simd::round_up(g.M, MR), np = simd::round_up(g.N, NR);
  const int groups = mp / MR, panels = np / NR, chunks = (groups + 9) / 10;
  if (pa.size() < size_t(mp) * kp) pa = AlignedBuffer<uint32_t>(size_t(mp) * kp);
  if (pb.size() < size_t(np) * kp) pb = AlignedBuffer<uint32_t>(size_t(np) * kp);
  const bool a_rows = g.ta == Trans::kNo, b_rows = g.tb == Trans::kYes;  // k contiguous
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static) nowait
    for (int q = 0; q < groups; ++q) {
      const int i0 = q * MR;
      pack_pairs(pa.data() + size_t(q) * kp * MR, MR,
                 g.a + (a_rows ? size_t(i0) * g.lda : size_t(i0)), a_rows ? 1 : g.lda,
                 a_rows ? g.lda : 1, std::min(MR, g.M - i0), kp);
    }
#pragma omp for schedule(static)
    for (int q = 0; q < panels; ++q) {
      const int j0 = q * NR;
      pack_pairs(pb.data() + size_t(q) * kp * NR, NR,
                 g.b + (b_rows ? size_t(j0) * g.ldb : size_t(j0)), b_rows ? 1 : g.ldb,
                 b_rows ? g.ldb : 1, std::min(NR, g.N - j0), kp);
    }
#pragma omp for schedule(static)
    for (int u = 0; u < chunks * panels; ++u) {
      const int chunk = u / panels, q = u % panels;
      for (int grp = chunk * 10; grp < std::min(groups, chunk * 10 + 10); ++grp) {
        float* c = C + size_t(grp) * MR * np + size_t(q) * NR;
        if (!g.accumulate) {
          for (int i = 0; i < MR; ++i) std::fill(c + size_t(i) * np, c + size_t(i) * np + NR, 0.0f);
        }
        tile(c, size_t(np), pa.data() + size_t(grp) * kp * MR, pb.data() + size_t(q) * kp * NR, kp);
      }
    }
  }
}

}  // namespace natural

// The layer's three products on the dpbf16 path (the canonical order) and in the natural order,
// and the largest difference between the two forwards relative to the largest output.
void natural_order(const Shape& s, int threads, const std::vector<GemmBf16>& products) {
  MatmulBf16 dp(Bf16Path::kDpbf16, threads);
  std::vector<float> padded(size_t(simd::round_up(std::max(s.N, s.O), natural::MR)) *
                            simd::round_up(std::max(s.K, s.O), natural::NR));
  AlignedBuffer<uint32_t> pa, pb;
  double canonical = 0, fastest = 0;
  for (const GemmBf16& g : products) {
    canonical += median_ms([&] { dp.run(g); });
    fastest += median_ms([&] { natural::run(g, padded.data(), threads, pa, pb); });
  }
  GemmBf16 g = products[0];
  g.bias = nullptr;
  dp.run(g);
  natural::run(g, padded.data(), threads, pa, pb);
  const int np = simd::round_up(g.N, natural::NR);
  double diff = 0, largest = 0;
  for (int i = 0; i < g.M; ++i) {
    for (int j = 0; j < g.N; ++j) {
      const double c = g.c[size_t(i) * g.ldc + j];
      diff = std::max(diff, std::fabs(c - padded[size_t(i) * np + j]));
      largest = std::max(largest, std::fabs(c));
    }
  }
  std::printf(
      "%-14s threads %2d  dpbf16 canonical %.2f ms, natural order %.2f ms: canonical/natural "
      "%.2fx (fwd max diff %.1e of max |C| %.1f)\n",
      s.name, threads, canonical, fastest, canonical / fastest, diff / largest, largest);
}
#endif

void run_shape(const Shape& s, int threads) {
  omp_set_num_threads(threads);
  std::mt19937 rng(1);
  auto randv = [&](size_t n) { return random_floats(n, rng); };
  const size_t nk = size_t(s.N) * s.K, no = size_t(s.N) * s.O, ok = size_t(s.O) * s.K;
  std::vector<float> inp = randv(nk), w = randv(ok), b = randv(s.O), dout = randv(no);
  std::vector<float> out(no), dinp(nk), dw(ok), db(s.O);
  Matmul mm(MatmulKind::kBlocked, threads);
  const double fp32 = median_ms([&] {
    linear_forward<float, float>(mm, out.data(), inp.data(), w.data(), b.data(), s.N, s.K, s.O);
    linear_backward_data<float, float>(mm, dinp.data(), dout.data(), w.data(), s.N, s.K, s.O, true);
    linear_backward_weight<float>(mm, dw.data(), nullptr, dout.data(), inp.data(), s.N, s.K, s.O);
  });
  std::vector<bf16> inp16(nk), w16(ok), dout16(no);
  cast_f32_to_bf16_fast(w16.data(), w.data(), ok);
  // The layer's three products (no casts), each as it runs inside a bf16 step.
  const GemmBf16 fwd_g{s.N,         s.O,        s.K,         inp16.data(), Trans::kNo,
                       size_t(s.K), w16.data(), Trans::kYes, size_t(s.K),  out.data(),
                       size_t(s.O), false,      b.data()};
  const GemmBf16 data_g{s.N,         s.K,        s.O,        dout16.data(), Trans::kNo,
                        size_t(s.O), w16.data(), Trans::kNo, size_t(s.K),   dinp.data(),
                        size_t(s.K), true,       nullptr};
  const GemmBf16 weight_g{s.O,         s.K,          s.N,        dout16.data(), Trans::kYes,
                          size_t(s.O), inp16.data(), Trans::kNo, size_t(s.K),   dw.data(),
                          size_t(s.K), true,         nullptr};
  auto fwd = [&](MatmulBf16& m) { m.run(fwd_g); };
  auto bwd_data = [&](MatmulBf16& m) { m.run(data_g); };
  auto bwd_weight = [&](MatmulBf16& m) { m.run(weight_g); };
  auto bf16_layer = [&](MatmulBf16& m) {
    return median_ms([&] {
      cast_f32_to_bf16_fast(inp16.data(), inp.data(), nk);
      fwd(m);
      cast_f32_to_bf16_fast(dout16.data(), dout.data(), no);
      bwd_data(m);
      bwd_weight(m);
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
  const double product_gflop = gflop / 3;
  const double tf = median_ms([&] { fwd(best); }), td = median_ms([&] { bwd_data(best); }),
               tw = median_ms([&] { bwd_weight(best); });
  std::printf(
      "%-14s threads %2d  bf16 %s products: fwd %.2f ms (%.0f GFLOP/s)  bwd_data %.2f (%.0f)  "
      "bwd_weight %.2f (%.0f)\n",
      s.name, threads, bf16_path_name(best.path()), tf, product_gflop / tf * 1e3, td,
      product_gflop / td * 1e3, tw, product_gflop / tw * 1e3);
#if defined(__AVX512BF16__)
  if (bf16_path_available(Bf16Path::kDpbf16)) natural_order(s, threads, {fwd_g, data_g, weight_g});
#endif
}

// Microseconds of out = x·wᵀ for M = 1..8 rows of x (the median of 7 runs of 20 calls each),
// packing the weight at every call and, with keep_weights on (decoding's engine), packing it once.
void few_rows(int threads) {
  std::mt19937 rng(2);
  auto randv = [&](size_t n) { return random_floats(n, rng); };
  for (const auto& [N, K] : {std::pair{1152, 384}, {4096, 384}, {384, 1536}}) {
    std::vector<float> x = randv(size_t(8) * K), w = randv(size_t(N) * K), out(size_t(8) * N);
    std::vector<bf16> x16(x.size()), w16(w.size());
    cast_f32_to_bf16_fast(x16.data(), x.data(), x.size());
    cast_f32_to_bf16_fast(w16.data(), w.data(), w.size());
    for (const bool kept : {false, true}) {
      MatmulBf16 mm(bf16_best_path(), threads);
      mm.keep_weights(kept);
      std::printf("rows N%-5d K%-5d threads %2d  %s %s (the few-rows path: M <= %d):", N, K,
                  threads, bf16_path_name(mm.path()), kept ? "kept  " : "packed", kRowsPathMax);
      for (int M = 1; M <= 8; ++M) {
        const GemmBf16 g{M,          N,           K,         x16.data(), Trans::kNo, size_t(K),
                         w16.data(), Trans::kYes, size_t(K), out.data(), size_t(N),  false};
        const double ms = median_ms([&] {
          for (int r = 0; r < 20; ++r) mm.run(g);
        });
        std::printf("  M%d %.0f us", M, ms * 1e3 / 20);
      }
      std::printf("\n");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool rows_only = argc > 1 && std::strcmp(argv[1], "rows") == 0;
  std::vector<int> threads;
  for (int i = rows_only ? 2 : 1; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads.push_back(omp_get_max_threads());
  if (rows_only) {
    for (int t : threads) few_rows(t);
    return 0;
  }
  const Shape shapes[] = {{"baby_qkv", 2048, 384, 1152},    {"baby_fc", 2048, 384, 1536},
                          {"baby_fcproj", 2048, 1536, 384}, {"gpt2_qkv", 4096, 768, 2304},
                          {"gpt2_fc", 4096, 768, 3072},     {"gpt2_fcproj", 4096, 3072, 768}};
#if defined(__AVX512BF16__)
  // What bf16_best_path weighs when there is no AMX: products per second of one core.
  const simd::bf16dot::ProductRates r = simd::bf16dot::product_rates(200000);
  std::printf("one core: VDPBF16PS %.1f G products/s, 512-bit FMA %.1f G products/s: %s\n",
              r.dpbf16 / 1e9, r.fma / 1e9,
              simd::bf16dot::dpbf16_outruns_fma() ? "dpbf16 runs" : "the emulation runs");
#endif
  for (int t : threads) {
    for (const Shape& s : shapes) run_shape(s, t);
  }
  for (int t : threads) few_rows(t);
  return 0;
}
