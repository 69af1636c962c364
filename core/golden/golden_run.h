// A golden run directory: everything a GPU backend needs to replay a training run without
// reftrain, and what it should get (docs/golden-format.md):
//   config.json              every model, optimizer and schedule value (the lr of every step),
//                            the RoPE convention, the seed, the data source
//   init.safetensors         the initial weights by tensor name; the mega-buffer layout (name,
//                            shape, offset, decay) in its metadata
//   batches.safetensors      inputs and targets of every step, int32 [steps, B, T]
//   trace.jsonl              per step: loss, z-loss part, grad_norm, clip, lr
//   debug_state.safetensors  step 1's inputs, targets, logits, loss and every parameter gradient
//                            (before clipping and the update), as llm.c's debug state
//   build.json               the build that wrote it (the only file that names the build)
// Every file but build.json is a pure function of the command line: the same bytes from any
// build, thread count or run.
#pragma once

#include <string>

#include "core/train/config.h"
#include "core/train/data.h"

namespace reftrain {

// Trains `steps` steps of `preset` (with `train`'s overrides applied by the caller) on `data`
// and writes the directory `out_dir` (created if missing; its files overwritten). With
// dump_step K ≥ 1 it also writes step-K.safetensors: every kernel call of step K with its
// inputs and outputs (ops/kernel_dump.h).
void write_golden_run(const Preset& preset, const TrainConfig& train, Dataset data,
                      const std::string& out_dir, int dump_step = 0);

}  // namespace reftrain
