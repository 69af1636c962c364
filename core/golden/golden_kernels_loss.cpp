// Golden fixtures of ops/loss: cross-entropy with z-loss and the fused dlogits. make_* draws a
// case's inputs, run_* calls the reference kernel of ops/ (float and double).
#include "core/golden/golden_kernels.h"
#include "ops/loss.h"

namespace reftrain {

namespace {

using namespace fixture;

// z: 0 in the small case (plain cross-entropy, the gpt2 presets), 0.05 in the awkward and large
// ones (far above llama's 1e-4, so that the z-loss term shows).
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

}  // namespace

void add_loss_kernels(std::vector<KernelSpec>& v) {
  v.push_back(record_kernel("crossentropy_forward_backward", Family::kBoth, make_crossentropy,
                            REFTRAIN_RUN(run_crossentropy)));
}

}  // namespace reftrain
