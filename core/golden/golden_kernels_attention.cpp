// Golden fixtures of ops/attention: causal multi-head attention, forward and backward. make_*
// draws a case's inputs, run_* calls the reference kernel of ops/ on them (float and double).
// The backward starts from a non-zero dqkv_in, so "adds into" is checked too, and reads the
// attention weights the forward computed from the same qkv.
#include "core/golden/golden_kernels.h"
#include "ops/attention.h"

namespace reftrain {

namespace {

using namespace fixture;

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

}  // namespace

void add_attention_kernels(std::vector<KernelSpec>& v) {
  v.push_back(record_kernel("attention_forward", Family::kBoth, make_attention_forward,
                            REFTRAIN_RUN(run_attention_forward)));
  v.push_back(record_kernel("attention_backward", Family::kBoth, make_attention_backward,
                            REFTRAIN_RUN(run_attention_backward)));
}

}  // namespace reftrain
