// The backward kernels as a model's first writer of an input gradient (accumulate false:
// Model::Grad::kFresh, which saves the pass that zeroed each buffer before its first kernel added
// into it). The gradient's buffer holds NaN, which one read would spread; each result must be,
// bit for bit, the same kernel's on a zeroed buffer with accumulate true, including the sign of
// zero (0 + (-0) is +0, which a kernel that stored its sum without the +0 would get wrong: dout
// has a run of -0 terms for that). Every slot of both kernel tables (what the models call), the
// attention's two work splits, every matmul variant and every bf16 path the CPU has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/attention.h"
#include "ops/attention_bf16.h"
#include "ops/cast.h"
#include "ops/linear.h"
#include "ops/linear_bf16.h"
#include "optim/kernel_table.h"
#include "tests/common/fast_check.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using fast_check::ActivationCase;
using fast_check::Buf;
using fast_check::expect_bits_equal;

using testing::kNaN;

// Runs `backward(outputs, accumulate)` on NaN-filled and on zeroed outputs of `sizes` and expects
// the same bits.
template <typename Backward>
void expect_fresh_equals_zeroed(const std::string& what, const std::vector<size_t>& sizes,
                                Backward backward) {
  std::vector<Buf> fresh, zeroed;
  for (size_t n : sizes) fresh.emplace_back(n, kNaN), zeroed.emplace_back(n, 0.0f);
  backward(fresh, false);
  backward(zeroed, true);
  for (size_t i = 0; i < sizes.size(); ++i) {
    expect_bits_equal(what + " output " + std::to_string(i), fresh[i], zeroed[i]);
  }
}

std::vector<KernelTable> every_table() {
  return {reference_kernels(), fast_kernels(MatmulKind::kBlocked, AttentionKind::kFused),
          fast_kernels(MatmulKind::kBlocked, AttentionKind::kMaterialised)};
}

std::vector<float> uniform(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(FirstWriter, ElementwiseBackwardsWriteTheirGradients) {
  for (size_t n : {size_t(37), size_t(3 * 4096 + 21)}) {
    ActivationCase c(n);
    std::fill(c.dout.p(), c.dout.p() + 9, -0.0f);
    for (const KernelTable& k : every_table()) {
      const std::string column = k.column == Kernels::kFast ? "fast " : "reference ";
      expect_fresh_equals_zeroed(column + "residual_backward", {n, n},
                                 [&](std::vector<Buf>& o, bool acc) {
                                   k.residual_backward(o[0].p(), o[1].p(), c.dout.p(), n, acc);
                                 });
      expect_fresh_equals_zeroed(column + "gelu_backward", {n}, [&](std::vector<Buf>& o, bool acc) {
        k.gelu_backward(o[0].p(), c.x.p(), c.dout.p(), n, acc);
      });
      expect_fresh_equals_zeroed(column + "gelu_erf_backward", {n},
                                 [&](std::vector<Buf>& o, bool acc) {
                                   k.gelu_erf_backward(o[0].p(), c.x.p(), c.dout.p(), n, acc);
                                 });
      expect_fresh_equals_zeroed(
          column + "swiglu_backward", {n, n}, [&](std::vector<Buf>& o, bool acc) {
            k.swiglu_backward(o[0].p(), o[1].p(), c.dout.p(), c.x.p(), c.y.p(), n, acc);
          });
    }
  }
}

TEST(FirstWriter, RopeBackwardWritesDx) {
  const int B = 2, T = 5, NH = 3, hs = 8;
  const size_t n = size_t(B) * T * NH * hs;
  std::vector<float> dout = uniform(n, 9);
  std::fill(dout.begin(), dout.begin() + 2 * hs, -0.0f);
  for (const KernelTable& k : every_table()) {
    expect_fresh_equals_zeroed("rope_backward", {n}, [&](std::vector<Buf>& o, bool a) {
      k.rope_backward(o[0].p(), dout.data(), B, T, NH, hs, 10000.0, 0, a);
    });
  }
}

TEST(FirstWriter, AttentionBackwardsWriteDqkv) {
  const int B = 2, T = 70, NH = 3, C = 48;
  const size_t N = size_t(B) * T;
  const std::vector<float> qkv = uniform(N * 3 * C, 1);
  std::vector<float> dout = uniform(N * C, 2);
  std::fill(dout.begin(), dout.begin() + C, -0.0f);
  for (const KernelTable& k : every_table()) {
    std::vector<float> out(N * C), att(size_t(B) * NH * T * T), dp(size_t(B) * NH * T);
    k.attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    expect_fresh_equals_zeroed("attention_backward", {N * 3 * C}, [&](std::vector<Buf>& o, bool a) {
      k.attention_backward(o[0].p(), dp.data(), dout.data(), qkv.data(), out.data(), att.data(), B,
                           T, C, NH, a);
    });
    if (k.attention != AttentionKind::kFused) continue;
    for (AttentionSplit split : {AttentionSplit::kPerHead, AttentionSplit::kTwoPass}) {
      expect_fresh_equals_zeroed("split", {N * 3 * C}, [&](std::vector<Buf>& o, bool a) {
        attention_backward_fast(o[0].p(), dout.data(), qkv.data(), out.data(), att.data(), B, T, C,
                                NH, split, a);
      });
    }
  }
}

TEST(FirstWriter, BackwardDataProductsWriteDinp) {
  const int N = 70, K = 40, O = 300;  // O: more than one K block of the product (KC = 256)
  const std::vector<float> w = uniform(size_t(O) * K, 3);
  std::vector<float> dout = uniform(size_t(N) * O, 4);
  std::fill(dout.begin(), dout.begin() + 2 * O, -0.0f);  // two rows of -0 terms only
  for (MatmulKind kind :
       {MatmulKind::kNaive, MatmulKind::kTiled, MatmulKind::kBlocked, MatmulKind::kEigen}) {
    for (int threads : {1, 3}) {
      const Matmul mm(kind, threads);
      expect_fresh_equals_zeroed("linear_backward_data " + std::to_string(int(kind)),
                                 {size_t(N) * K}, [&](std::vector<Buf>& o, bool a) {
                                   linear_backward_data(mm, o[0].p(), dout.data(), w.data(), N, K,
                                                        O, a);
                                 });
    }
  }
}

std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> h(v.size());
  cast_f32_to_bf16(h.data(), v.data(), v.size());
  return h;
}

