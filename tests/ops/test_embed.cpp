// The embedding ops (ops/embed.h): embed (token + position rows, gpt2) and token_embed (token
// rows only, llama). The reference backward against central finite differences of its own
// forward in double, backward accumulates (+=), float agrees with double, the forward equals
// its formula; the fast kernels equal the reference bit for bit.
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
#include "tests/common/fast_check.h"
#include "tests/common/op_check.h"

namespace reftrain {
namespace {

using namespace op_check;
using namespace fast_check;

// ---------------------------------------------------------------------------------------------
// The op, with named differentiable inputs, an output size, and forward/backward for float
// and double.

// C = 35 spans one full 32-channel block of the backward and a partial one.
struct EmbedOp {
  static constexpr int B = 2, T = 5, C = 35, V = 11, maxT = 7;
  std::vector<std::string> names{"wte", "wpe"};
  Tensors<double> inputs;
  std::vector<int32_t> tokens;
  EmbedOp() {
    Data d(13);
    inputs = {d.vec(size_t(V) * C, -1, 1), d.vec(size_t(maxT) * C, -1, 1)};
    for (int i = 0; i < B * T; ++i) tokens.push_back(d.below(V));
    // Repeats within a row and across rows: their gradients must add up.
    tokens[1] = tokens[3] = tokens[8] = 4;
    tokens[0] = 0;
    tokens[9] = V - 1;
  }
  size_t out_size() const { return size_t(B) * T * C; }
  template <typename U>
  std::vector<U> forward(const Tensors<U>& in) const {
    std::vector<U> out(out_size());
    embed_forward(out.data(), tokens.data(), in[0].data(), in[1].data(), B, T, C);
    return out;
  }
  template <typename U>
  void backward(const Tensors<U>&, const std::vector<U>& dout, Tensors<U>& grads) const {
    embed_backward(grads[0].data(), grads[1].data(), dout.data(), tokens.data(), B, T, C);
  }
};

// ---------------------------------------------------------------------------------------------
// Finite differences, accumulation, float against double, the forward against its formula.

TEST(OpsFd, Embed) {
  // Rows of wte for tokens not in the batch and rows of wpe past T get exactly zero gradient;
  // the FD there is exactly zero too, so check_fd covers them.
  check_fd(EmbedOp());
}

TEST(OpsAccumulate, Embed) {
  check_accumulates(EmbedOp());
}

TEST(OpsFloat, Embed) {
  check_float_matches_double(EmbedOp());
}

TEST(OpsForward, Embed) {
  const EmbedOp op;
  const std::vector<double> out = op.forward(op.inputs);
  const auto& wte = op.inputs[0];
  const auto& wpe = op.inputs[1];
  for (int b = 0; b < EmbedOp::B; ++b) {
    for (int t = 0; t < EmbedOp::T; ++t) {
      const int tok = op.tokens[size_t(b) * EmbedOp::T + t];
      for (int c = 0; c < EmbedOp::C; ++c) {
        EXPECT_EQ(out[(size_t(b) * EmbedOp::T + t) * EmbedOp::C + c],
                  wte[size_t(tok) * EmbedOp::C + c] + wpe[size_t(t) * EmbedOp::C + c]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Residual, embedding and RoPE: no reductions and no transcendentals, so the fast path does the
// reference's operations in the reference's order — bit-identical, tolerance 0.

TEST(OpsSimd, EmbeddingEqualsReference) {
  for (int C : kOddSizes) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const EmbedCase c(C);
    const size_t N = size_t(c.B) * c.T;
    Buf ref(N * C), fast(N * C);
    embed_forward(ref.p(), c.tokens.data(), c.wte.p(), c.wpe.p(), c.B, c.T, C);
    embed_forward_fast(fast.p(), c.tokens.data(), c.wte.p(), c.wpe.p(), c.B, c.T, C);
    expect_bits_equal("embed", fast, ref);
    token_embed_forward(ref.p(), c.tokens.data(), c.wte.p(), N, C);
    token_embed_forward_fast(fast.p(), c.tokens.data(), c.wte.p(), N, C);
    expect_bits_equal("token embed", fast, ref);
    Buf dwte_ref = c.dwte0, dwpe_ref = c.dwpe0, dwte = c.dwte0, dwpe = c.dwpe0;
    embed_backward(dwte_ref.p(), dwpe_ref.p(), c.dout.p(), c.tokens.data(), c.B, c.T, C);
    embed_backward_fast(dwte.p(), dwpe.p(), c.dout.p(), c.tokens.data(), c.B, c.T, C);
    expect_bits_equal("dwte", dwte, dwte_ref);
    expect_bits_equal("dwpe", dwpe, dwpe_ref);
    // Not vacuous: the unused row kept its value, a used row changed.
    EXPECT_EQ(dwte[size_t(c.V - 1) * C], c.dwte0[size_t(c.V - 1) * C]);
    EXPECT_NE(dwte[size_t(4) * C], c.dwte0[size_t(4) * C]);
    Buf tref = c.dwte0, tfast = c.dwte0;
    token_embed_backward(tref.p(), c.dout.p(), c.tokens.data(), N, C);
    token_embed_backward_fast(tfast.p(), c.dout.p(), c.tokens.data(), N, C);
    expect_bits_equal("token dwte", tfast, tref);
  }
}

}  // namespace
}  // namespace reftrain
