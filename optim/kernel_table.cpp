#include "optim/kernel_table.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace reftrain {

namespace {

// The backward references under their slots' signature, whose `accumulate` false means "write
// the gradient": the references keep the records' += and get it literally, the gradient zeroed
// and then added into (the fast kernels get the same bits without the zeroing pass).
void zero_unless(bool accumulate, float* p, size_t n) {
  if (!accumulate) std::fill(p, p + n, 0.0f);
}

void gelu_backward_reference(float* dx, const float* x, const float* dout, size_t n,
                             bool accumulate) {
  zero_unless(accumulate, dx, n);
  gelu_backward(dx, x, dout, n);
}

void gelu_erf_backward_reference(float* dx, const float* x, const float* dout, size_t n,
                                 bool accumulate) {
  zero_unless(accumulate, dx, n);
  gelu_erf_backward(dx, x, dout, n);
}

void swiglu_backward_reference(float* dgate, float* dup, const float* dout, const float* gate,
                               const float* up, size_t n, bool accumulate) {
  zero_unless(accumulate, dgate, n), zero_unless(accumulate, dup, n);
  swiglu_backward(dgate, dup, dout, gate, up, n);
}

void residual_backward_reference(float* da, float* db, const float* dout, size_t n,
                                 bool accumulate) {
  zero_unless(accumulate, da, n), zero_unless(accumulate, db, n);
  residual_backward(da, db, dout, n);
}

void rope_backward_reference(float* dx, const float* dout, int B, int T, int NH, int hs,
                             double theta, int t0, bool accumulate) {
  zero_unless(accumulate, dx, size_t(B) * T * NH * hs);
  rope_backward(dx, dout, B, T, NH, hs, theta, t0);
}

void attention_backward_materialised(float* dqkv, float* dp, const float* dout, const float* qkv,
                                     const float*, const float* att, int B, int T, int C, int NH,
                                     bool accumulate) {
  zero_unless(accumulate, dqkv, size_t(B) * T * 3 * C);
  attention_backward(dqkv, dp, dout, qkv, att, B, T, C, NH);
}

void attention_backward_fused(float* dqkv, float*, const float* dout, const float* qkv,
                              const float* out, const float* lse, int B, int T, int C, int NH,
                              bool accumulate) {
  attention_backward_fast(dqkv, dout, qkv, out, lse, B, T, C, NH, AttentionSplit::kAuto,
                          accumulate);
}

}  // namespace

KernelTable reference_kernels() {
  KernelTable t;
  t.column = Kernels::kReference;
  t.matmul = MatmulKind::kNaive;
  t.attention = AttentionKind::kMaterialised;
  t.bf16 = Bf16Path::kReference;
  t.embed_forward = embed_forward<float>;
  t.embed_backward = embed_backward<float>;
  t.token_embed_forward = token_embed_forward<float>;
  t.token_embed_backward = token_embed_backward<float>;
  t.layernorm_forward = layernorm_forward<float>;
  t.layernorm_backward = layernorm_backward<float>;
  t.rmsnorm_forward = rmsnorm_forward<float>;
  t.rmsnorm_backward = rmsnorm_backward<float>;
  t.rope_forward = rope_forward<float>;
  t.rope_backward = rope_backward_reference;
  t.attention_forward = attention_forward<float>;
  t.attention_backward = attention_backward_materialised;
  t.attention_decode = attention_decode<float>;
  t.gelu_forward = gelu_forward<float>;
  t.gelu_backward = gelu_backward_reference;
  t.gelu_erf_forward = gelu_erf_forward<float>;
  t.gelu_erf_backward = gelu_erf_backward_reference;
  t.swiglu_forward = swiglu_forward<float>;
  t.swiglu_backward = swiglu_backward_reference;
  t.crossentropy_forward_backward = crossentropy_forward_backward<float>;
  t.residual_forward = residual_forward<float>;
  t.residual_backward = residual_backward_reference;
  t.cast_f32_to_f16 = cast_f32_to_f16;
  t.cast_f32_to_bf16 = cast_f32_to_bf16;
  t.cast_bf16_to_f32 = cast_bf16_to_f32;
  t.reduce_norm_sq = reduce_norm_sq;
  t.norm_sq_partials = norm_sq_partials;
  t.adamw_update = adamw_update;
  t.adamw_update_f16 = adamw_update_f16;
  t.adamw_update_bf16 = adamw_update_bf16;
  t.adamw_update_bf16_sr = adamw_update_bf16_sr;
  t.adamw_update_bf16_kahan = adamw_update_bf16_kahan;
  t.adamw_8bit_update = adamw_8bit_update;
  return t;
}

