#include "optim/optimizer.h"

#include "optim/adamw8bit.h"

namespace reftrain {

size_t quant_scale_count(size_t wd_end, size_t total) {
  return quant_blocks(wd_end) + quant_blocks(total - wd_end);
}

size_t optimizer_state_bytes(Optimizer kind, size_t wd_end, size_t total) {
  if (kind == Optimizer::kAdamW) return 2 * total * sizeof(float);
  return 2 * (quant_words(total) * sizeof(uint32_t) +
              quant_scale_count(wd_end, total) * sizeof(float));
}

OptimizerState::OptimizerState(Optimizer kind, size_t wd_end, size_t total, Kernels kernels)
    : kind_(kind), kernels_(kernels), wd_end_(wd_end), total_(total) {
  if (kind == Optimizer::kAdamW) {
    m_ = AlignedBuffer<float>(total_);
    v_ = AlignedBuffer<float>(total_);
  } else {
    m_codes_ = AlignedBuffer<uint32_t>(quant_words(total_));
    v_codes_ = AlignedBuffer<uint32_t>(quant_words(total_));
    m_scales_ = AlignedBuffer<float>(quant_scale_count(wd_end_, total_));
    v_scales_ = AlignedBuffer<float>(quant_scale_count(wd_end_, total_));
  }
}

GradStats OptimizerState::step(float* w, float* g, f16* w16, const AdamWHyper& hp,
                               float max_norm, int t) {
  const bool fast = kernels_ == Kernels::kFast;
  const double norm_sq = fast ? reduce_norm_sq_fast(g, total_) : reduce_norm_sq(g, total_);
  const GradStats stats = finalize_grad_stats(norm_sq, max_norm);
  update(w, g, w16, {0, wd_end_, hp.wd}, stats, hp, t);
  update(w, g, w16, {wd_end_, total_ - wd_end_, 0.0f}, stats, hp, t);
  if (kind_ == Optimizer::kAdamW8bit && w16) {
    fast ? cast_f32_to_f16_fast(w16, w, total_) : cast_f32_to_f16(w16, w, total_);
  }
  return stats;
}

void OptimizerState::update(float* w_all, float* g_all, f16* w16_all, const Range& r,
                            const GradStats& stats, AdamWHyper hp, int t) {
  hp.wd = r.wd;
  const bool fast = kernels_ == Kernels::kFast;
  float* w = w_all + r.begin;
  float* g = g_all + r.begin;
  if (kind_ == Optimizer::kAdamW8bit) {
    const size_t first_block = r.begin == 0 ? 0 : quant_blocks(wd_end_);
    uint32_t *mc = m_codes_.data() + r.begin / 4, *vc = v_codes_.data() + r.begin / 4;
    float *ms = m_scales_.data() + first_block, *vs = v_scales_.data() + first_block;
    (fast ? adamw_8bit_update_fast : adamw_8bit_update)(w, g, mc, vc, ms, vs, r.size, stats, hp,
                                                        t);
  } else if (w16_all) {
    (fast ? adamw_update_f16_fast : adamw_update_f16)(w, g, m_.data() + r.begin,
                                                      v_.data() + r.begin, w16_all + r.begin,
                                                      r.size, stats, hp, t);
  } else {
    (fast ? adamw_update_fast : adamw_update)(w, g, m_.data() + r.begin, v_.data() + r.begin,
                                              r.size, stats, hp, t);
  }
}

}  // namespace reftrain
