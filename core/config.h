// Model and training configuration, and the named presets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/schedule.h"

namespace reftrain {

enum class Arch { kGpt2 };

struct ModelConfig {
  Arch arch = Arch::kGpt2;
  int layers = 0;        // L
  int heads = 0;         // NH
  int channels = 0;      // C
  int max_seq = 0;       // maxT: rows of the position table, the longest T a run may use
  int vocab = 0;         // V: token ids are < V
  int padded_vocab = 0;  // Vp ≥ V: rows of wte, rounded up for alignment (llm.c pads to 64·k)
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
const char* schedule_name(Schedule s);

// Checks the values a user can set (B, T ≤ maxT, rates, ...); a usage error names the first
// bad one and the fix.
void validate(const ModelConfig& model, const TrainConfig& train);

}  // namespace reftrain
