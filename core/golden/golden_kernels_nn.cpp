// Golden fixtures of the layer kernels: embeddings, norms, linear (all three products, fp32 and
// the fp16 mirror), RoPE, attention. Each kernel: make_* draws a case's inputs, run_* calls the
// reference kernel of ops/ on them (float and double), and the spec entry says what a GPU twin
// binds. Accumulating kernels start from non-zero *_in values, so "adds into" is checked too.
#include <algorithm>

#include "core/golden/golden_kernels.h"
#include "ops/attention.h"
#include "ops/cast.h"
#include "ops/embed.h"
#include "ops/linear.h"
#include "ops/norm.h"
#include "ops/rope.h"

namespace reftrain {

namespace {

using namespace fixture;
using Shape = std::vector<int64_t>;

constexpr double kRopeTheta = 10000.0;

// ---- embeddings --------------------------------------------------------------------------

Json make_embed_forward(FixtureGen& g, const KernelDims& d) {
  g.tokens("tokens", {d.B, d.T}, d.V);
  g.normal("wte", {d.Vp, d.C}, 0.5);
  g.normal("wpe", {d.maxT, d.C}, 0.5);
  return {{"B", d.B}, {"T", d.T}, {"C", d.C}, {"V", d.V}, {"Vp", d.Vp}, {"maxT", d.maxT}};
}

template <typename T>
void run_embed_forward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> out(size_t(d.N()) * d.C);
  embed_forward(out.data(), io.ints("tokens").data(), io.get("wte").data(), io.get("wpe").data(),
                d.B, d.T, d.C);
  io.put("out", {d.B, d.T, d.C}, out);
}

Json make_embed_backward(FixtureGen& g, const KernelDims& d) {
  g.normal("dwte_in", {d.Vp, d.C}, 0.1);
  g.normal("dwpe_in", {d.maxT, d.C}, 0.1);
  g.normal("dout", {d.B, d.T, d.C}, 1.0);
  g.tokens("tokens", {d.B, d.T}, d.V);
  return {{"B", d.B}, {"T", d.T}, {"C", d.C}, {"V", d.V}, {"Vp", d.Vp}, {"maxT", d.maxT}};
}

template <typename T>
void run_embed_backward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> dwte = io.get("dwte_in"), dwpe = io.get("dwpe_in");
  embed_backward(dwte.data(), dwpe.data(), io.get("dout").data(), io.ints("tokens").data(), d.B,
                 d.T, d.C);
  io.put("dwte", {d.Vp, d.C}, dwte);
  io.put("dwpe", {d.maxT, d.C}, dwpe);
}

Json make_token_embed_forward(FixtureGen& g, const KernelDims& d) {
  g.tokens("tokens", {d.N()}, d.V);
  g.normal("wte", {d.Vp, d.C}, 0.5);
  return {{"N", d.N()}, {"C", d.C}, {"V", d.V}, {"Vp", d.Vp}};
}

template <typename T>
void run_token_embed_forward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> out(size_t(d.N()) * d.C);
  token_embed_forward(out.data(), io.ints("tokens").data(), io.get("wte").data(), size_t(d.N()),
                      d.C);
  io.put("out", {d.N(), d.C}, out);
}

Json make_token_embed_backward(FixtureGen& g, const KernelDims& d) {
  g.normal("dwte_in", {d.Vp, d.C}, 0.1);
  g.normal("dout", {d.N(), d.C}, 1.0);
  g.tokens("tokens", {d.N()}, d.V);
  return {{"N", d.N()}, {"C", d.C}, {"V", d.V}, {"Vp", d.Vp}};
}

template <typename T>
void run_token_embed_backward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> dwte = io.get("dwte_in");
  token_embed_backward(dwte.data(), io.get("dout").data(), io.ints("tokens").data(), size_t(d.N()),
                       d.C);
  io.put("dwte", {d.Vp, d.C}, dwte);
}

// ---- norms -------------------------------------------------------------------------------

Json norm_params(const KernelDims& d) {
  return {{"N", d.N()}, {"C", d.C}, {"eps", 1e-5}};
}

