// Golden fixtures of ops/residual: the residual add and its backward. make_* draws a case's
// inputs, run_* calls the reference kernel of ops/ (float and double).
#include "core/golden/golden_kernels.h"
#include "ops/residual.h"

namespace reftrain {

namespace {

using namespace fixture;

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

}  // namespace

void add_residual_kernels(std::vector<KernelSpec>& v) {
  v.push_back(record_kernel("residual_forward", Family::kBoth, make_residual_forward,
                            REFTRAIN_RUN(run_residual_forward)));
  v.push_back(record_kernel("residual_backward", Family::kBoth, make_residual_backward,
                            REFTRAIN_RUN(run_residual_backward)));
}

}  // namespace reftrain
