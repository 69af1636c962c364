// Hugging Face transformers models, both ways: a directory holding config.json and
// model.safetensors, as `save_pretrained` writes it, for GPT2LMHeadModel (the gpt2 family) and
// LlamaForCausalLM (the llama family). reftrain's tensor names are already HF's (nanoGPT kept
// GPT-2's); what differs is the layout: GPT-2's Conv1D stores a matrix [in, out] where reftrain
// stores [out, in], and the vocabulary tables hold V rows in HF, Vp (padded) in reftrain. One
// table per family (hf.cpp) drives import and export. docs/formats.md has the table and what
// is refused.
#pragma once

#include <string>

#include "core/formats/trace.h"
#include "core/model/model_config.h"
#include "core/model/param_layout.h"

namespace reftrain {

constexpr const char* kHfConfigFile = "config.json";
constexpr const char* kHfWeightsFile = "model.safetensors";

// True when PATH names a Hugging Face model for --init-from: a directory, or a file whose name
// ends in ".safetensors" (its config.json beside it). Anything else is an llm.c checkpoint.
bool is_hf_model_path(const std::string& path);

// The model shape that config.json (in DIR, or beside FILE.safetensors) describes; the padded
// vocabulary is V rounded up to a multiple of 64, as llm.c pads it. Anything reftrain cannot
// compute exactly (another norm eps, grouped-query attention, rope_scaling, a tied llama or
// untied gpt2 head, another activation, biases in llama) is an input error naming the key and
// its value.
ModelConfig read_hf_config(const std::string& path);

// Checks the header of PATH's weights against `cfg` (every tensor present with its shape and a
// dtype reftrain reads, none unknown) without reading their data: called before a model of
// `cfg` is allocated. The same input errors as load_hf_weights.
void check_hf_weights(const std::string& path, const ModelConfig& cfg);

// Loads the weights of PATH, whose config.json gave `cfg`, into the mega-buffer `w` laid out by
// `layout`: Conv1D matrices transposed, the V rows of a vocabulary table into the first V of
// its Vp (the padding rows zero). F32, F16 and BF16 convert to f32 exactly. The "transformer."
// prefix of GPT-2 names may be absent; GPT-2's causal-mask buffers (attn.bias,
// attn.masked_bias) and llama's rotary inv_freq are skipped; a GPT-2 lm_head.weight must equal
// wte. Input errors name the file and the tensor: missing, another shape or dtype, one reftrain
// has no place for, a non-finite weight.
void load_hf_weights(const std::string& path, const ModelConfig& cfg, const ParamLayout& layout,
                     float* w);

// config.json for `cfg`: model_type, architectures, the shape keys, torch_dtype float32. The
// tokenizer's keys (bos/eos token ids) are the tokenizer writer's to add.
Json hf_config_json(const ModelConfig& cfg);
// DIR/config.json, atomically.
void write_hf_config(const std::string& dir, const Json& config);
// DIR/model.safetensors, atomically: every weight of `w` (laid out by `layout`) under HF's name
// and layout, F32, only the V real rows of a vocabulary table, with the {"format": "pt"}
// metadata transformers expects.
void write_hf_weights(const std::string& dir, const ModelConfig& cfg, const ParamLayout& layout,
                      const float* w);

}  // namespace reftrain
