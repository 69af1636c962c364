// The residual add (ops/residual.h). The reference backward against central finite
// differences of its own forward in double, backward accumulates (+=), float agrees with
// double, the forward is the sum; the fast kernels equal the reference bit for bit, and the
// element-wise fast kernels (residual, embedding, RoPE) give the same bits for any thread
// count.
//
// Method: for an op out = f(inputs), pick a random projection R of the output and set
// L = Σ R·out. Then ∂L/∂input is the op's backward with the upstream gradient dout = R, and each
// element of it is compared with (L(x+h) - L(x-h)) / 2h. Shapes are small and deliberately not
// multiples of 4/8/16, so no SIMD-width or block-size assumption goes unnoticed.
//
// The finite-difference, accumulate and float-vs-double checks are tests/common/op_check.h;
// the fast-against-reference helpers and cases are tests/common/fast_check.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ops/embed.h"
#include "ops/residual.h"
#include "ops/rope.h"
#include "tests/common/fast_check.h"
#include "tests/common/op_check.h"

namespace reftrain {
namespace {

using namespace op_check;
using namespace fast_check;

// ---------------------------------------------------------------------------------------------
// The op, with named differentiable inputs, an output size, and forward/backward for float
// and double.

struct ResidualOp {
  static constexpr size_t n = 37;
  std::vector<std::string> names{"a", "b"};
  Tensors<double> inputs;
  ResidualOp() {
    Data d(12);
    inputs = {d.vec(n, -2, 2), d.vec(n, -2, 2)};
  }
  size_t out_size() const { return n; }
  template <typename T>
  std::vector<T> forward(const Tensors<T>& in) const {
    std::vector<T> out(n);
    residual_forward(out.data(), in[0].data(), in[1].data(), n);
    return out;
  }
  template <typename T>
  void backward(const Tensors<T>&, const std::vector<T>& dout, Tensors<T>& grads) const {
    residual_backward(grads[0].data(), grads[1].data(), dout.data(), n);
  }
};

// ---------------------------------------------------------------------------------------------
// Finite differences, accumulation, float against double, the forward against its formula.

TEST(OpsFd, Residual) {
  check_fd(ResidualOp());
}

TEST(OpsAccumulate, Residual) {
  check_accumulates(ResidualOp());
}

TEST(OpsFloat, Residual) {
  check_float_matches_double(ResidualOp());
}

TEST(OpsForward, Residual) {
  const ResidualOp op;
  const std::vector<double> out = op.forward(op.inputs);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], op.inputs[0][i] + op.inputs[1][i]);
}

// ---------------------------------------------------------------------------------------------
// Residual, embedding and RoPE: no reductions and no transcendentals, so the fast path does the
// reference's operations in the reference's order — bit-identical, tolerance 0.

TEST(OpsSimd, ResidualEqualsReference) {
  for (int n : kActivationSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const ActivationCase c(n);
    Buf ref(c.n), fast(c.n);
    residual_forward(ref.p(), c.x.p(), c.y.p(), c.n);
    residual_forward_fast(fast.p(), c.x.p(), c.y.p(), c.n);
    expect_bits_equal("out", fast, ref);
    Buf da_ref = c.d0, db_ref = c.d1, da = c.d0, db = c.d1;
    residual_backward(da_ref.p(), db_ref.p(), c.dout.p(), c.n);
    residual_backward_fast(da.p(), db.p(), c.dout.p(), c.n);
    expect_bits_equal("da", da, da_ref);
    expect_bits_equal("db", db, db_ref);
  }
}

TEST(OpsSimd, ElementwiseKernelsAreThreadCountInvariant) {
  const EmbedCase e(100);
  const RopeCase r(33);
  const ActivationCase a(3 * 4096 + 37);
  expect_thread_count_invariant([&] {
    const size_t N = size_t(e.B) * e.T;
    Buf emb(N * e.C), dwte = e.dwte0, dwpe = e.dwpe0, rope(r.x.size()), drope = r.d0;
    Buf res(a.n), da = a.d0, db = a.d1;
    embed_forward_fast(emb.p(), e.tokens.data(), e.wte.p(), e.wpe.p(), e.B, e.T, e.C);
    embed_backward_fast(dwte.p(), dwpe.p(), e.dout.p(), e.tokens.data(), e.B, e.T, e.C);
    rope_forward_fast(rope.p(), r.x.p(), r.B, r.T, r.NH, r.hs, 10000.0);
    rope_backward_fast(drope.p(), r.x.p(), r.B, r.T, r.NH, r.hs, 10000.0);
    residual_forward_fast(res.p(), a.x.p(), a.y.p(), a.n);
    residual_backward_fast(da.p(), db.p(), a.dout.p(), a.n);
    std::vector<float> all;
    for (const Buf* b : {&emb, &dwte, &dwpe, &rope, &drope, &res, &da, &db}) {
      const std::vector<float> v = b->vec();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  });
}

}  // namespace
}  // namespace reftrain
