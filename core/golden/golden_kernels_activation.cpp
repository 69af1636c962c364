// Golden fixtures of ops/activation: GELU (tanh and erf forms, gpt2) and SwiGLU (llama),
// forward and backward. make_* draws a case's inputs, run_* calls the reference kernel of ops/
// (float and double).
#include "core/golden/golden_kernels.h"
#include "ops/activation.h"

namespace reftrain {

namespace {

using namespace fixture;

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

}  // namespace

void add_activation_kernels(std::vector<KernelSpec>& v) {
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
}

}  // namespace reftrain