TEST(FirstWriter, Bf16BackwardsWriteTheirGradients) {
  const int B = 2, T = 70, NH = 3, C = 48, N = B * T, O = 300;
  std::vector<float> qkv = uniform(size_t(N) * 3 * C, 5), dout = uniform(size_t(N) * C, 6);
  std::fill(dout.begin(), dout.begin() + C, -0.0f);
  const std::vector<bf16> qkv16 = to_bf16(qkv), dout16 = to_bf16(dout);
  std::vector<float> dy = uniform(size_t(N) * O, 8);
  std::fill(dy.begin(), dy.begin() + 2 * O, -0.0f);
  const std::vector<bf16> w16 = to_bf16(uniform(size_t(O) * C, 7)), dy16 = to_bf16(dy);
  const size_t TT = size_t(T) * T;
  for (Bf16Path path :
       {Bf16Path::kReference, Bf16Path::kEmulated, Bf16Path::kDpbf16, Bf16Path::kAmx}) {
    if (!bf16_path_available(path)) continue;
    const std::string name = bf16_path_name(path);
    for (int threads : {1, 3}) {
      MatmulBf16 mm(path, threads);
      expect_fresh_equals_zeroed(
          name + " linear_backward_data_bf16", {size_t(N) * C}, [&](std::vector<Buf>& o, bool a) {
            linear_backward_data_bf16(mm, o[0].p(), dy16.data(), w16.data(), N, C, O, a);
          });
      std::vector<float> out(size_t(N) * C), att(B * NH * TT), dp(threads * TT);
      std::vector<bf16> att16(att.size()), ds16(threads * TT);
      attention_forward_bf16(mm, out.data(), att.data(), att16.data(), qkv16.data(), B, T, C, NH);
      expect_fresh_equals_zeroed(
          name + " attention_backward_bf16", {size_t(N) * 3 * C}, [&](std::vector<Buf>& o, bool a) {
            attention_backward_bf16(mm, o[0].p(), dp.data(), ds16.data(), dout16.data(),
                                    qkv16.data(), att.data(), att16.data(), B, T, C, NH, a);
          });
    }
  }
}

}  // namespace
}  // namespace reftrain
