// Checkpoints: one safetensors file per save, DIR/ckpt-<step, 8 digits>.safetensors, holding the
// fp32 weights under their ParamLayout names (loadable by PyTorch or numpy as they are), the
// optimizer state and, as metadata, everything a resumed run needs to continue bit-exactly:
// the step, the full configuration, the data source and position, the RNG and schedule state.
// docs/checkpoints.md documents the format. Saves are atomic (core/formats/atomic_file.h).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/formats/trace.h"
#include "core/model/model.h"
#include "core/train/config.h"
#include "core/train/data.h"
#include "optim/optimizer.h"

namespace reftrain {

constexpr const char* kCheckpointFormat = "reftrain-checkpoint";
constexpr int kCheckpointVersion = 1;

// Where a run's tokens came from; a resumed run reloads them and checks the hash.
struct DataSource {
  std::string kind;    // "text" or "llmc-tokens" (Dataset::kind)
  std::string source;  // the file or the fortunes directory, as the run named it (Dataset::source)
  std::string path;    // the same, absolute: where a resumed run reads it from
  uint64_t hash = 0;   // Dataset::hash
  TokenizerRecord tokenizer;  // what the ids mean (Dataset::tokenizer)
};

// Everything in a checkpoint besides the tensors.
struct CheckpointMeta {
  int64_t step = 0;     // steps done: the next is step + 1, reading batch `step`
  int64_t updates = 0;  // AdamW updates applied; < step when --skip-nonfinite skipped some
  std::string preset, init;
  ModelConfig model;
  TrainConfig train;
  DataSource data;
  int save_every = 0;  // the saving policy a resumed run continues with
  int keep = 0;
  // The validation loss at `step`, for a `best` checkpoint (metadata "val_loss"); NaN when the
  // checkpoint was not saved as one.
  float val_loss = std::numeric_limits<float>::quiet_NaN();
};

// A checkpoint read back and validated: its metadata and every tensor it must hold.
struct Checkpoint {
  std::string path;
  CheckpointMeta meta;
  SafetensorsFile file;
};

// The model's shape as JSON, floats exact both ways: the "config"."model" metadata of a
// checkpoint (the training values are core/train/run_config.h's train_config_json).
Json model_config_json(const ModelConfig& model);

std::string checkpoint_file_name(int64_t step);  // "ckpt-00000020.safetensors"
// The checkpoints in `dir` as (step, path), oldest first; other files are ignored.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

// An exclusive lock on a checkpoint directory, held while the object lives: flock on the
// directory itself, so the kernel drops it when the process ends, even by SIGKILL, and nothing
// is left in the directory. A default-constructed lock holds nothing.
class DirLock {
 public:
  DirLock() = default;
  // A usage error naming the holder's pid when another process holds the lock.
  explicit DirLock(const std::string& dir);
  DirLock(DirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  DirLock& operator=(DirLock&& other) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();

 private:
  int fd_ = -1;
};

// Makes `dir` ready for a run that starts after step `start_step`: creates it, locks it (a
// second run into the same directory is a usage error naming the first one's pid), then removes
// the .tmp files of saves that were killed, and checks that a file can be created there (an
// input error naming the directory otherwise). A directory holding checkpoints after
// `start_step` is a usage error: they belong to another run (or to this one's future), and
// mixing the two would make --resume DIR pick the wrong one. The run keeps the returned lock
// for its lifetime.
[[nodiscard]] DirLock prepare_checkpoint_dir(const std::string& dir, int64_t start_step);

// Writes DIR/checkpoint_file_name(meta.step) atomically and returns its path. `run` (the trace's
// run line) is stored for people to read. Set REFTRAIN_DEBUG_SAVE_PAUSE=SECONDS to make the save
// pause between the fsynced temporary file and its rename (tests kill the process there).
std::string save_checkpoint(const std::string& dir, const CheckpointMeta& meta, const Json& run,
                            Model& model, OptimizerState& optimizer);

// Reads `path`, or the newest checkpoint in it when it is a directory, and validates it: the
// format and version, the config, the name, dtype and shape of every weight and optimizer tensor
// the config implies, that every weight is finite, the optimizer state free of NaN (v and the
// 8-bit scales not negative), and each tensor's CRC-32C where the file stores them. Problems are
// input errors naming the file; for a directory whose newest checkpoint is damaged, the message
// also names the newest one that reads.
Checkpoint read_checkpoint(const std::string& path);

// Copy the checkpoint's weights into a model made from its config (refreshing the fp16
// mirror: it is not stored, since it is f16(clamp(w)) of the weights), and its optimizer state
// into an OptimizerState made from its config.
void restore_model(const Checkpoint& ckpt, Model& model);
void restore_optimizer(const Checkpoint& ckpt, OptimizerState& optimizer);

// The subdirectory of a run's --out directory that keeps its best checkpoint (the lowest
// validation loss so far): DIR/best/ckpt-<step>.safetensors, alone there once saved, so that
// read_checkpoint("DIR/best") reads it as it reads any checkpoint directory.
constexpr const char* kBestDir = "best";
// Removes every checkpoint of `dir` but `path`.
void keep_only_checkpoint(const std::string& dir, const std::string& path);

// Removes all but the newest `keep` checkpoints of `dir` (keep 0 keeps all).
void prune_checkpoints(const std::string& dir, int keep);

}  // namespace reftrain
