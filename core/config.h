// Model and training configuration, and the named presets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/matmul.h"
#include "optim/schedule.h"

namespace reftrain {

enum class Arch { kGpt2, kLlama };
// fp32: everything in fp32. mixed: the matmuls that read a weight read its fp16 mirror,
// widened to f32 at load; activations, gradients and the optimizer stay fp32.
enum class Precision { kFp32, kMixed };
// adamw: fp32 m and v. adamw8bit: m and v as 8-bit codes with one fp32 scale per 256 elements.
enum class Optimizer { kAdamW, kAdamW8bit };
// fused: online softmax, only the row logsumexp [B,NH,T] kept for the backward (ops/
// attention_fused.h). materialised: the reference, keeping the probabilities [B,NH,T,T].
enum class AttentionKind { kFused, kMaterialised };

struct ModelConfig {
  Arch arch = Arch::kGpt2;
  int layers = 0;        // L
  int heads = 0;         // NH
  int channels = 0;      // C
  int max_seq = 0;       // maxT: rows of the position table, the longest T a run may use
  int vocab = 0;         // V: token ids are < V
  int padded_vocab = 0;  // Vp ≥ V: rows of wte, rounded up for alignment (llm.c pads to 64·k)
  int ffn = 0;           // llama: F, the SwiGLU hidden width (gpt2 uses 4C)
  double rope_theta = 10000.0;  // llama: RoPE base
};

struct TrainConfig {
  int batch = 0;  // B
  int seq = 0;    // T
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

const char* arch_name(Arch a);
const char* precision_name(Precision p);
const char* optimizer_name(Optimizer o);
const char* attention_name(AttentionKind a);
const char* schedule_name(Schedule s);

// Checks the values a user can set (B, T ≤ maxT, rates, ...); a usage error names the first
// bad one and the fix.
void validate(const ModelConfig& model, const TrainConfig& train);

}  // namespace reftrain
