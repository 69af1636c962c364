#include "core/optimizer.h"

#include "optim/adamw8bit.h"

namespace reftrain {

size_t quant_scale_count(const ParamLayout& layout) {
  return quant_blocks(layout.wd_end()) + quant_blocks(layout.total() - layout.wd_end());
}

size_t optimizer_state_bytes(Optimizer kind, const ParamLayout& layout) {
  if (kind == Optimizer::kAdamW) return 2 * layout.total() * sizeof(float);
  return 2 * (quant_words(layout.total()) * sizeof(uint32_t) +
              quant_scale_count(layout) * sizeof(float));
}

OptimizerState::OptimizerState(Optimizer kind, const ParamLayout& layout)
    : kind_(kind), wd_end_(layout.wd_end()), total_(layout.total()) {
  if (kind == Optimizer::kAdamW) {
    m_ = AlignedBuffer<float>(total_);
    v_ = AlignedBuffer<float>(total_);
  } else {
    m_codes_ = AlignedBuffer<uint32_t>(quant_words(total_));
    v_codes_ = AlignedBuffer<uint32_t>(quant_words(total_));
    m_scales_ = AlignedBuffer<float>(quant_scale_count(layout));
    v_scales_ = AlignedBuffer<float>(quant_scale_count(layout));
  }
}

GradStats OptimizerState::step(Model& model, const TrainConfig& train, float lr, int t) {
  const GradStats stats = finalize_grad_stats(reduce_norm_sq(model.grads(), total_), train.clip);
  const AdamWHyper hp{lr, train.beta1, train.beta2, train.eps, train.wd};
  update(model, {0, wd_end_, train.wd}, stats, hp, t);
  update(model, {wd_end_, total_ - wd_end_, 0.0f}, stats, hp, t);
  if (kind_ == Optimizer::kAdamW8bit) model.refresh_mirror();
  return stats;
}

void OptimizerState::update(Model& model, const Range& r, const GradStats& stats, AdamWHyper hp,
                            int t) {
  hp.wd = r.wd;
  float* w = model.weights() + r.begin;
  float* g = model.grads() + r.begin;
  if (kind_ == Optimizer::kAdamW8bit) {
    const size_t first_block = r.begin == 0 ? 0 : quant_blocks(wd_end_);
    adamw_8bit_update(w, g, m_codes_.data() + r.begin / 4, v_codes_.data() + r.begin / 4,
                      m_scales_.data() + first_block, v_scales_.data() + first_block, r.size, stats,
                      hp, t);
  } else if (model.precision() == Precision::kMixed) {
    adamw_update_f16(w, g, m_.data() + r.begin, v_.data() + r.begin, model.mirror() + r.begin,
                     r.size, stats, hp, t);
  } else {
    adamw_update(w, g, m_.data() + r.begin, v_.data() + r.begin, r.size, stats, hp, t);
  }
}

}  // namespace reftrain
