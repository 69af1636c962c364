// Golden fixtures of ops/embed: the gpt2 token-plus-position embedding and the llama token
// embedding, forward and backward. make_* draws a case's inputs, run_* calls the reference
// kernel of ops/ on them (float and double). The backwards start from non-zero *_in values, so
// "adds into" is checked too.
#include "core/golden/golden_kernels.h"
#include "ops/embed.h"

namespace reftrain {

namespace {

using namespace fixture;

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

}  // namespace

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

}  // namespace reftrain
