// Golden fixtures of ops/linear: all three products (forward, backward data, backward weight),
// in fp32 and with the fp16 weight mirror, over N rows, K = C inputs and O = F outputs. make_*
// draws a case's inputs, run_* calls the reference kernel of ops/ on them (float and double). The
// backwards start from non-zero *_in values, so "adds into" is checked too.
#include "core/golden/golden_kernels.h"
#include "ops/cast.h"
#include "ops/linear.h"

namespace reftrain {

namespace {

using namespace fixture;

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
// output. The large case's products (2.4 GFMA each, in f32 and in f64) run the blocked variant,
// bit-identical to it by ops/matmul.h's contract (tests/ops/test_linear.cpp holds it to that):
// the naive loop's strided backward products take 20 s each at that size.
const Matmul& fixture_matmul(const KernelDims& d) {
  static const Matmul naive(MatmulKind::kNaive, 1), blocked(MatmulKind::kBlocked);
  return d.name == "large" ? blocked : naive;
}

template <typename T>
void run_linear_forward(FixtureIo<T>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  std::vector<T> out(size_t(N) * O);
  linear_forward(fixture_matmul(d), out.data(), io.get("inp").data(), io.get("w").data(),
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
  linear_forward(fixture_matmul(d), out.data(), io.get("inp").data(), w16.data(),
                 io.get("b").data(), N, K, O);
  io.put("out", {N, O}, out);
}

// The double instantiation has no f16 weight type: the widened mirror is the same values.
void run_linear_forward_f16_f64(FixtureIo<double>& io, const KernelDims& d) {
  const int N = d.N(), K = d.C, O = d.F;
  std::vector<double> out(size_t(N) * O);
  linear_forward(fixture_matmul(d), out.data(), io.get("inp").data(),
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
  linear_backward(fixture_matmul(d), dinp.data(), dw.data(), static_cast<T*>(nullptr),
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
  linear_backward(fixture_matmul(d), static_cast<T*>(nullptr), dw.data(), db.data(),
                  io.get("dout").data(), io.get("inp").data(), static_cast<const T*>(nullptr), N, K,
                  O);
  io.put("dw", {O, K}, dw);
  io.put("db", {O}, db);
}

}  // namespace

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

}  // namespace reftrain
