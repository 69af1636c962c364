// llm.c's GPT-2 checkpoint (train_gpt2.py write_model, version 3 = fp32): int32 header[256]
// with [0] magic 20240326, [1] version 3, [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp; then
// every parameter as fp32 in llm.c's order: wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw,
// attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb (per-layer ones stacked over L).
#pragma once

#include <string>

#include "core/model/model_config.h"
#include "core/model/param_layout.h"

namespace reftrain {

// Reads and validates the header (magic, version, sizes, file length); input error otherwise.
ModelConfig read_llmc_config(const std::string& path);

// Loads the weights of a checkpoint whose header gave `cfg` into the mega-buffer `w` laid out
// by `layout` (gpt2). Input error on a short read or a non-finite weight.
void load_llmc_weights(const std::string& path, const ModelConfig& cfg, const ParamLayout& layout,
                       float* w);

}  // namespace reftrain
