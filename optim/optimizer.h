// The optimizer half of a training step over the mega-buffers, in the GPU pipeline's order:
// reduce_norm_sq → finalize_grad_stats → one update dispatch on the weight-decay range [0,
// wd_end) and one on the no-decay range [wd_end, total). The update kernel depends on the run
// (the precision decides which mirror of the weights the forward reads, and the step writes it):
//   adamw,     fp32:   adamw_update
//   adamw,     mixed:  adamw_update_f16 (the fp16 mirror written in the same pass)
//   adamw,     bf16:   adamw_update_bf16 (the bf16 mirror written in the same pass)
//   adamw,     bf16-pure: adamw_update_bf16_sr (the new weight rounded to bf16 stochastically,
//                      into the mirror and back into w)
//   adamw,     bf16-kahan: adamw_update_bf16_kahan (the step added to the bf16 weight with a
//                      compensation the state keeps, rounded to nearest, into the mirror and w)
//   adamw8bit, fp32:   adamw_8bit_update
//   adamw8bit, mixed:  adamw_8bit_update, then a cast_f32_to_f16 pass (the GPU's 8-bit kernel
//                      has no mirror binding)
//   adamw8bit, bf16:   adamw_8bit_update, then a cast_f32_to_bf16 pass (likewise)
//   adamw8bit, bf16-pure, bf16-kahan: not run (the run's options refuse it)
// Either way the mirror has the same bits: a fused mirror rounds as the cast does.
// Kernels::kFast runs each kernel's `_fast` version, kReference its plain scalar reference; the
// two give the same bits (optim/adamw.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/bf16.h"
#include "ops/cast.h"
#include "ops/kernel_dump.h"
#include "ops/kernels.h"
#include "optim/adamw.h"
#include "optim/kernel_table.h"
#include "optim/zero_shard.h"
#include "simd/aligned_buffer.h"

namespace reftrain {

// adamw: fp32 m and v. adamw8bit: m and v as 8-bit codes with one fp32 scale per 256 elements.
enum class Optimizer { kAdamW, kAdamW8bit };

// How a step rounds weights that are bf16 values only (no fp32 master): stochastically
// (bf16-pure, adamw_update_bf16_sr) or to nearest with a Kahan compensation (bf16-kahan,
// adamw_update_bf16_kahan). kNone: the weights are fp32, and a bf16 mirror is their rounding.
enum class Bf16Rounding { kNone, kStochastic, kKahan };

// The weights' forward mirror a step writes, over the whole mega-buffer: the fp16 one (mixed
// precision), the bf16 one (bf16, bf16-pure and bf16-kahan), or none (fp32, both null). At most
// one is set. With bf16 weights only (rounding not kNone) the step writes each new weight into
// wb16 and its widening back into w; the stochastic rounding's noise is keyed by `seed`.
struct WeightMirror {
  f16* w16 = nullptr;
  bf16* wb16 = nullptr;
  Bf16Rounding rounding = Bf16Rounding::kNone;
  uint32_t seed = 0;
};

// The stochastic rounding's seed of a run: its 64-bit seed folded to 32 bits (low ^ high).
inline uint32_t stochastic_seed(uint64_t seed) {
  return uint32_t(seed) ^ uint32_t(seed >> 32);
}

// adamw8bit: fp32 scales per moment, one per 256-element block of the wd range, then of the
// no-wd range (each range starts a block).
size_t quant_scale_count(size_t wd_end, size_t total);
// Bytes of optimizer state for `total` mega-buffer slots, or for the part of them in `shard`;
// `kahan`: with bf16-kahan's compensation.
size_t optimizer_state_bytes(Optimizer kind, size_t wd_end, size_t total, bool kahan = false);
size_t optimizer_state_bytes(Optimizer kind, size_t wd_end, const Shard& shard, bool kahan = false);

class OptimizerState {
 public:
  // Zero state (m = v = 0) for a mega-buffer of `total` floats whose first `wd_end` decay: all
  // of it, or (ZeRO-1, optim/zero_shard.h) only the elements of `shard`, which starts on a block
  // boundary. `kahan` (adamw only): with a zero compensation too, for bf16-kahan's steps.
  OptimizerState(Optimizer kind, size_t wd_end, size_t total, Kernels kernels = Kernels::kFast);
  OptimizerState(Optimizer kind, size_t wd_end, size_t total, Kernels kernels, Shard shard,
                 bool kahan = false);

