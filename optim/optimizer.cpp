#include "optim/optimizer.h"

#include "optim/adamw8bit.h"

namespace reftrain {

size_t quant_scale_count(size_t wd_end, size_t total) {
  return quant_blocks(wd_end) + quant_blocks(total - wd_end);
}

size_t optimizer_state_bytes(Optimizer kind, size_t wd_end, size_t total) {
  if (kind == Optimizer::kAdamW) return 2 * total * sizeof(float);
  return 2 *
         (quant_words(total) * sizeof(uint32_t) + quant_scale_count(wd_end, total) * sizeof(float));
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

// In the dump, reduce_norm_sq's result is the f32 a GPU's would be, and grad_stats is
// [grad_norm, clip], as the kernels bind them.
GradStats OptimizerState::step(float* w, float* g, f16* w16, const AdamWHyper& hp, float max_norm,
                               int t) {
  using D = KernelDump;
  const bool fast = kernels_ == Kernels::kFast;
  double norm_sq = 0.0;
  float result = 0.0f, stats_out[2] = {0.0f, 0.0f};
  dump_call(dump_, "optim", "reduce_norm_sq",
            {D::in("data", g, total_), D::out("result", &result, 1)}, [&] {
              norm_sq = fast ? reduce_norm_sq_fast(g, total_) : reduce_norm_sq(g, total_);
              result = static_cast<float>(norm_sq);
            });
  GradStats stats{};
  dump_call(dump_, "optim", "finalize_grad_stats",
            {D::in("norm_sq", &result, 1), D::out("grad_stats", stats_out, 2)}, [&] {
              stats = finalize_grad_stats(norm_sq, max_norm);
              stats_out[0] = stats.grad_norm, stats_out[1] = stats.clip;
            });
  update(w, g, w16, {0, wd_end_, hp.wd}, stats, hp, t);
  update(w, g, w16, {wd_end_, total_ - wd_end_, 0.0f}, stats, hp, t);
  if (kind_ == Optimizer::kAdamW8bit && w16) {
    dump_call(
        dump_, "optim", "cast_f32_to_f16", {D::in("src", w, total_), D::out("dst", w16, total_)},
        [&] { fast ? cast_f32_to_f16_fast(w16, w, total_) : cast_f32_to_f16(w16, w, total_); });
  }
  return stats;
}

void OptimizerState::update(float* w_all, float* g_all, f16* w16_all, const Range& r,
                            const GradStats& stats, AdamWHyper hp, int t) {
  using D = KernelDump;
  hp.wd = r.wd;
  const bool fast = kernels_ == Kernels::kFast;
  float* w = w_all + r.begin;
  float* g = g_all + r.begin;
  const float grad_stats[2] = {stats.grad_norm, stats.clip};
  const size_t n = r.size;
  if (kind_ == Optimizer::kAdamW8bit) {
    const size_t first_block = r.begin == 0 ? 0 : quant_blocks(wd_end_);
    uint32_t *mc = m_codes_.data() + r.begin / 4, *vc = v_codes_.data() + r.begin / 4;
    float *ms = m_scales_.data() + first_block, *vs = v_scales_.data() + first_block;
    const size_t bytes = (n + 3) / 4 * 4, blocks = quant_blocks(n);
    dump_call(dump_, "optim", "adamw_8bit_update",
              {D::io("w", w, n), D::io("g", g, n), D::io_codes("m_packed", mc, bytes),
               D::io_codes("v_packed", vc, bytes), D::io("m_scale", ms, blocks),
               D::io("v_scale", vs, blocks), D::in("grad_stats", grad_stats, 2)},
              [&] {
                (fast ? adamw_8bit_update_fast : adamw_8bit_update)(w, g, mc, vc, ms, vs, n, stats,
                                                                    hp, t);
              });
    return;
  }
  float *m = m_.data() + r.begin, *v = v_.data() + r.begin;
  const size_t call = dump_ ? dump_->begin("optim", w16_all ? "adamw_update_f16" : "adamw_update",
                                           {D::io("w", w, n), D::io("g", g, n), D::io("m", m, n),
                                            D::io("v", v, n), D::in("grad_stats", grad_stats, 2)})
                            : 0;
  if (dump_ && w16_all) dump_->begin_more(call, D::out("w16", w16_all + r.begin, n));
  if (w16_all) {
    (fast ? adamw_update_f16_fast : adamw_update_f16)(w, g, m, v, w16_all + r.begin, n, stats, hp,
                                                      t);
  } else {
    (fast ? adamw_update_fast : adamw_update)(w, g, m, v, n, stats, hp, t);
  }
  if (dump_) dump_->end(call);
}

}  // namespace reftrain
