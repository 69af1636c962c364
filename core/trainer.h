// One training run: the model, its optimizer state, the data samplers, and the step that ties
// forward, backward, clipping and AdamW together (seed 004's pipeline order). The command line
// (apps/) drives it and does the printing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/config.h"
#include "core/data.h"
#include "core/model.h"
#include "core/optimizer.h"
#include "core/trace.h"
#include "optim/schedule.h"

namespace reftrain {

struct StepResult {
  int step;    // 1-based: step k ends with the k-th update
  float loss;  // forward loss before this step's update
  float lr;
  float grad_norm;  // before clipping
  float clip;
  double ms;  // wall time of the whole step
};

// Bytes a run needs: w, g, m, v (4 fp32 per parameter slot) plus the activation arena.
struct MemoryEstimate {
  size_t params;       // parameters, padding excluded
  size_t param_bytes;  // w + g + m + v, padding included
  size_t arena_bytes;  // activations and backward scratch at (B, T), matmul workspace included
  size_t total() const { return param_bytes + arena_bytes; }
};
MemoryEstimate estimate_memory(const ModelConfig& model, int B, int T, Precision precision,
                               Optimizer optimizer, AttentionKind attention = AttentionKind::kFused,
                               MatmulKind matmul = MatmulKind::kBlocked);

class Trainer {
 public:
  // Takes ownership of the data; checks token ids against the vocabulary and that each split
  // fills a batch. Weights start from init_weights(train.seed).
  Trainer(const ModelConfig& model, const TrainConfig& train, Dataset data);

  Model& model() { return *model_; }
  const Dataset& data() const { return data_; }
  const TrainConfig& train_config() const { return train_; }
  // The batch the last step() or validate() filled: inputs and targets, [B,T] row-major each.
  const std::vector<int32_t>& batch_inputs() const { return inputs_; }
  const std::vector<int32_t>& batch_targets() const { return targets_; }

  // Step k (0-based): batch k, forward, backward, global-norm clip, AdamW on the wd and no-wd
  // ranges at t = k + 1 with lr from the schedule.
  StepResult step(int k);
  // The trace's first line: preset, every model and training value, seed, data source and hash,
  // optimizer, init, build flags, version.
  Json describe(const std::string& preset, const std::string& init) const;
  // Mean loss over train.val_batches fixed batches of the val split (the same every call).
  float validate();
  // n tokens sampled from the model after `prompt` (token ids), temperature-scaled softmax,
  // one CounterRng(seed, kSample) draw per token.
  std::vector<int32_t> sample(const std::vector<int32_t>& prompt, int n, float temperature,
                              uint64_t seed);

 private:
  TrainConfig train_;
  Dataset data_;
  std::unique_ptr<Model> model_;
  OptimizerState optimizer_;
  std::vector<int32_t> inputs_, targets_;
  BatchSampler train_batches_, val_batches_;
  LrSchedule schedule_;
};

}  // namespace reftrain
