// Golden fixtures of the element-wise and row-wise kernels: GELU, SwiGLU, cross-entropy with
// z-loss and fused dlogits, the residual add. make_* draws a case's inputs, run_* calls the
// reference kernel of ops/ (float and double).
#include "core/golden/golden_kernels.h"
#include "ops/activation.h"
#include "ops/loss.h"
#include "ops/residual.h"

namespace reftrain {

namespace {

using namespace fixture;

Json count_params(const KernelDims& d) {
  return {{"n", d.n}};
}

// ---- activations -------------------------------------------------------------------------

Json make_gelu_forward(FixtureGen& g, const KernelDims& d) {
  g.normal("x", {d.n}, 3.0);  // far enough out that tanh saturates
  return count_params(d);
}

template <typename T>
void run_gelu_forward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> out(size_t(d.n));
  gelu_forward(out.data(), io.get("x").data(), size_t(d.n));
  io.put("out", {d.n}, out);
}

Json make_gelu_backward(FixtureGen& g, const KernelDims& d) {
  g.normal("dx_in", {d.n}, 0.1);
  g.normal("x", {d.n}, 3.0);
  g.normal("dout", {d.n}, 1.0);
  return count_params(d);
}

template <typename T>
void run_gelu_backward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> dx = io.get("dx_in");
  gelu_backward(dx.data(), io.get("x").data(), io.get("dout").data(), size_t(d.n));
  io.put("dx", {d.n}, dx);
}

// gelu_erf draws the same inputs as gelu under its own names (the draws are keyed by kernel).
template <typename T>
void run_gelu_erf_forward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> out(size_t(d.n));
  gelu_erf_forward(out.data(), io.get("x").data(), size_t(d.n));
  io.put("out", {d.n}, out);
}

template <typename T>
void run_gelu_erf_backward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> dx = io.get("dx_in");
  gelu_erf_backward(dx.data(), io.get("x").data(), io.get("dout").data(), size_t(d.n));
  io.put("dx", {d.n}, dx);
}

Json make_swiglu_forward(FixtureGen& g, const KernelDims& d) {
  g.normal("gate", {d.n}, 4.0);  // σ over its whole range, e^-|g| small and large
  g.normal("up", {d.n}, 1.0);
  return count_params(d);
}

template <typename T>
void run_swiglu_forward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> out(size_t(d.n));
  swiglu_forward(out.data(), io.get("gate").data(), io.get("up").data(), size_t(d.n));
  io.put("out", {d.n}, out);
}

Json make_swiglu_backward(FixtureGen& g, const KernelDims& d) {
  g.normal("dgate_in", {d.n}, 0.1);
  g.normal("dup_in", {d.n}, 0.1);
  g.normal("dout", {d.n}, 1.0);
  g.normal("gate", {d.n}, 4.0);
  g.normal("up", {d.n}, 1.0);
  return count_params(d);
}

template <typename T>
void run_swiglu_backward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> dgate = io.get("dgate_in"), dup = io.get("dup_in");
  swiglu_backward(dgate.data(), dup.data(), io.get("dout").data(), io.get("gate").data(),
                  io.get("up").data(), size_t(d.n));
  io.put("dgate", {d.n}, dgate);
  io.put("dup", {d.n}, dup);
}

// ---- loss and residual -------------------------------------------------------------------

// z: 0 in the small case (plain cross-entropy, the gpt2 presets), 0.05 in the awkward one (far
// above llama's 1e-4, so that the z-loss term shows).
float z_of(const KernelDims& d) {
  return d.name == "small" ? 0.0f : 0.05f;
}

Json make_crossentropy(FixtureGen& g, const KernelDims& d) {
  g.normal("logits", {d.N(), d.Vp}, 2.0);  // the padded columns V..Vp-1 hold junk on purpose
  g.tokens("targets", {d.N()}, d.V);
  return {{"N", d.N()}, {"V", d.V}, {"Vp", d.Vp}, {"dloss", 1.0 / d.N()}, {"z", z_of(d)}};
}

template <typename T>
void run_crossentropy(FixtureIo<T>& io, const KernelDims& d) {
  const int N = d.N();
  std::vector<T> losses(static_cast<size_t>(N)), dlogits(size_t(N) * d.Vp);
  // dloss = 1/N rounded to T, as the model passes it.
  crossentropy_forward_backward(losses.data(), dlogits.data(), io.get("logits").data(),
                                io.ints("targets").data(), N, d.V, d.Vp, T(1) / T(N), T(z_of(d)));
  io.put("losses", {N}, losses);
  io.put("dlogits", {N, d.Vp}, dlogits);
}

Json make_residual_forward(FixtureGen& g, const KernelDims& d) {
  g.normal("a", {d.n}, 1.0);
  g.normal("b", {d.n}, 1.0);
  return count_params(d);
}

template <typename T>
void run_residual_forward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> out(size_t(d.n));
  residual_forward(out.data(), io.get("a").data(), io.get("b").data(), size_t(d.n));
  io.put("out", {d.n}, out);
}

Json make_residual_backward(FixtureGen& g, const KernelDims& d) {
  g.normal("da_in", {d.n}, 0.1);
  g.normal("db_in", {d.n}, 0.1);
  g.normal("dout", {d.n}, 1.0);
  return count_params(d);
}

template <typename T>
void run_residual_backward(FixtureIo<T>& io, const KernelDims& d) {
  std::vector<T> da = io.get("da_in"), db = io.get("db_in");
  residual_backward(da.data(), db.data(), io.get("dout").data(), size_t(d.n));
  io.put("da", {d.n}, da);
  io.put("db", {d.n}, db);
}

#define REFTRAIN_RUN(f) f<float>, f<double>

}  // namespace

void add_pointwise_kernels(std::vector<KernelSpec>& v) {
  v.push_back(record_kernel("gelu_forward", Family::kGpt2, make_gelu_forward,
                            REFTRAIN_RUN(run_gelu_forward)));
  v.push_back(record_kernel("gelu_backward", Family::kGpt2, make_gelu_backward,
                            REFTRAIN_RUN(run_gelu_backward)));
  v.push_back(record_kernel("gelu_erf_forward", Family::kGpt2, make_gelu_forward,
                            REFTRAIN_RUN(run_gelu_erf_forward)));
  v.push_back(record_kernel("gelu_erf_backward", Family::kGpt2, make_gelu_backward,
                            REFTRAIN_RUN(run_gelu_erf_backward)));
  v.push_back(record_kernel("swiglu_forward", Family::kLlama, make_swiglu_forward,
                            REFTRAIN_RUN(run_swiglu_forward)));
  v.push_back(record_kernel("swiglu_backward", Family::kLlama, make_swiglu_backward,
                            REFTRAIN_RUN(run_swiglu_backward)));
  v.push_back(record_kernel("crossentropy_forward_backward", Family::kBoth, make_crossentropy,
                            REFTRAIN_RUN(run_crossentropy)));
  v.push_back(record_kernel("residual_forward", Family::kBoth, make_residual_forward,
                            REFTRAIN_RUN(run_residual_forward)));
  v.push_back(record_kernel("residual_backward", Family::kBoth, make_residual_backward,
                            REFTRAIN_RUN(run_residual_backward)));
}

}  // namespace reftrain
