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

class OptimizerState {
 public:
  // Zero state (m = v = 0) for every tensor of `layout`.
  OptimizerState(Optimizer kind, const ParamLayout& layout);

  // One step at t ≥ 1 with learning rate lr: updates the weights (and the mirror) of `model`
  // from its gradients, then leaves the gradients zeroed.
  GradStats step(Model& model, const TrainConfig& train, float lr, int t);

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