  // One step at t ≥ 1 of a state that holds the whole buffer: updates w (and the mirror, when
  // one is set) from g with hp (hp.wd is the wd range's decay; the no-wd range uses 0) after
  // clipping the global norm to max_norm (0 = off), then leaves g zeroed.
  GradStats step(float* w, float* g, WeightMirror mirror, const AdamWHyper& hp, float max_norm,
                 int t);
  // The update alone, on this state's shard, with the step's norm already known: w and the
  // mirror hold the whole buffer, g the gradient from element g_begin on (covering the shard);
  // the shard's g is left zeroed and only the shard's part of the mirror is written. step() is
  // the norm, then apply() with g_begin 0.
  void apply(float* w, float* g, size_t g_begin, WeightMirror mirror, const GradStats& stats,
             const AdamWHyper& hp, int t);
  const Shard& shard() const { return shard_; }
  // adamw8bit: the index, among all the buffer's block scales, of this shard's first.
  size_t first_scale() const { return quant_scale_index(shard_.begin, wd_end_); }
  // Records every kernel call of the following steps into `dump` as layer `optim` (null: off).
  void set_dump(KernelDump* dump) { dump_ = dump; }

  // The state itself, for checkpoints. adamw: m and v, fp32 in the layout of w. adamw8bit:
  // m_codes and v_codes, one byte per element of w (4 per uint32, element 4i+j in byte j), and
  // m_scales and v_scales, one per 256-element block: the wd range's blocks, then the no-wd
  // range's. The buffers of the other kind are empty. kahan: bf16-kahan's compensation, bf16 in
  // the layout of w (empty without). A sharded state holds the shard's part: elements (and code
  // bytes) from shard().begin, scales from first_scale().
  Optimizer kind() const { return kind_; }
  bool has_kahan() const { return kahan_; }
  AlignedBuffer<float>& m() { return m_; }
  AlignedBuffer<float>& v() { return v_; }
  AlignedBuffer<bf16>& kahan() { return compensation_; }
  const AlignedBuffer<bf16>& kahan() const { return compensation_; }
  // bf16-kahan: the compensation from `whole` (the whole mega-buffer's; this state's shard of
  // it), what rounding the initial weights to bf16 lost (Model::refresh_mirror's `lost`).
  void start_kahan(const bf16* whole);
  AlignedBuffer<uint32_t>& m_codes() { return m_codes_; }
  AlignedBuffer<uint32_t>& v_codes() { return v_codes_; }
  AlignedBuffer<float>& m_scales() { return m_scales_; }
  AlignedBuffer<float>& v_scales() { return v_scales_; }

 private:
  struct Range {
    size_t begin, size;  // in mega-buffer elements; begin is a multiple of 4
    float wd;
  };
  void update(float* w, float* g, size_t g_begin, WeightMirror mirror, const Range& r,
              const GradStats& stats, AdamWHyper hp, int t);
  // adamw8bit: the cast of the shard's new weights into the mirror (the 8-bit kernel writes none).
  void cast_mirror(const float* w, WeightMirror mirror);

  Optimizer kind_;
  KernelTable kt_;  // the column of the kernels it runs
  size_t wd_end_, total_;
  Shard shard_;                 // the elements this state holds: [0, total) unless sharded
  AlignedBuffer<float> m_, v_;  // adamw: fp32 moments, layout of w
  AlignedBuffer<uint32_t> m_codes_, v_codes_;  // adamw8bit: 4 codes per word, layout of w
  AlignedBuffer<float> m_scales_, v_scales_;   // adamw8bit: wd range's blocks, then no-wd's
  bool kahan_;
  AlignedBuffer<bf16> compensation_;  // bf16-kahan: layout of w
  KernelDump* dump_ = nullptr;
};

}  // namespace reftrain
