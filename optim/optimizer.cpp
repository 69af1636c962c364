#include "optim/optimizer.h"

#include <algorithm>
#include <stdexcept>

#include "optim/adamw8bit.h"

namespace reftrain {

size_t quant_scale_count(size_t wd_end, size_t total) {
  return quant_blocks(wd_end) + quant_blocks(total - wd_end);
}

size_t optimizer_state_bytes(Optimizer kind, size_t wd_end, size_t total, bool kahan) {
  return optimizer_state_bytes(kind, wd_end, Shard{0, total}, kahan);
}

size_t optimizer_state_bytes(Optimizer kind, size_t wd_end, const Shard& shard, bool kahan) {
  if (kind == Optimizer::kAdamW) return shard.size() * (2 * sizeof(float) + kahan * sizeof(bf16));
  const size_t scales =
      quant_scale_index(shard.end, wd_end) - quant_scale_index(shard.begin, wd_end);
  return 2 * (quant_words(shard.size()) * sizeof(uint32_t) + scales * sizeof(float));
}

OptimizerState::OptimizerState(Optimizer kind, size_t wd_end, size_t total, Kernels kernels)
    : OptimizerState(kind, wd_end, total, kernels, Shard{0, total}) {}

OptimizerState::OptimizerState(Optimizer kind, size_t wd_end, size_t total, Kernels kernels,
                               Shard shard, bool kahan)
    : kind_(kind),
      kt_(kernel_table(kernels)),
      wd_end_(wd_end),
      total_(total),
      shard_(shard),
      kahan_(kahan) {
  const size_t n = shard_.size();
  if (kahan && kind != Optimizer::kAdamW) {
    throw std::logic_error("adamw8bit has no Kahan-compensated update (bf16-kahan)");
  }
  if (kind == Optimizer::kAdamW) {
    m_ = AlignedBuffer<float>(n);
    v_ = AlignedBuffer<float>(n);
    if (kahan) compensation_ = AlignedBuffer<bf16>(n);  // zeroed: +0 in every element
  } else {
    const size_t scales = quant_scale_index(shard_.end, wd_end_) - first_scale();
    m_codes_ = AlignedBuffer<uint32_t>(quant_words(n));
    v_codes_ = AlignedBuffer<uint32_t>(quant_words(n));
    m_scales_ = AlignedBuffer<float>(scales);
    v_scales_ = AlignedBuffer<float>(scales);
  }
}

void OptimizerState::start_kahan(const bf16* whole) {
  if (!kahan_) throw std::logic_error("start_kahan: a state without a compensation");
  std::copy(whole + shard_.begin, whole + shard_.end, compensation_.data());
}

// In the dump, reduce_norm_sq's result is the f32 a GPU's would be, and grad_stats is
// [grad_norm, clip], as the kernels bind them.
GradStats OptimizerState::step(float* w, float* g, WeightMirror mirror, const AdamWHyper& hp,
                               float max_norm, int t) {
  if (shard_.begin != 0 || shard_.end != total_) {
    throw std::logic_error("OptimizerState::step: a sharded state takes apply()");
  }
  double norm_sq = 0.0;
  float result = 0.0f, stats_out[2] = {0.0f, 0.0f};
  dump_call(dump_, "optim", "reduce_norm_sq", {g, &result}, {{"n", total_}}, [&] {
    norm_sq = kt_.reduce_norm_sq(g, total_);
    result = static_cast<float>(norm_sq);
  });
  GradStats stats{};
  dump_call(dump_, "optim", "finalize_grad_stats", {&result, stats_out}, {}, [&] {
    stats = finalize_grad_stats(norm_sq, max_norm);
    stats_out[0] = stats.grad_norm, stats_out[1] = stats.clip;
  });
  apply(w, g, 0, mirror, stats, hp, t);
  return stats;
}

void OptimizerState::apply(float* w, float* g, size_t g_begin, WeightMirror mirror,
                           const GradStats& stats, const AdamWHyper& hp, int t) {
  const Range ranges[2] = {{0, wd_end_, hp.wd}, {wd_end_, total_ - wd_end_, 0.0f}};
  const bool whole = shard_.begin == 0 && shard_.end == total_;
  for (const Range& r : ranges) {  // each range's part in the shard (a whole state: the range)
    const size_t begin = std::max(r.begin, shard_.begin);
    const size_t end = std::min(r.begin + r.size, shard_.end);
    if (whole || begin < end) {
      update(w, g, g_begin, mirror, {begin, end - begin, r.wd}, stats, hp, t);
    }
  }
  if (kind_ == Optimizer::kAdamW8bit) cast_mirror(w, mirror);
}

// In a dump, after the two update calls, as a GPU runs the cast: one dispatch over the shard.
void OptimizerState::cast_mirror(const float* w, WeightMirror mirror) {
  const float* src = w + shard_.begin;
  const size_t n = shard_.size();
  if (mirror.w16) {
    f16* dst = mirror.w16 + shard_.begin;
    dump_call(dump_, "optim", "cast_f32_to_f16", {src, dst}, {{"n", n}},
              [&] { kt_.cast_f32_to_f16(dst, src, n); });
  } else if (mirror.wb16) {
    bf16* dst = mirror.wb16 + shard_.begin;
    dump_call(dump_, "optim", "cast_f32_to_bf16", {dst, src}, {{"n", n}},
              [&] { kt_.cast_f32_to_bf16(dst, src, n); });
  }
}

// r lies in the shard and in one range; the state's buffers start at the shard's first element.
// hp, bias and t are uniforms on a GPU: the dump binds none of them.
void OptimizerState::update(float* w_all, float* g_all, size_t g_begin, WeightMirror mirror,
                            const Range& r, const GradStats& stats, AdamWHyper hp, int t) {
  hp.wd = r.wd;
  const size_t at = r.begin - shard_.begin;  // r's first element in the state's buffers
  float* w = w_all + r.begin;
  float* g = g_all + (r.begin - g_begin);
  const float grad_stats[2] = {stats.grad_norm, stats.clip};
  const size_t n = r.size;
  if (kind_ == Optimizer::kAdamW8bit) {
    if (mirror.rounding != Bf16Rounding::kNone) {
      throw std::logic_error("adamw8bit has no update for bf16-only weights (bf16-pure, -kahan)");
    }
    const size_t first_block = quant_scale_index(r.begin, wd_end_) - first_scale();
    uint32_t *mc = m_codes_.data() + at / 4, *vc = v_codes_.data() + at / 4;
    float *ms = m_scales_.data() + first_block, *vs = v_scales_.data() + first_block;
    dump_call(dump_, "optim", "adamw_8bit_update",
              {w, g, mc, vc, ms, vs, grad_stats, nullptr, nullptr, nullptr}, {{"size", n}},
              [&] { kt_.adamw_8bit_update(w, g, mc, vc, ms, vs, n, stats, hp, t); });
    return;
  }
  float *m = m_.data() + at, *v = v_.data() + at;
  if ((mirror.rounding == Bf16Rounding::kKahan) != kahan_) {
    throw std::logic_error("a bf16-kahan step needs a state with its compensation, and only it");
  }
  if (mirror.rounding == Bf16Rounding::kKahan) {
    bf16* wb16 = mirror.wb16 + r.begin;
    bf16* comp = compensation_.data() + at;
    dump_call(dump_, "optim", "adamw_update_bf16_kahan",
              {w, g, m, v, grad_stats, nullptr, nullptr, nullptr, wb16, comp}, {{"size", n}},
              [&] { kt_.adamw_update_bf16_kahan(w, g, m, v, wb16, comp, n, stats, hp, t); });
  } else if (mirror.rounding == Bf16Rounding::kStochastic) {
    bf16* wb16 = mirror.wb16 + r.begin;
    dump_call(dump_, "optim", "adamw_update_bf16_sr",
              {w, g, m, v, grad_stats, nullptr, nullptr, nullptr, wb16}, {{"size", n}}, [&] {
                kt_.adamw_update_bf16_sr(w, g, m, v, wb16, n, stats, hp, t, mirror.seed, r.begin);
              });
  } else if (mirror.w16) {
    f16* w16 = mirror.w16 + r.begin;
    dump_call(dump_, "optim", "adamw_update_f16",
              {w, g, m, v, grad_stats, nullptr, nullptr, nullptr, w16}, {{"size", n}},
              [&] { kt_.adamw_update_f16(w, g, m, v, w16, n, stats, hp, t); });
  } else if (mirror.wb16) {
    bf16* wb16 = mirror.wb16 + r.begin;
    dump_call(dump_, "optim", "adamw_update_bf16",
              {w, g, m, v, grad_stats, nullptr, nullptr, nullptr, wb16}, {{"size", n}},
              [&] { kt_.adamw_update_bf16(w, g, m, v, wb16, n, stats, hp, t); });
  } else {
    dump_call(dump_, "optim", "adamw_update", {w, g, m, v, grad_stats, nullptr, nullptr, nullptr},
              {{"size", n}}, [&] { kt_.adamw_update(w, g, m, v, n, stats, hp, t); });
  }
}

}  // namespace reftrain
