// Golden fixtures of ops/rope: rotary position embedding (llama), forward and backward, at
// theta = 10000. make_* draws a case's inputs, run_* calls the reference kernel of ops/ on them
// (float and double). The backward starts from a non-zero dx_in, so "adds into" is checked too.
#include "core/golden/golden_kernels.h"
#include "ops/rope.h"

namespace reftrain {

namespace {

using namespace fixture;

constexpr double kRopeTheta = 10000.0;

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

}  // namespace

void add_rope_kernels(std::vector<KernelSpec>& v) {
  v.push_back(record_kernel("rope_forward", Family::kLlama, make_rope_forward,
                            REFTRAIN_RUN(run_rope_forward)));
  v.push_back(record_kernel("rope_backward", Family::kLlama, make_rope_backward,
                            REFTRAIN_RUN(run_rope_backward)));
}

}  // namespace reftrain