Json make_layernorm_forward(FixtureGen& g, const KernelDims& d) {
  g.uniform("x", {d.N(), d.C}, -1.0, 2.0);  // a non-zero mean
  g.uniform("w", {d.C}, 0.5, 1.5);
  g.normal("b", {d.C}, 0.1);
  return norm_params(d);
}

template <typename T>
void run_layernorm_forward(FixtureIo<T>& io, const KernelDims& d) {
  const int N = d.N(), C = d.C;
  std::vector<T> out(size_t(N) * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), io.get("x").data(), io.get("w").data(),
                    io.get("b").data(), N, C);
  io.put("out", {N, C}, out);
  io.put("mean", {N}, mean);
  io.put("rstd", {N}, rstd);
}

Json make_layernorm_backward(FixtureGen& g, const KernelDims& d) {
  const int N = d.N(), C = d.C;
  g.normal("dx_in", {N, C}, 0.1);
  g.normal("dw_in", {C}, 0.1);
  g.normal("db_in", {C}, 0.1);
  g.normal("dout", {N, C}, 1.0);
  const std::vector<float> x = g.uniform("x", {N, C}, -1.0, 2.0), w = g.uniform("w", {C}, 0.5, 1.5);
  std::vector<float> out(size_t(N) * C), mean(N), rstd(N), b(C, 0.0f);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  g.add("mean", {N}, mean);
  g.add("rstd", {N}, rstd);
  return norm_params(d);
}

template <typename T>
void run_layernorm_backward(FixtureIo<T>& io, const KernelDims& d) {
  const int N = d.N(), C = d.C;
  std::vector<T> dx = io.get("dx_in"), dw = io.get("dw_in"), db = io.get("db_in");
  layernorm_backward(dx.data(), dw.data(), db.data(), io.get("dout").data(), io.get("x").data(),
                     io.get("w").data(), io.get("mean").data(), io.get("rstd").data(), N, C);
  io.put("dx", {N, C}, dx);
  io.put("dw", {C}, dw);
  io.put("db", {C}, db);
}

Json make_rmsnorm_forward(FixtureGen& g, const KernelDims& d) {
  g.uniform("x", {d.N(), d.C}, -1.0, 2.0);
  g.uniform("w", {d.C}, 0.5, 1.5);
  return norm_params(d);
}

template <typename T>
void run_rmsnorm_forward(FixtureIo<T>& io, const KernelDims& d) {
  const int N = d.N(), C = d.C;
  std::vector<T> out(size_t(N) * C), rstd(N);
  rmsnorm_forward(out.data(), rstd.data(), io.get("x").data(), io.get("w").data(), N, C);
  io.put("out", {N, C}, out);
  io.put("rstd", {N}, rstd);
}

Json make_rmsnorm_backward(FixtureGen& g, const KernelDims& d) {
  const int N = d.N(), C = d.C;
  g.normal("dx_in", {N, C}, 0.1);
  g.normal("dw_in", {C}, 0.1);
  g.normal("dout", {N, C}, 1.0);
  const std::vector<float> x = g.uniform("x", {N, C}, -1.0, 2.0), w = g.uniform("w", {C}, 0.5, 1.5);
  std::vector<float> out(size_t(N) * C), rstd(N);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C);
  g.add("rstd", {N}, rstd);
  return norm_params(d);
}

template <typename T>
void run_rmsnorm_backward(FixtureIo<T>& io, const KernelDims& d) {
  const int N = d.N(), C = d.C;
  std::vector<T> dx = io.get("dx_in"), dw = io.get("dw_in");
  rmsnorm_backward(dx.data(), dw.data(), io.get("dout").data(), io.get("x").data(),
                   io.get("w").data(), io.get("rstd").data(), N, C);
  io.put("dx", {N, C}, dx);
  io.put("dw", {C}, dw);
}

// ---- linear: N rows, K = C inputs, O = F outputs -----------------------------------------

Json linear_params(const KernelDims& d) {
  return {{"N", d.N()}, {"K", d.C}, {"O", d.F}};
}

