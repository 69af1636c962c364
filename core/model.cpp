#include "core/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/gpt2.h"
#include "core/llama.h"
#include "core/rng.h"
#include "ops/linear.h"
#include "ops/loss.h"

namespace reftrain {

Model::Model(const ModelConfig& cfg, ParamLayout layout, Precision precision, float z_loss)
    : cfg_(cfg),
      layout_(std::move(layout)),
      precision_(precision),
      z_loss_(z_loss),
      w_(layout_.total()),
      g_(layout_.total()),
      w16_(precision == Precision::kMixed ? layout_.total() : 0) {}

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

void Model::require_targets(const char* who) const {
  if (!last_.has_targets)
    throw std::logic_error(std::string(who) + " needs a forward with targets");
}

void Model::refresh_mirror() {
  if (precision_ == Precision::kMixed) cast_f32_to_f16(w16_.data(), w_.data(), w_.size());
}

void Model::linear_fwd(float* out, const float* inp, const float* w, const float* b, float* w_t,
                       int N, int K, int O) const {
  if (precision_ == Precision::kMixed) {
    linear_forward(out, inp, w16_.data() + (w - w_.data()), b, w_t, N, K, O);
  } else {
    linear_forward(out, inp, w, b, w_t, N, K, O);
  }
}

void Model::linear_bwd(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, float* w_t, int N, int K, int O) const {
  if (precision_ == Precision::kMixed && dinp) {
    cast_f16_to_f32(w_t, w16_.data() + (w - w_.data()), size_t(O) * K);
    w = w_t;
  }
  linear_backward(dinp, dw, db, dout, inp, w, N, K, O);
}

float Model::mean_loss(float* losses, float* dlogits, const float* logits, const int32_t* targets,
                       int N) const {
  crossentropy_forward_backward_fast(losses, dlogits, logits, targets, N, cfg_.vocab,
                                     cfg_.padded_vocab, 1.0f / float(N), z_loss_);
  double sum = 0.0;  // in position order
  for (int i = 0; i < N; ++i) sum += losses[i];
  return static_cast<float>(sum / N);
}

ParamLayout param_layout(const ModelConfig& cfg) {
  return cfg.arch == Arch::kLlama ? llama_param_layout(cfg) : gpt2_param_layout(cfg);
}

size_t activation_floats(const ModelConfig& cfg, int B, int T) {
  return cfg.arch == Arch::kLlama ? Llama::activation_floats(cfg, B, T)
                                  : Gpt2::activation_floats(cfg, B, T);
}

std::unique_ptr<Model> make_model(const ModelConfig& cfg, int B, int T, Precision precision,
                                  float z_loss) {
  if (cfg.arch == Arch::kLlama) return std::make_unique<Llama>(cfg, B, T, precision, z_loss);
  return std::make_unique<Gpt2>(cfg, B, T, precision, z_loss);
}

}  // namespace reftrain
