#include "core/model/model.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/base/rng.h"
#include "core/model/gpt2.h"
#include "core/model/llama.h"
#include "ops/attention.h"
#include "ops/linear.h"
#include "ops/loss.h"

namespace reftrain {

namespace {
// Elements of the largest f16 weight a product reads: what the eigen variant widens at once.
size_t widen_elems(const ParamLayout& layout, Precision precision, MatmulKind matmul) {
  if (precision != Precision::kMixed || matmul != MatmulKind::kEigen) return 0;
  size_t most = 0;
  for (const ParamTensor& t : layout.tensors()) {
    if (t.shape.size() == 2) most = std::max(most, t.numel);
  }
  return most;
}
}  // namespace

Model::Model(const ModelConfig& cfg, ParamLayout layout, const ModelOptions& o)
    : cfg_(cfg),
      layout_(std::move(layout)),
      precision_(o.precision),
      attention_(o.attention),
      kernels_(o.kernels),
      z_loss_(o.z_loss),
      w_(layout_.total()),
      g_(layout_.total()),
      w16_(o.precision == Precision::kMixed ? layout_.total() : 0),
      matmul_(o.matmul, 0, widen_elems(layout_, o.precision, o.matmul)) {
  if (o.kernels == Kernels::kReference &&
      (o.matmul != MatmulKind::kNaive || o.attention != AttentionKind::kMaterialised)) {
    throw std::invalid_argument(
        "reference kernels run the naive matmul and materialised attention");
  }
}

void Model::init_weights(uint64_t seed) {
  const CounterRng rng(seed, RngStream::kInit);
  const double residual_std = 0.02 / std::sqrt(2.0 * cfg_.layers);
  w_.zero();
  for (const ParamTensor& t : layout_.tensors()) {
    float* p = w_.data() + t.offset;
    if (t.init == ParamInit::kOnes || t.init == ParamInit::kZeros) {
      std::fill(p, p + t.numel, t.init == ParamInit::kOnes ? 1.0f : 0.0f);
      continue;
    }
    const double std_dev = t.init == ParamInit::kNormalResidual ? residual_std : 0.02;
    const size_t n = t.init_rows < 0 ? t.numel : t.numel / size_t(t.shape[0]) * size_t(t.init_rows);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(std_dev * rng.normal(t.offset + i));
  }
  refresh_mirror();
}

float Model::forward(const int32_t* inputs, const int32_t* targets, int B, int T) {
  last_ = {B, T, inputs, targets != nullptr};
  const float* res = embedding_forward(inputs, B, T);
  for (int l = 0; l < cfg_.layers; ++l) res = layer_forward(l, res, B, T);
  return head_forward(res, targets, B * T);
}

void Model::backward() {
  require_targets("Model::backward");
  const int B = last_.B, T = last_.T;
  float* dres = head_backward(B * T);
  for (int l = cfg_.layers - 1; l >= 0; --l) layer_backward(l, dres, B, T);
  embedding_backward(dres, last_.inputs, B, T);
}

void Model::require_targets(const char* who) const {
  if (!last_.has_targets)
    throw std::logic_error(std::string(who) + " needs a forward with targets");
}

void Model::refresh_mirror() {
  if (precision_ == Precision::kMixed) {
    pick(cast_f32_to_f16, cast_f32_to_f16_fast)(w16_.data(), w_.data(), w_.size());
  }
}

void Model::linear_fwd(float* out, const float* inp, const float* w, const float* b, int N, int K,
                       int O) const {
  if (precision_ == Precision::kMixed) {
    linear_forward(matmul_, out, inp, w16_.data() + (w - w_.data()), b, N, K, O);
  } else {
    linear_forward(matmul_, out, inp, w, b, N, K, O);
  }
}

void Model::linear_bwd(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, int N, int K, int O) const {
  if (precision_ == Precision::kMixed) {
    linear_backward(matmul_, dinp, dw, db, dout, inp, w16_.data() + (w - w_.data()), N, K, O);
  } else {
    linear_backward(matmul_, dinp, dw, db, dout, inp, w, N, K, O);
  }
}

void Model::attention_fwd(float* out, float* att, const float* qkv, int B, int T) const {
  if (attention_ == AttentionKind::kFused) {
    attention_forward_fast(out, att, qkv, B, T, cfg_.channels, cfg_.heads);
  } else {
    attention_forward(out, att, qkv, B, T, cfg_.channels, cfg_.heads);
  }
}

void Model::attention_bwd(float* dqkv, float* dp, const float* dout, const float* qkv,
                          const float* out, const float* att, int B, int T) const {
  if (attention_ == AttentionKind::kFused) {
    attention_backward_fast(dqkv, dout, qkv, out, att, B, T, cfg_.channels, cfg_.heads);
  } else {
    attention_backward(dqkv, dp, dout, qkv, att, B, T, cfg_.channels, cfg_.heads);
  }
}

float Model::mean_loss(float* losses, float* dlogits, const float* logits, const int32_t* targets,
                       int N) const {
  pick(crossentropy_forward_backward<float>, crossentropy_forward_backward_fast)(
      losses, dlogits, logits, targets, N, cfg_.vocab, cfg_.padded_vocab, 1.0f / float(N), z_loss_);
  double sum = 0.0;  // in position order
  for (int i = 0; i < N; ++i) sum += losses[i];
  return static_cast<float>(sum / N);
}

ParamLayout param_layout(const ModelConfig& cfg) {
  return cfg.arch == Arch::kLlama ? llama_param_layout(cfg) : gpt2_param_layout(cfg);
}

size_t attention_state_floats(const ModelConfig& cfg, AttentionKind kind, int B, int T) {
  const size_t rows = size_t(B) * cfg.heads * T;
  return kind == AttentionKind::kFused ? rows : rows * T;
}

size_t attention_scratch_floats(const ModelConfig& cfg, AttentionKind kind, int B, int T) {
  return kind == AttentionKind::kFused ? 0 : size_t(B) * cfg.heads * T;
}

size_t activation_floats(const ModelConfig& cfg, int B, int T, AttentionKind attention) {
  return cfg.arch == Arch::kLlama ? Llama::activation_floats(cfg, B, T, attention)
                                  : Gpt2::activation_floats(cfg, B, T, attention);
}

size_t matmul_workspace_bytes(const ModelConfig& cfg, Precision precision, MatmulKind matmul) {
  return Matmul::workspace_bytes(matmul, omp_get_max_threads(),
                                 widen_elems(param_layout(cfg), precision, matmul));
}

std::unique_ptr<Model> make_model(const ModelConfig& cfg, const ModelOptions& options) {
  if (cfg.arch == Arch::kLlama) return std::make_unique<Llama>(cfg, options);
  return std::make_unique<Gpt2>(cfg, options);
}

}  // namespace reftrain
