// One training run: the model, its optimizer state, the data samplers, and the step that ties
// forward, backward, clipping and AdamW together (the GPU pipeline's order). The run's loop
// (core/train/run.h) drives it; the command line (apps/) does the printing.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/base/memory.h"
#include "core/dist/comm.h"
#include "core/formats/trace.h"
#include "core/model/model.h"
#include "core/train/config.h"
#include "core/train/data.h"
#include "core/train/data_parallel.h"
#include "core/train/sample.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "simd/aligned_buffer.h"

namespace reftrain {

struct StepResult {
  int step;    // 1-based: step k ends with the k-th update
  float loss;  // forward loss before this step's update (the mean over its K micro-batches)
  float lr;
  float grad_norm;  // before clipping
  float clip;
  double ms;             // wall time of the whole step
  bool skipped = false;  // the loss was not finite: no backward, no update (grad_norm, clip NaN)
};

// Bytes one process (one rank) of a run needs: w, g, m, v (4 fp32 per parameter slot; a fifth,
// the gradient sum, with --grad-accum above 1) plus the activation arena. On N ranks each keeps
// 1/N of the optimizer state (m, v) and a window of the gradient sum, plus one round's N parts of
// that window (core/train/data_parallel.h).
struct MemoryEstimate {
  size_t params;       // parameters, padding excluded
  size_t param_bytes;  // w + g + optimizer state + gradient sum, padding included
  size_t state_bytes;  // of which the optimizer state (m and v, or 8-bit codes and scales;
                       // bf16-kahan: and the compensation)
  size_t arena_bytes;  // activations and backward scratch at (B, T), matmul workspace included
  size_t total() const { return param_bytes + arena_bytes; }
};
MemoryEstimate estimate_memory(const ModelConfig& model, const TrainConfig& train, int ranks = 1);
// Refuses a run whose estimate exceeds the memory available (`limit`, see available_memory()):
// an input error naming both, thrown before anything large is allocated, where the kernel's
// OOM killer would otherwise end the run silently (exit 137). A limit of 0 bytes checks nothing.
// `fix` is the advice that ends the message (what the command can lower).
void check_memory(const MemoryEstimate& need, const MemoryLimit& limit,
                  const std::string& fix = "use a smaller --batch or --seq");

// One validation may read the val split at most kValRereads times over (nanoGPT's shakespeare
// recipe reads its split ~30 times), or kMinValBatchesBound batches, whichever is more: a
// crafted checkpoint's val_batches (2^20 passes the type's bound) would otherwise make a resumed
// run validate for days. An input error naming the bound otherwise.
constexpr size_t kValRereads = 64, kMinValBatchesBound = 100;
void check_val_batches(const Dataset& data, const TrainConfig& train);

class Trainer {
 public:
  // Takes ownership of the data; checks token ids against the vocabulary and that each split
  // fills a batch. Weights start from init_weights(train.seed). With several ranks in `comm`,
  // each step's train.grad_accum micro-batches are spread over them (MicroBatches::split:
  // a usage error when they cannot be); the optimizer state is this rank's shard.
  Trainer(const ModelConfig& model, const TrainConfig& train, Dataset data,
          Comm& comm = Comm::self());

  Model& model() { return *model_; }
  const Dataset& data() const { return data_; }
  const TrainConfig& train_config() const { return train_; }
  // The batch the last step() or validate() filled: inputs and targets, [B,T] row-major each.
  const std::vector<int32_t>& batch_inputs() const { return inputs_; }
  const std::vector<int32_t>& batch_targets() const { return targets_; }

  // After the model's weights were loaded (--init-from): their mirror, and in bf16-kahan, where
  // they become bf16 values, the compensation from what that rounding lost.
  void weights_loaded();
  // This rank's optimizer state: all of it, or its shard when data parallel.
  OptimizerState& optimizer() { return optimizer_; }
  const OptimizerState& optimizer() const { return optimizer_; }
  // The whole state for a checkpoint, which every rank must ask for together: null on one
  // process (optimizer() is whole) and on ranks other than 0; rank 0's gathered copy otherwise.
  std::unique_ptr<OptimizerState> gather_optimizer();
  Comm& comm() { return comm_; }
  // Several ranks: the exchange (for its traffic and time); null on one process.
  const DataParallel* data_parallel() const { return dp_.get(); }
  // AdamW updates applied so far: the next one runs at t = updates() + 1. Equal to the steps
  // taken unless steps were skipped; a resumed run sets it from its checkpoint.
  int64_t updates() const { return updates_; }
  void set_updates(int64_t n) { updates_ = n; }

  // Step k (0-based): micro-batches k·K .. k·K+K-1 (K = grad_accum; K = 1: batch k), each a
  // forward and a backward scaled by 1/(K·B·T), their gradients summed in micro-batch order
  // (on several ranks: micro-batch k·K + j·N + rank in round j, the same sum);
  // then global-norm clip and AdamW on the wd and no-wd ranges at t = updates() + 1 with lr from
  // the schedule. The step's loss is the mean of the K losses. A loss that is not finite skips
  // the rest of the step and the update (the result says `skipped`); the caller decides whether
  // to stop.
  StepResult step(int k);
  // The trace's first line: preset, every model and training value, seed, data source and hash,
  // optimizer, init, build flags, version.
  Json describe(const std::string& preset, const std::string& init) const;
  // Mean loss over train.val_batches fixed batches of the val split (the same every call; on
  // several ranks, batch i runs on rank i mod N and the losses are added in batch order).
  float validate();
  // Tokens sampled from the model after `prompt` (token ids) as core/train/sample.h describes
  // (temperature, top-k, one CounterRng(seed, kSample) draw per token), with a window of T.
  std::vector<int32_t> sample(const std::vector<int32_t>& prompt, const SampleOptions& options,
                              const std::function<void(int32_t)>& on_token = {});

 private:
  TrainConfig train_;
  MicroBatches micro_batches_;  // checked before anything large is allocated
  Comm& comm_;
  Dataset data_;
  std::unique_ptr<Model> model_;
  OptimizerState optimizer_;
  std::vector<int32_t> inputs_, targets_;
  BatchSampler train_batches_, val_batches_;
  LrSchedule schedule_;
  AlignedBuffer<float> grad_sum_;     // K > 1: the micro-batch gradients' sum, layout of w
  std::unique_ptr<DataParallel> dp_;  // several ranks: the exchange and this rank's shards
  int64_t updates_ = 0;

  // Sets the weights by set(lost) (Model::init_weights or refresh_mirror, whose `lost` is null
  // unless bf16-kahan) and starts bf16-kahan's compensation from what their rounding lost.
  void adopt_weights(const std::function<void(bf16* lost)>& set);

  // Forward and backward of step k's K micro-batches; returns the mean of their losses.
  float accumulate_micro_batches(int k);
  // The same on several ranks: this rank's share of them, summed across ranks.
  float data_parallel_micro_batches(int k);
  GradStats data_parallel_update(const AdamWHyper& hp);
};

}  // namespace reftrain
