// Golden fixtures of the bf16 kernels (issue 29, `--precision bf16`): the f32 → bf16 rounding,
// the linear layer's three products (ops/linear_bf16.h) and the attention (ops/attention_bf16.h).
// The bf16 inputs are random f32 rounded to bf16 (f32_to_bf16), stored as safetensors BF16. The
// outputs come from the reference path (MatmulBf16 on Bf16Path::kReference; the large case's
// products on the best path, bit-identical to it). The float64 oracle computes every product
// exactly in double from the same bf16 values; where the kernel rounds an intermediate to bf16
// (the attention's probabilities and score gradients), the oracle rounds its own double value
// (through f32) the same way, so that the products it feeds read bf16 values too.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/golden/golden_kernels.h"
#include "ops/attention_bf16.h"
#include "ops/bf16.h"
#include "ops/linear_bf16.h"

namespace reftrain {

namespace fixture {

// What a twin must reproduce, in the manifest entry of every bf16 fixture.
Json bf16_numerics(bool products) {
  Json j = {{"bf16",
             "BF16 tensors hold the top 16 bits of an f32; f32 → bf16 rounds to nearest, ties to "
             "even, a result whose exponent field is 0 becomes ±0, any NaN becomes 0x7FC0"}};
  if (!products) return j;
  j["order"] =
      "per output: C = init (the bias, +0, or the value accumulated into), then K in blocks of "
      "32, the last padded with zeros: E = +0, E = fma(a_k, b_k, E) over the block's even k "
      "ascending; O = +0, O = fma(a_k, b_k, O) over its odd k ascending; C = C + (E + O)";
  j["subnormal_band"] =
      "bf16-subnormal inputs read as 0; every fma and add (and init) flushes a result below "
      "2^-126 in magnitude to ±0, deciding tininess after rounding. A twin may differ only where "
      "a product, a chain or a sum falls below 2^-126 (|x| < 1.18e-38): it may flush before "
      "rounding or keep subnormals there";
  return j;
}

}  // namespace fixture

namespace {

using namespace fixture;

// The fixture of a bf16 kernel: its record's, with the bf16 numerics in the manifest.
KernelSpec bf16_kernel(const std::string& name, bool products,
                       Json (*make)(FixtureGen&, const KernelDims&),
                       void (*run_f32)(FixtureIo<float>&, const KernelDims&),
                       void (*run_f64)(FixtureIo<double>&, const KernelDims&)) {
  KernelSpec k = record_kernel(name, Family::kBoth, make, run_f32, run_f64);
  k.numerics = bf16_numerics(products);
  return k;
}

std::vector<bf16> rounded(const std::vector<float>& x) {
  std::vector<bf16> v(x.size());
  cast_f32_to_bf16(v.data(), x.data(), x.size());
  return v;
}

// scale·normal rounded to bf16, added as BF16.
std::vector<bf16> bf16_normal(FixtureGen& g, const std::string& name, std::vector<int64_t> shape,
                              double scale) {
  size_t n = 1;
  for (int64_t s : shape) n *= size_t(s);
  const std::vector<bf16> v = rounded(g.draw_normal(name, n, scale));
  g.add_raw(name, DType::kBF16, std::move(shape), v.data());
  return v;
}

template <typename T>
std::vector<bf16> get_bf16(const FixtureIo<T>& io, const std::string& name) {
  const std::vector<uint16_t> b = io.bf16_bits(name);
  std::vector<bf16> v(b.size());
  for (size_t i = 0; i < b.size(); ++i) v[i] = bf16{b[i]};
  return v;
}

template <typename T>
void put_bf16(FixtureIo<T>& io, const std::string& name, std::vector<int64_t> shape,
              const std::vector<bf16>& v) {
  io.put_raw(name, DType::kBF16, std::move(shape), v.data());
}

// The fixtures' products run the reference path; the large case's the best path, bit-identical
// by ops/matmul_bf16.h's contract (the scalar reference takes minutes at that size).
MatmulBf16 fixture_matmul_bf16(const KernelDims& d) {
  return MatmulBf16(d.name == "large" ? bf16_best_path() : Bf16Path::kReference);
}

// c0 + Σ_k a[k·as]·b[k·bs] in double: every product of two bf16 is exact.
double dot_exact(double c0, const bf16* a, size_t as, const bf16* b, size_t bs, int K) {
  for (int k = 0; k < K; ++k) {
    c0 += double(bf16_to_f32(a[size_t(k) * as])) * double(bf16_to_f32(b[size_t(k) * bs]));
  }
  return c0;
}

// ---- cast_f32_to_bf16 ----------------------------------------------------------------------

// Values each rule must get right: ties to even (1 + 2^-8 → 1, 1 + 3·2^-8 → 1 + 2^-6), the
// carry into the exponent, the smallest normal, an f32 subnormal that rounds up to it and ones
// that flush to ±0, the largest finite f32 (rounds to Inf), infinities, and NaNs with a sign and
// a payload (→ 0x7FC0).
const uint32_t kBf16CastSpecials[] = {0x00000000, 0x80000000, 0x3F800000, 0x3F808000, 0x3F818000,
                                      0x3F7FFFFF, 0x00800000, 0x007FFFFF, 0x00400000, 0x80000001,
                                      0x807F8000, 0x7F7FFFFF, 0xFF7F8000, 0x7F800000, 0xFF800000,
                                      0x7FA00001, 0xFFC00000, 0x7F808000, 0x3EAAAAAB, 0xC0000000};

Json make_cast_f32_to_bf16(FixtureGen& g, const KernelDims& d) {
  // Magnitudes over 2^-140 .. 2^20: the normal range's bottom, the flushed band, and the bulk.
  std::vector<float> x = g.draw_normal("src", size_t(d.n), 1.0);
  const std::vector<float> e = g.draw_uniform("exponent", size_t(d.n), -140.0, 20.0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(x[i], int(std::floor(e[i])));
  std::memcpy(x.data(), kBf16CastSpecials, sizeof kBf16CastSpecials);
  g.add("src", {d.n}, x);
  return {{"n", d.n}, {"rounding", "nearest, ties to even; subnormal results ±0; NaN 0x7FC0"}};
}

void run_cast_f32_to_bf16(FixtureIo<float>& io, const KernelDims& d) {
  put_bf16(io, "dst", {d.n}, rounded(io.get("src")));
}

// ---- the linear products -------------------------------------------------------------------

Json linear_bf16_params(const KernelDims& d) {
  return {{"N", d.N()}, {"K", d.C}, {"O", d.F}};
}

Json make_linear_forward_bf16(FixtureGen& g, const KernelDims& d) {
  bf16_normal(g, "inp16", {d.N(), d.C}, 1.0);
  bf16_normal(g, "w16", {d.F, d.C}, 0.2);
  g.normal("b", {d.F}, 0.1);
  return linear_bf16_params(d);
}

void run_linear_forward_bf16(FixtureIo<float>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  std::vector<float> out(size_t(N) * O);
  MatmulBf16 mm = fixture_matmul_bf16(d);
  linear_forward_bf16(mm, out.data(), get_bf16(io, "inp16").data(), get_bf16(io, "w16").data(),
                      io.get("b").data(), N, K, O);
  io.put("out", {N, O}, out);
}

void run_linear_forward_bf16_f64(FixtureIo<double>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  const std::vector<bf16> inp = get_bf16(io, "inp16"), w = get_bf16(io, "w16");
  const std::vector<double> b = io.get("b");
  std::vector<double> out(size_t(N) * O);
#pragma omp parallel for schedule(static)
  for (int r = 0; r < N; ++r) {
    for (int o = 0; o < O; ++o) {
      out[size_t(r) * O + o] = dot_exact(b[o], &inp[size_t(r) * K], 1, &w[size_t(o) * K], 1, K);
    }
  }
  io.put("out", {N, O}, out);
}

Json make_linear_backward_data_bf16(FixtureGen& g, const KernelDims& d) {
  g.normal("dinp_in", {d.N(), d.C}, 0.1);
  bf16_normal(g, "dout16", {d.N(), d.F}, 1.0);
  bf16_normal(g, "w16", {d.F, d.C}, 0.2);
  return linear_bf16_params(d);
}

void run_linear_backward_data_bf16(FixtureIo<float>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  std::vector<float> dinp = io.get("dinp_in");
  MatmulBf16 mm = fixture_matmul_bf16(d);
  linear_backward_data_bf16(mm, dinp.data(), get_bf16(io, "dout16").data(),
                            get_bf16(io, "w16").data(), N, K, O, true);
  io.put("dinp", {N, K}, dinp);
}

void run_linear_backward_data_bf16_f64(FixtureIo<double>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  const std::vector<bf16> dout = get_bf16(io, "dout16"), w = get_bf16(io, "w16");
  std::vector<double> dinp = io.get("dinp_in");
#pragma omp parallel for schedule(static)
  for (int r = 0; r < N; ++r) {
    for (int k = 0; k < K; ++k) {
      double& x = dinp[size_t(r) * K + k];
      x = dot_exact(x, &dout[size_t(r) * O], 1, &w[k], size_t(K), O);
    }
  }
  io.put("dinp", {N, K}, dinp);
}

Json make_linear_backward_weight_bf16(FixtureGen& g, const KernelDims& d) {
  g.normal("dw_in", {d.F, d.C}, 0.1);
  g.normal("db_in", {d.F}, 0.1);
  // dout16 is dout rounded, as the model makes it.
  const std::vector<float> dout = g.normal("dout", {d.N(), d.F}, 1.0);
  const std::vector<bf16> dout16 = rounded(dout);
  g.add_raw("dout16", DType::kBF16, {d.N(), d.F}, dout16.data());
  bf16_normal(g, "inp16", {d.N(), d.C}, 1.0);
  return linear_bf16_params(d);
}

void run_linear_backward_weight_bf16(FixtureIo<float>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  std::vector<float> dw = io.get("dw_in"), db = io.get("db_in");
  MatmulBf16 mm = fixture_matmul_bf16(d);
  linear_backward_weight_bf16(mm, dw.data(), db.data(), io.get("dout").data(),
                              get_bf16(io, "dout16").data(), get_bf16(io, "inp16").data(), N, K, O);
  io.put("dw", {O, K}, dw);
  io.put("db", {O}, db);
}

void run_linear_backward_weight_bf16_f64(FixtureIo<double>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  const std::vector<bf16> dout16 = get_bf16(io, "dout16"), inp = get_bf16(io, "inp16");
  const std::vector<double> dout = io.get("dout");
  std::vector<double> dw = io.get("dw_in"), db = io.get("db_in");
#pragma omp parallel for schedule(static)
  for (int o = 0; o < O; ++o) {
    for (int k = 0; k < K; ++k) {
      double& x = dw[size_t(o) * K + k];
      x = dot_exact(x, &dout16[o], size_t(O), &inp[k], size_t(K), N);
    }
    for (int r = 0; r < N; ++r) db[o] += dout[size_t(r) * O + o];
  }
  io.put("dw", {O, K}, dw);
  io.put("db", {O}, db);
}

// ---- the attention -------------------------------------------------------------------------

Json attention_bf16_params(const KernelDims& d) {
  return {{"B", d.B}, {"T", d.T}, {"C", d.C}, {"NH", d.NH}, {"hs", d.C / d.NH}};
}

size_t att_size(const KernelDims& d) {
  return size_t(d.B) * d.NH * d.T * d.T;
}

Json make_attention_forward_bf16(FixtureGen& g, const KernelDims& d) {
  bf16_normal(g, "qkv16", {d.B, d.T, 3 * d.C}, 1.0);
  return attention_bf16_params(d);
}

void run_attention_forward_bf16(FixtureIo<float>& io, const KernelDims& d) {
  std::vector<float> out(size_t(d.N()) * d.C), att(att_size(d));
  std::vector<bf16> att16(att_size(d));
  MatmulBf16 mm = fixture_matmul_bf16(d);
  attention_forward_bf16(mm, out.data(), att.data(), att16.data(), get_bf16(io, "qkv16").data(),
                         d.B, d.T, d.C, d.NH);
  io.put("out", {d.B, d.T, d.C}, out);
  io.put("att", {d.B, d.NH, d.T, d.T}, att);
  put_bf16(io, "att16", {d.B, d.NH, d.T, d.T}, att16);
}

// Row t of the probabilities in double: p[u] = softmax over u ≤ t of scale·(q_t·k_u), 0 past t.
void softmax_row_exact(double* p, const bf16* q, const bf16* k, size_t C3, int t, int Tn, int hs) {
  const double scale = 1.0 / std::sqrt(double(hs));
  double maxv = -std::numeric_limits<double>::infinity(), sum = 0;
  for (int u = 0; u <= t; ++u) {
    p[u] = scale * dot_exact(0, q + size_t(t) * C3, 1, k + size_t(u) * C3, 1, hs);
    maxv = std::max(maxv, p[u]);
  }
  for (int u = 0; u <= t; ++u) sum += p[u] = std::exp(p[u] - maxv);
  for (int u = 0; u < Tn; ++u) p[u] = u <= t ? p[u] / sum : 0.0;
}

void run_attention_forward_bf16_f64(FixtureIo<double>& io, const KernelDims& d) {
  const int Tn = d.T, C = d.C, hs = d.C / d.NH;
  const size_t C3 = size_t(3) * C, TT = size_t(Tn) * Tn;
  const std::vector<bf16> qkv = get_bf16(io, "qkv16");
  std::vector<double> out(size_t(d.N()) * C), att(att_size(d));
  std::vector<bf16> att16(att_size(d));
  for (int b = 0; b < d.B; ++b) {
    for (int h = 0; h < d.NH; ++h) {
      const bf16* q = &qkv[size_t(b) * Tn * C3 + size_t(h) * hs];
      double* p = &att[(size_t(b) * d.NH + h) * TT];
      bf16* p16 = &att16[(size_t(b) * d.NH + h) * TT];
      for (int t = 0; t < Tn; ++t) softmax_row_exact(p + size_t(t) * Tn, q, q + C, C3, t, Tn, hs);
      for (size_t i = 0; i < TT; ++i) p16[i] = f32_to_bf16(float(p[i]));
      for (int t = 0; t < Tn; ++t) {
        for (int i = 0; i < hs; ++i) {
          out[(size_t(b) * Tn + t) * C + size_t(h) * hs + i] =
              dot_exact(0, p16 + size_t(t) * Tn, 1, q + 2 * C + i, C3, Tn);
        }
      }
    }
  }
  io.put("out", {d.B, Tn, C}, out);
  io.put("att", {d.B, d.NH, Tn, Tn}, att);
  put_bf16(io, "att16", {d.B, d.NH, Tn, Tn}, att16);
}

Json make_attention_backward_bf16(FixtureGen& g, const KernelDims& d) {
  g.normal("dqkv_in", {d.B, d.T, 3 * d.C}, 0.1);
  bf16_normal(g, "dout16", {d.B, d.T, d.C}, 1.0);
  const std::vector<bf16> qkv16 = bf16_normal(g, "qkv16", {d.B, d.T, 3 * d.C}, 1.0);
  std::vector<float> out(size_t(d.N()) * d.C), att(att_size(d));
  std::vector<bf16> att16(att_size(d));
  MatmulBf16 mm = fixture_matmul_bf16(d);
  attention_forward_bf16(mm, out.data(), att.data(), att16.data(), qkv16.data(), d.B, d.T, d.C,
                         d.NH);
  g.add("att", {d.B, d.NH, d.T, d.T}, att);
  g.add_raw("att16", DType::kBF16, {d.B, d.NH, d.T, d.T}, att16.data());
  return attention_bf16_params(d);
}

void run_attention_backward_bf16(FixtureIo<float>& io, const KernelDims& d) {
  MatmulBf16 mm = fixture_matmul_bf16(d);
  const size_t scratch = size_t(mm.threads()) * d.T * d.T;  // one [T,T] per thread
  std::vector<float> dqkv = io.get("dqkv_in"), dp(scratch);
  std::vector<bf16> ds16(scratch);
  attention_backward_bf16(mm, dqkv.data(), dp.data(), ds16.data(), get_bf16(io, "dout16").data(),
                          get_bf16(io, "qkv16").data(), io.get("att").data(),
                          get_bf16(io, "att16").data(), d.B, d.T, d.C, d.NH);
  io.put("dqkv", {d.B, d.T, 3 * d.C}, dqkv);
}

// dS16 of one head: row t is bf16(p·(dP − Σ_u p·dP)·scale) over u ≤ t, +0 past t, where
// dP[t,u] = dout_t·v_u.
std::vector<bf16> score_grad_exact(const double* p, const bf16* dout, size_t ldo, const bf16* v,
                                   size_t C3, int Tn, int hs) {
  const double scale = 1.0 / std::sqrt(double(hs));
  std::vector<bf16> ds16(size_t(Tn) * Tn, bf16{0});
  std::vector<double> dp(static_cast<size_t>(Tn));
  for (int t = 0; t < Tn; ++t) {
    const double* pr = p + size_t(t) * Tn;
    double D = 0;
    for (int u = 0; u <= t; ++u) {
      dp[u] = dot_exact(0, dout + size_t(t) * ldo, 1, v + size_t(u) * C3, 1, hs);
      D += pr[u] * dp[u];
    }
    for (int u = 0; u <= t; ++u)
      ds16[size_t(t) * Tn + u] = f32_to_bf16(float(pr[u] * (dp[u] - D) * scale));
  }
  return ds16;
}

void run_attention_backward_bf16_f64(FixtureIo<double>& io, const KernelDims& d) {
  const int Tn = d.T, C = d.C, hs = d.C / d.NH;
  const size_t C3 = size_t(3) * C, TT = size_t(Tn) * Tn;
  const std::vector<bf16> qkv = get_bf16(io, "qkv16"), dout16 = get_bf16(io, "dout16");
  const std::vector<bf16> att16 = get_bf16(io, "att16");
  const std::vector<double> att = io.get("att");
  std::vector<double> dqkv = io.get("dqkv_in");
  for (int b = 0; b < d.B; ++b) {
    for (int h = 0; h < d.NH; ++h) {
      const size_t head = (size_t(b) * d.NH + h) * TT, row0 = size_t(b) * Tn;
      const bf16* q = &qkv[row0 * C3 + size_t(h) * hs];
      const bf16* dout = &dout16[row0 * C + size_t(h) * hs];
      const std::vector<bf16> ds16 = score_grad_exact(&att[head], dout, C, q + 2 * C, C3, Tn, hs);
      const bf16* p16 = &att16[head];
      for (int t = 0; t < Tn; ++t) {
        for (int i = 0; i < hs; ++i) {
          double* g = &dqkv[(row0 + t) * C3 + size_t(h) * hs + i];
          g[0] = dot_exact(g[0], &ds16[size_t(t) * Tn], 1, q + C + i, C3, Tn);
          g[C] = dot_exact(g[C], &ds16[t], size_t(Tn), q + i, C3, Tn);
          g[2 * C] = dot_exact(g[2 * C], p16 + t, size_t(Tn), dout + i, size_t(C), Tn);
        }
      }
    }
  }
  io.put("dqkv", {d.B, Tn, 3 * C}, dqkv);
}

}  // namespace

// Appended after every other family: the manifest's earlier entries keep their bytes.
void add_bf16_kernels(std::vector<KernelSpec>& v) {
  v.push_back(
      bf16_kernel("cast_f32_to_bf16", false, make_cast_f32_to_bf16, run_cast_f32_to_bf16, nullptr));
  v.push_back(bf16_kernel("linear_forward_bf16", true, make_linear_forward_bf16,
                          run_linear_forward_bf16, run_linear_forward_bf16_f64));
  v.push_back(bf16_kernel("linear_backward_data_bf16", true, make_linear_backward_data_bf16,
                          run_linear_backward_data_bf16, run_linear_backward_data_bf16_f64));
  v.push_back(bf16_kernel("linear_backward_weight_bf16", true, make_linear_backward_weight_bf16,
                          run_linear_backward_weight_bf16, run_linear_backward_weight_bf16_f64));
  v.push_back(bf16_kernel("attention_forward_bf16", true, make_attention_forward_bf16,
                          run_attention_forward_bf16, run_attention_forward_bf16_f64));
  v.push_back(bf16_kernel("attention_backward_bf16", true, make_attention_backward_bf16,
                          run_attention_backward_bf16, run_attention_backward_bf16_f64));
}

}  // namespace reftrain
