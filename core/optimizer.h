// The optimizer half of a training step over the mega-buffers, in seed 004's pipeline order:
// reduce_norm_sq → finalize_grad_stats → one update dispatch on the weight-decay range and one on
// the no-decay range. The update kernel depends on the run:
//   adamw,     fp32:   adamw_update
//   adamw,     mixed:  adamw_update_f16 (the fp16 mirror written in the same pass)
//   adamw8bit, fp32:   adamw_8bit_update
//   adamw8bit, mixed:  adamw_8bit_update, then a cast_f32_to_f16 pass (the seed's 8-bit kernel
//                      has no mirror binding)
#pragma once

#include <cstdint>

#include "core/buffer.h"
#include "core/config.h"
#include "core/model.h"
#include "optim/adamw.h"

namespace reftrain {

// Bytes of optimizer state per mega-buffer slot, and in total for a layout.
size_t optimizer_state_bytes(Optimizer kind, const ParamLayout& layout);
// adamw8bit: fp32 scales per moment, one per 256-element block of the wd range, then of the
// no-wd range (each range starts a block).
size_t quant_scale_count(const ParamLayout& layout);

class OptimizerState {
 public:
  // Zero state (m = v = 0) for every tensor of `layout`.
  OptimizerState(Optimizer kind, const ParamLayout& layout);

  // One step at t ≥ 1 with learning rate lr: updates the weights (and the mirror) of `model`
  // from its gradients, then leaves the gradients zeroed.
  GradStats step(Model& model, const TrainConfig& train, float lr, int t);

  // The state itself, for checkpoints (core/checkpoint.h). adamw: m and v, fp32 in the layout
  // of w. adamw8bit: m_codes and v_codes, one byte per element of w (4 per uint32, element 4i+j
  // in byte j), and m_scales and v_scales, one per 256-element block: the wd range's blocks,
  // then the no-wd range's. The buffers of the other kind are empty.
  Optimizer kind() const { return kind_; }
  AlignedBuffer<float>& m() { return m_; }
  AlignedBuffer<float>& v() { return v_; }
  AlignedBuffer<uint32_t>& m_codes() { return m_codes_; }
  AlignedBuffer<uint32_t>& v_codes() { return v_codes_; }
  AlignedBuffer<float>& m_scales() { return m_scales_; }
  AlignedBuffer<float>& v_scales() { return v_scales_; }

 private:
  struct Range {
    size_t begin, size;  // in mega-buffer elements; begin is a multiple of 4
    float wd;
  };
  void update(Model& model, const Range& r, const GradStats& stats, AdamWHyper hp, int t);

  Optimizer kind_;
  size_t wd_end_, total_;
  AlignedBuffer<float> m_, v_;                 // adamw: fp32 moments, layout of w
  AlignedBuffer<uint32_t> m_codes_, v_codes_;  // adamw8bit: 4 codes per word, layout of w
  AlignedBuffer<float> m_scales_, v_scales_;   // adamw8bit: wd range's blocks, then no-wd's
};

}  // namespace reftrain
