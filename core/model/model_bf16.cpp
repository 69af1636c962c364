// bf16 precision's products (Precision::kBf16, kBf16Pure and kBf16Kahan): what Model's linear and
// attention calls run instead of the fp32 kernels. Each operand is rounded to bf16 as it enters its
// product, one cast_f32_to_bf16 call per operand (so a GPU replay's dump pairs with ours call for
// call). A training step keeps the roundings of the products' input activations (the norms'
// outputs, qkv, the attention's output, the MLP's hidden activation) from the forward, and its
// backward reads them again instead of casting the same f32 values a second time: the casts are
// memory-bound passes, and these were about 30 % of their elements (baby). That costs 6C + F bf16
// per token and layer (bf16_operand_bytes counts it). The probabilities are rounded again: keeping
// them would cost B·NH·T² per layer, more than all the rest at T = 1024.
#include <stdexcept>
#include <string>

#include "core/model/model.h"
#include "ops/attention_bf16.h"
#include "ops/linear_bf16.h"

namespace reftrain {

const bf16* Model::to_bf16(bf16* dst, const float* src, size_t n) const {
  traced("cast_f32_to_bf16", {dst, src}, {{"n", n}}, [&] { kt_.cast_f32_to_bf16(dst, src, n); });
  return dst;
}

const bf16* Model::input_bf16(const float* src, size_t n) const {
  if (!last_.has_targets) return to_bf16(b16_.in.data(), src, n);
  for (const KeptInput& k : b16_.kept_at) {
    if (k.src != src) continue;
    if (k.n != n) throw std::logic_error("Model::input_bf16: one input read at two sizes");
    return b16_.kept.data() + k.offset;
  }
  const size_t offset =
      b16_.kept_at.empty() ? 0 : b16_.kept_at.back().offset + b16_.kept_at.back().n;
  if (offset + n > b16_.kept.size()) {
    throw std::logic_error("Model::input_bf16: the kept bf16 inputs outgrow bf16_kept_inputs");
  }
  b16_.kept_at.push_back({src, offset, n});
  return to_bf16(b16_.kept.data() + offset, src, n);
}

void Model::linear_fwd_bf16(float* out, const float* inp, const float* w, const float* b, int N,
                            int K, int O) const {
  const bf16* w16 = wb16_.data() + (w - w_.data());
  const bf16* x16 = input_bf16(inp, size_t(N) * K);
  MatmulBf16& mm = decoding_ ? *b16_.weights_mm : *b16_.mm;
  traced_as(product_name(profile_, "linear_forward_bf16", N, K, O), "linear_forward_bf16",
            {out, x16, w16, b}, {{"N", size_t(N)}, {"K", size_t(K)}, {"O", size_t(O)}},
            [&] { linear_forward_bf16(mm, out, x16, w16, b, N, K, O); });
}

void Model::linear_bwd_bf16(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                            const float* w, int N, int K, int O, Grad grad) const {
  const bf16* w16 = wb16_.data() + (w - w_.data());
  const std::initializer_list<Dim> dims = {{"N", size_t(N)}, {"K", size_t(K)}, {"O", size_t(O)}};
  const bf16* d16 = to_bf16(b16_.dout.data(), dout, size_t(N) * O);
  if (dinp) {
    traced_as(product_name(profile_, "linear_backward_data_bf16", N, K, O),
              "linear_backward_data_bf16", {dinp, d16, w16}, dims, [&] {
                linear_backward_data_bf16(*b16_.mm, dinp, d16, w16, N, K, O, grad == Grad::kAdd);
              });
  }
  const bf16* x16 = input_bf16(inp, size_t(N) * K);
  traced_as(product_name(profile_, "linear_backward_weight_bf16", N, K, O),
            "linear_backward_weight_bf16", {dw, db, dout, d16, x16}, dims,
            [&] { linear_backward_weight_bf16(*b16_.mm, dw, db, dout, d16, x16, N, K, O); });
}

void Model::attention_fwd_bf16(float* out, float* att, const float* qkv, int B, int T) const {
  const int C = cfg_.channels, NH = cfg_.heads;
  const bf16* q16 = input_bf16(qkv, size_t(B) * T * 3 * C);
  bf16* a16 = b16_.att.data();
  traced("attention_forward_bf16", {out, att, a16, q16},
         {{"B", size_t(B)}, {"T", size_t(T)}, {"C", size_t(C)}, {"NH", size_t(NH)}},
         [&] { attention_forward_bf16(*b16_.mm, out, att, a16, q16, B, T, C, NH); });
}

void Model::attention_bwd_bf16(float* dqkv, const float* dout, const float* qkv, const float* att,
                               int B, int T) const {
  const int C = cfg_.channels, NH = cfg_.heads;
  const bf16* q16 = input_bf16(qkv, size_t(B) * T * 3 * C);
  const bf16* d16 = to_bf16(b16_.dout.data(), dout, size_t(B) * T * C);
  const bf16* a16 = to_bf16(b16_.att.data(), att, size_t(B) * NH * T * T);
  traced("attention_backward_bf16", {dqkv, nullptr, nullptr, d16, q16, att, a16},
         {{"B", size_t(B)}, {"T", size_t(T)}, {"C", size_t(C)}, {"NH", size_t(NH)}}, [&] {
           attention_backward_bf16(*b16_.mm, dqkv, b16_.dp.data(), b16_.ds.data(), d16, q16, att,
                                   a16, B, T, C, NH, false);
         });
}

// Decoding is never dumped (a dump records training steps); its time goes to the profile.
// The rows cast once stay cast: rounding is element by element, so a row cast at an earlier token
// has the bits it would have now. Casting the whole cache at every token grows with the context:
// about 5 % of baby's bf16 decoding at T = 256 (x86-64-v3 build, bench/RESULTS.md), more at 1024.
void Model::attention_decode_bf16_fwd(float* out, const float* qkv, int l, int pos) const {
  const int C = cfg_.channels, NH = cfg_.heads;
  const size_t row = 3 * size_t(C);
  ProfileScope timer(profile_, "attention_decode_bf16");
  bf16* kv = b16_.kept.data() + size_t(l) * seq_ * row;
  int& cast = b16_.kv_rows[size_t(l)];
  kt_.cast_f32_to_bf16(kv + cast * row, qkv + cast * row, size_t(pos + 1 - cast) * row);
  cast = pos + 1;
  attention_decode_bf16(*b16_.weights_mm, out, b16_.dp.data(), b16_.ds.data(), kv, pos, C, NH);
}

}  // namespace reftrain
