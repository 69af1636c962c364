// Model and training configuration, and the named presets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/names.h"
#include "core/model/model_config.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace reftrain {

// The most micro-batches one optimizer step may accumulate (--grad-accum).
constexpr int kMaxGradAccum = 1 << 16;

struct TrainConfig {
  int batch = 0;       // B
  int seq = 0;         // T
  int grad_accum = 1;  // K: micro-batches of B×T per optimizer step (K·B·T tokens per step)
  int steps = 0;
  float lr = 0, min_lr = 0, wd = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float clip = 1.0f;  // max global grad norm, 0 = off
  int warmup = 0;
  Schedule schedule = Schedule::kCosine;
  uint64_t seed = 1337;
  int val_every = 0;    // 0 = only at the end
  int val_batches = 0;  // batches averaged for one validation loss
  float z_loss = 0.0f;  // z in loss = CE + z·mean(lse²)
  Precision precision = Precision::kFp32;
  Optimizer optimizer = Optimizer::kAdamW;
  AttentionKind attention = AttentionKind::kFused;
  MatmulKind matmul = MatmulKind::kBlocked;  // the linear layers' GEMM variant (ops/matmul.h)
  Kernels kernels = Kernels::kFast;          // every kernel's reference, or the fast versions
};

struct Preset {
  std::string name;
  std::string summary;
  ModelConfig model;
  TrainConfig train;
};

const std::vector<Preset>& presets();
// The preset named `name`; a usage error listing the known names otherwise.
const Preset& find_preset(const std::string& name);
constexpr const char* kDefaultPreset = "laptop";

template <>
struct EnumNames<Optimizer> {
  static constexpr NamedValue<Optimizer> values[] = {{Optimizer::kAdamW, "adamw"},
                                                     {Optimizer::kAdamW8bit, "adamw8bit"}};
};
template <>
struct EnumNames<Schedule> {
  static constexpr NamedValue<Schedule> values[] = {{Schedule::kCosine, "cosine"},
                                                    {Schedule::kConstant, "constant"}};
};

// Tokens one optimizer step trains on: K·B·T.
inline long long tokens_per_step(const TrainConfig& t) {
  return (long long)t.grad_accum * t.batch * t.seq;
}

// The options a model instance of this run is built with.
ModelOptions model_options(const TrainConfig& train);
// bf16's attention products need the probabilities (ops/attention_bf16.h), so a bf16 run runs
// the materialised attention: sets train.attention so in bf16, or throws usage_error when the
// user asked for another (`attention_given`).
void settle_bf16_attention(TrainConfig& train, bool attention_given);

// Checks the values a user can set (B, T ≤ maxT, rates, ...); a usage error names the first
// bad one and the fix.
void validate(const ModelConfig& model, const TrainConfig& train);

}  // namespace reftrain