// w as the fp16 mirror: f16(clamp(w, ±65504)) round-to-nearest-even, as bit patterns.
std::vector<uint16_t> mirror_bits(const std::vector<float>& w) {
  std::vector<uint16_t> h(w.size());
  for (size_t i = 0; i < w.size(); ++i) h[i] = f32_to_f16_bits(w[i]);
  return h;
}

template <typename T>
std::vector<T> widen(const std::vector<uint16_t>& h) {
  std::vector<T> v(h.size());
  for (size_t i = 0; i < h.size(); ++i) v[i] = T(f16_bits_to_f32(h[i]));
  return v;
}

Json make_linear_forward(FixtureGen& g, const KernelDims& d) {
  g.normal("inp", {d.N(), d.C}, 1.0);
  g.normal("w", {d.F, d.C}, 0.2);
  g.normal("b", {d.F}, 0.1);
  return linear_params(d);
}

// The fixtures' linear products run the naive variant: the textbook loop, one FMA chain per
// output (blocked and tiled give the same bits; ops/matmul.h).
const Matmul& naive_matmul() {
  static const Matmul mm(MatmulKind::kNaive, 1);
  return mm;
}

template <typename T>
void run_linear_forward(FixtureIo<T>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  std::vector<T> out(size_t(N) * O);
  linear_forward(naive_matmul(), out.data(), io.get("inp").data(), io.get("w").data(),
                 io.get("b").data(), N, K, O);
  io.put("out", {N, O}, out);
}

Json make_linear_forward_f16(FixtureGen& g, const KernelDims& d) {
  g.normal("inp", {d.N(), d.C}, 1.0);
  const std::vector<uint16_t> w16 = mirror_bits(g.normal("w16", {d.F, d.C}, 0.2));
  g.add_raw("w16", DType::kF16, {d.F, d.C}, w16.data());
  g.normal("b", {d.F}, 0.1);
  return linear_params(d);
}

// The mixed-precision forward: f32 activations times the fp16 mirror widened at load.
void run_linear_forward_f16(FixtureIo<float>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  std::vector<float> out(size_t(N) * O);
  const std::vector<uint16_t> bits = io.halves("w16");
  std::vector<f16> w16(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) w16[i] = f16_of(bits[i]);
  linear_forward(naive_matmul(), out.data(), io.get("inp").data(), w16.data(), io.get("b").data(),
                 N, K, O);
  io.put("out", {N, O}, out);
}

// The double instantiation has no f16 weight type: the widened mirror is the same values.
void run_linear_forward_f16_f64(FixtureIo<double>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  std::vector<double> out(size_t(N) * O);
  linear_forward(naive_matmul(), out.data(), io.get("inp").data(),
                 widen<double>(io.halves("w16")).data(), io.get("b").data(), N, K, O);
  io.put("out", {N, O}, out);
}

Json make_linear_backward_data(FixtureGen& g, const KernelDims& d) {
  g.normal("dinp_in", {d.N(), d.C}, 0.1);
  g.normal("dout", {d.N(), d.F}, 1.0);
  g.normal("w", {d.F, d.C}, 0.2);
  return linear_params(d);
}

// dinp += dout·w (the weight product's dw goes to scratch: this fixture is the data product).
template <typename T>
void backward_data(FixtureIo<T>& io, const KernelDims& d, const std::vector<T>& w) {
  const int N = d.N(), K = d.C, O = d.F;
  std::vector<T> dinp = io.get("dinp_in"), dw(size_t(O) * K), inp(size_t(N) * K);
  linear_backward(naive_matmul(), dinp.data(), dw.data(), static_cast<T*>(nullptr),
                  io.get("dout").data(), inp.data(), w.data(), N, K, O);
  io.put("dinp", {N, K}, dinp);
}

template <typename T>
void run_linear_backward_data(FixtureIo<T>& io, const KernelDims& d) {
  backward_data(io, d, io.get("w"));
}

