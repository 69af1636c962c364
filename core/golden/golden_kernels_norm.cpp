// Golden fixtures of ops/norm: LayerNorm (gpt2) and RMSNorm (llama), forward and backward.
// make_* draws a case's inputs, run_* calls the reference kernel of ops/ on them (float and
// double). The backwards start from non-zero *_in values, so "adds into" is checked too, and read
// the mean and rstd the forward computed from the same x.
#include "core/golden/golden_kernels.h"
#include "ops/norm.h"

namespace reftrain {

namespace {

using namespace fixture;

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

}  // namespace

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

}  // namespace reftrain
