// What one `reftrain train` invocation runs: a fresh run from its flags, or a resumed one from
// its checkpoint (docs/checkpoints.md). The command line parses the flags into a RunRequest;
// plan_run turns it into the run's model, training values, data and checkpoint policy, with a
// one-line usage error for a request that cannot be run.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dist/comm.h"
#include "core/formats/trace.h"
#include "core/train/checkpoint.h"
#include "core/train/config.h"
#include "core/train/data.h"
#include "core/train/trainer.h"

namespace reftrain {

// The flags of a run, parsed. An input file given with an empty name is a usage error when the
// plan reads it; `resume` and `out` are "" when not given (the command line refuses them empty).
struct RunRequest {
  std::string preset = kDefaultPreset;
  bool preset_given = false;
  std::optional<std::string> data, data_tokens, init_from, tokenizer;
  // `--tokenizer auto` (train's default): a fresh run on text with no tokenizer given and no
  // weights to start from reads it with auto_tokenizer's (core/train/data.h); a resumed run
  // with its checkpoint's. Off: bytes, as `golden run` reads.
  bool auto_tokenizer = false;
  std::string resume;  // the checkpoint (a file, or a directory: its newest) to continue
  std::string out;     // the checkpoint directory
  std::optional<int> steps, save_every, keep, stop_after;
  // The model's shape over the preset's (a fresh run from scratch only: --init-from's file and
  // a resumed checkpoint set their own).
  std::optional<int> layers, heads, channels, max_seq;
  bool grad_accum_given = false;
  int ranks = 1;
  // The command line's training values over `base` (a preset's or a checkpoint's), with
  // grad_accum per rank as --grad-accum gives it.
  std::function<TrainConfig(const TrainConfig& base)> configure;
};

struct RunPlan {
  std::string preset, init;
  ModelConfig model;
  TrainConfig train;  // grad_accum: the step's micro-batches on all ranks
  Dataset data;
  std::string data_path;             // data.source, absolute (checkpoints record it)
  std::string init_from;             // weights to start from ("" = the seed's)
  std::unique_ptr<Checkpoint> ckpt;  // resumed: where the run continues from
  int start = 0;                     // steps already done
  int stop = 0;                      // the last step this invocation takes
  std::string out;                   // checkpoint directory ("" = none)
  int save_every = 0, keep = 0;
};

// The run `r` asks for. Rank 0 reads the data first, so a token cache it writes is there for
// the others to read.
RunPlan plan_run(const RunRequest& r, Comm& comm);

// Weights and optimizer state: from the checkpoint, a Hugging Face model, an llm.c file, or
// the seed (what the Trainer starts with).
void initialise(Trainer& trainer, RunPlan& p);

// Every rank must train the same run on the same data: each compares its run line (model,
// training values, data hash, ...) with rank 0's; an input error names a rank that differs.
// So must what decides when the ranks save together (--out given or not, --save-every, --keep,
// --stop-after, the step resumed from): a usage error names the rank and the flag.
void check_ranks_agree(Comm& comm, const Json& run, const RunPlan& p);

// The trace file's first lines: a fresh run's run line; a resumed run's continues the trace it
// was written to (continued_trace), then says where it resumed. `dropped_line`: the torn last
// line of that trace which was left out, or 0.
std::vector<Json> trace_head(const std::string& path, const Json& run, const RunPlan& p,
                             size_t& dropped_line);

}  // namespace reftrain