Json make_linear_backward_data_f16(FixtureGen& g, const KernelDims& d) {
  g.normal("dinp_in", {d.N(), d.C}, 0.1);
  g.normal("dout", {d.N(), d.F}, 1.0);
  const std::vector<uint16_t> w16 = mirror_bits(g.normal("w16", {d.F, d.C}, 0.2));
  g.add_raw("w16", DType::kF16, {d.F, d.C}, w16.data());
  return linear_params(d);
}

// The mixed-precision backward-data product reads the mirror widened to f32 (as the model does
// with cast_f16_to_f32 into a packed copy).
template <typename T>
void run_linear_backward_data_f16(FixtureIo<T>& io, const KernelDims& d) {
  backward_data(io, d, widen<T>(io.halves("w16")));
}

Json make_linear_backward_weight(FixtureGen& g, const KernelDims& d) {
  g.normal("dw_in", {d.F, d.C}, 0.1);
  g.normal("db_in", {d.F}, 0.1);
  g.normal("dout", {d.N(), d.F}, 1.0);
  g.normal("inp", {d.N(), d.C}, 1.0);
  return linear_params(d);
}

template <typename T>
void run_linear_backward_weight(FixtureIo<T>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  std::vector<T> dw = io.get("dw_in"), db = io.get("db_in");
  linear_backward(naive_matmul(), static_cast<T*>(nullptr), dw.data(), db.data(),
                  io.get("dout").data(), io.get("inp").data(), static_cast<const T*>(nullptr), N, K,
                  O);
  io.put("dw", {O, K}, dw);
  io.put("db", {O}, db);
}

// ---- RoPE and attention ------------------------------------------------------------------

Json rope_params(const KernelDims& d) {
  return {{"B", d.B}, {"T", d.T}, {"NH", d.NH}, {"hs", d.C / d.NH}, {"theta", kRopeTheta}};
}

Json make_rope_forward(FixtureGen& g, const KernelDims& d) {
  g.normal("x", {d.B, d.T, d.C}, 1.0);
  return rope_params(d);
}

template <typename T>
void run_rope_forward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> out(size_t(d.N()) * d.C);
  rope_forward(out.data(), io.get("x").data(), d.B, d.T, d.NH, d.C / d.NH, kRopeTheta);
  io.put("out", {d.B, d.T, d.C}, out);
}

Json make_rope_backward(FixtureGen& g, const KernelDims& d) {
  g.normal("dx_in", {d.B, d.T, d.C}, 0.1);
  g.normal("dout", {d.B, d.T, d.C}, 1.0);
  return rope_params(d);
}

template <typename T>
void run_rope_backward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> dx = io.get("dx_in");
  rope_backward(dx.data(), io.get("dout").data(), d.B, d.T, d.NH, d.C / d.NH, kRopeTheta);
  io.put("dx", {d.B, d.T, d.C}, dx);
}

Json attention_params(const KernelDims& d) {
  return {{"B", d.B}, {"T", d.T}, {"C", d.C}, {"NH", d.NH}, {"hs", d.C / d.NH}};
}

Json make_attention_forward(FixtureGen& g, const KernelDims& d) {
  g.normal("qkv", {d.B, d.T, 3 * d.C}, 1.0);
  return attention_params(d);
}

template <typename T>
void run_attention_forward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> out(size_t(d.N()) * d.C), att(size_t(d.B) * d.NH * d.T * d.T);
  attention_forward(out.data(), att.data(), io.get("qkv").data(), d.B, d.T, d.C, d.NH);
  io.put("out", {d.B, d.T, d.C}, out);
  io.put("att", {d.B, d.NH, d.T, d.T}, att);
}

Json make_attention_backward(FixtureGen& g, const KernelDims& d) {
  g.normal("dqkv_in", {d.B, d.T, 3 * d.C}, 0.1);
  g.normal("dout", {d.B, d.T, d.C}, 1.0);
  const std::vector<float> qkv = g.normal("qkv", {d.B, d.T, 3 * d.C}, 1.0);
  std::vector<float> out(size_t(d.N()) * d.C), att(size_t(d.B) * d.NH * d.T * d.T);
  attention_forward(out.data(), att.data(), qkv.data(), d.B, d.T, d.C, d.NH);
  g.add("att", {d.B, d.NH, d.T, d.T}, att);
  return attention_params(d);
}