KernelTable fast_kernels(MatmulKind matmul, AttentionKind attention) {
  KernelTable t = reference_kernels();
  t.column = Kernels::kFast;
  t.matmul = matmul;
  t.attention = attention;
  t.bf16 = bf16_best_path();
  t.embed_forward = embed_forward_fast;
  t.embed_backward = embed_backward_fast;
  t.token_embed_forward = token_embed_forward_fast;
  t.token_embed_backward = token_embed_backward_fast;
  t.layernorm_forward = layernorm_forward_fast;
  t.layernorm_backward = layernorm_backward_fast;
  t.rmsnorm_forward = rmsnorm_forward_fast;
  t.rmsnorm_backward = rmsnorm_backward_fast;
  t.rope_forward = rope_forward_fast;
  t.rope_backward = rope_backward_fast;
  if (attention == AttentionKind::kFused) {
    t.attention_forward = attention_forward_fast<float>;
    t.attention_backward = attention_backward_fused;
    t.attention_decode = attention_decode_fast<float>;
  }
  t.gelu_forward = gelu_forward_fast;
  t.gelu_backward = gelu_backward_fast;
  t.gelu_erf_forward = gelu_erf_forward_fast;
  t.gelu_erf_backward = gelu_erf_backward_fast;
  t.swiglu_forward = swiglu_forward_fast;
  t.swiglu_backward = swiglu_backward_fast;
  t.crossentropy_forward_backward = crossentropy_forward_backward_fast;
  t.residual_forward = residual_forward_fast;
  t.residual_backward = residual_backward_fast;
  t.cast_f32_to_f16 = cast_f32_to_f16_fast;
  t.cast_f32_to_bf16 = cast_f32_to_bf16_fast;
  t.cast_bf16_to_f32 = cast_bf16_to_f32_fast;
  t.reduce_norm_sq = reduce_norm_sq_fast;
  t.norm_sq_partials = norm_sq_partials_fast;
  t.adamw_update = adamw_update_fast;
  t.adamw_update_f16 = adamw_update_f16_fast;
  t.adamw_update_bf16 = adamw_update_bf16_fast;
  t.adamw_update_bf16_sr = adamw_update_bf16_sr_fast;
  t.adamw_update_bf16_kahan = adamw_update_bf16_kahan_fast;
  t.adamw_8bit_update = adamw_8bit_update_fast;
  return t;
}

KernelTable kernel_table(Kernels column, MatmulKind matmul, AttentionKind attention) {
  if (column == Kernels::kFast) return fast_kernels(matmul, attention);
  if (matmul != MatmulKind::kNaive || attention != AttentionKind::kMaterialised) {
    throw std::invalid_argument(
        "reference kernels run the naive matmul and materialised attention");
  }
  return reference_kernels();
}

KernelTable kernel_table(Kernels column) {
  return column == Kernels::kFast ? fast_kernels() : reference_kernels();
}

const std::vector<KernelRecord>& kernel_records() {
  static const std::vector<KernelRecord> all = [] {
    std::vector<KernelRecord> v;
    for (auto family : {embed_records, norm_records, linear_records, linear_bf16_records,
                        rope_records, attention_records, attention_bf16_records, activation_records,
                        loss_records, residual_records, cast_records, cast_bf16_records,
                        grad_norm_records, adamw_records, adamw_8bit_records, grad_accum_records}) {
      for (KernelRecord& r : family()) v.push_back(std::move(r));
    }
    return v;
  }();
  return all;
}

const KernelRecord& kernel_record(const std::string& name) {
  static const std::map<std::string, const KernelRecord*> by_name = [] {
    std::map<std::string, const KernelRecord*> m;
    for (const KernelRecord& r : kernel_records()) m[r.name] = &r;
    return m;
  }();
  const auto it = by_name.find(name);
  if (it == by_name.end()) throw std::logic_error("no kernel record named " + name);
  return *it->second;
}

}  // namespace reftrain