template <typename T>
void run_attention_backward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> dqkv = io.get("dqkv_in"), dp(size_t(d.B) * d.NH * d.T);
  attention_backward(dqkv.data(), dp.data(), io.get("dout").data(), io.get("qkv").data(),
                     io.get("att").data(), d.B, d.T, d.C, d.NH);
  io.put("dqkv", {d.B, d.T, 3 * d.C}, dqkv);
}

// ---- the registry entries ------------------------------------------------------------------

#define REFTRAIN_RUN(f) f<float>, f<double>

void add_embed_kernels(std::vector<KernelSpec>& v) {
  v.push_back(record_kernel("embed_forward", Family::kGpt2, make_embed_forward,
                            REFTRAIN_RUN(run_embed_forward)));
  v.push_back(record_kernel("embed_backward", Family::kGpt2, make_embed_backward,
                            REFTRAIN_RUN(run_embed_backward)));
  v.push_back(record_kernel("token_embed_forward", Family::kLlama, make_token_embed_forward,
                            REFTRAIN_RUN(run_token_embed_forward)));
  v.push_back(record_kernel("token_embed_backward", Family::kLlama, make_token_embed_backward,
                            REFTRAIN_RUN(run_token_embed_backward)));
}

void add_norm_kernels(std::vector<KernelSpec>& v) {
  v.push_back(record_kernel("layernorm_forward", Family::kGpt2, make_layernorm_forward,
                            REFTRAIN_RUN(run_layernorm_forward)));
  v.push_back(record_kernel("layernorm_backward", Family::kGpt2, make_layernorm_backward,
                            REFTRAIN_RUN(run_layernorm_backward)));
  v.push_back(record_kernel("rmsnorm_forward", Family::kLlama, make_rmsnorm_forward,
                            REFTRAIN_RUN(run_rmsnorm_forward)));
  v.push_back(record_kernel("rmsnorm_backward", Family::kLlama, make_rmsnorm_backward,
                            REFTRAIN_RUN(run_rmsnorm_backward)));
}

void add_linear_kernels(std::vector<KernelSpec>& v) {
  v.push_back(record_kernel("linear_forward", Family::kBoth, make_linear_forward,
                            REFTRAIN_RUN(run_linear_forward)));
  v.push_back(record_kernel("linear_forward_f16", Family::kBoth, make_linear_forward_f16,
                            run_linear_forward_f16, run_linear_forward_f16_f64));
  v.push_back(record_kernel("linear_backward_data", Family::kBoth, make_linear_backward_data,
                            REFTRAIN_RUN(run_linear_backward_data)));
  v.push_back(record_kernel("linear_backward_data_f16", Family::kBoth,
                            make_linear_backward_data_f16,
                            REFTRAIN_RUN(run_linear_backward_data_f16)));
  v.push_back(record_kernel("linear_backward_weight", Family::kBoth, make_linear_backward_weight,
                            REFTRAIN_RUN(run_linear_backward_weight)));
}

void add_attention_kernels(std::vector<KernelSpec>& v) {
  v.push_back(record_kernel("rope_forward", Family::kLlama, make_rope_forward,
                            REFTRAIN_RUN(run_rope_forward)));
  v.push_back(record_kernel("rope_backward", Family::kLlama, make_rope_backward,
                            REFTRAIN_RUN(run_rope_backward)));
  v.push_back(record_kernel("attention_forward", Family::kBoth, make_attention_forward,
                            REFTRAIN_RUN(run_attention_forward)));
  v.push_back(record_kernel("attention_backward", Family::kBoth, make_attention_backward,
                            REFTRAIN_RUN(run_attention_backward)));
}

}  // namespace

void add_nn_kernels(std::vector<KernelSpec>& v) {
  add_embed_kernels(v);
  add_norm_kernels(v);
  add_linear_kernels(v);
  add_attention_kernels(v);
}

}  // namespace reftrain
