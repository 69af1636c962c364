#include "core/formats/hf.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <type_traits>
#include <vector>

#include "core/base/error.h"
#include "core/base/json_depth.h"
#include "core/formats/atomic_file.h"
#include "core/formats/input_file.h"
#include "core/formats/safetensors.h"
#include "core/model/model.h"
#include "ops/cast.h"

namespace reftrain {

namespace {

namespace fs = std::filesystem;

// ---- the name table: one per family, read by import and export -------------------------------

// How HF stores a tensor relative to reftrain's ParamLayout entry of the same name.
enum class HfLayout {
  kSame,        // as reftrain stores it
  kTransposed,  // GPT-2's Conv1D (y = x·W + b): W is [in, out], reftrain's is [out, in]
  kVocabRows,   // [V, C]: the first V of reftrain's Vp rows; the padding rows are not stored
  kBuffer,      // not a parameter (a causal mask, RoPE frequencies): skipped, never written
  kTiedHead,    // GPT-2's lm_head.weight, tied to wte: when present it must equal wte
};

struct HfName {
  const char* name;  // HF's name, which is also reftrain's; "{l}" stands for the layer
  HfLayout layout;
};

constexpr HfName kGpt2Names[] = {
    {"transformer.wte.weight", HfLayout::kVocabRows},
    {"transformer.wpe.weight", HfLayout::kSame},
    {"transformer.h.{l}.ln_1.weight", HfLayout::kSame},
    {"transformer.h.{l}.ln_1.bias", HfLayout::kSame},
    {"transformer.h.{l}.attn.c_attn.weight", HfLayout::kTransposed},
    {"transformer.h.{l}.attn.c_attn.bias", HfLayout::kSame},
    {"transformer.h.{l}.attn.c_proj.weight", HfLayout::kTransposed},
    {"transformer.h.{l}.attn.c_proj.bias", HfLayout::kSame},
    {"transformer.h.{l}.ln_2.weight", HfLayout::kSame},
    {"transformer.h.{l}.ln_2.bias", HfLayout::kSame},
    {"transformer.h.{l}.mlp.c_fc.weight", HfLayout::kTransposed},
    {"transformer.h.{l}.mlp.c_fc.bias", HfLayout::kSame},
    {"transformer.h.{l}.mlp.c_proj.weight", HfLayout::kTransposed},
    {"transformer.h.{l}.mlp.c_proj.bias", HfLayout::kSame},
    {"transformer.ln_f.weight", HfLayout::kSame},
    {"transformer.ln_f.bias", HfLayout::kSame},
    {"lm_head.weight", HfLayout::kTiedHead},
    {"transformer.h.{l}.attn.bias", HfLayout::kBuffer},         // the causal mask (older files)
    {"transformer.h.{l}.attn.masked_bias", HfLayout::kBuffer},  // the mask's fill value
};

constexpr HfName kLlamaNames[] = {
    {"model.embed_tokens.weight", HfLayout::kVocabRows},
    {"model.layers.{l}.input_layernorm.weight", HfLayout::kSame},
    {"model.layers.{l}.self_attn.q_proj.weight", HfLayout::kSame},
    {"model.layers.{l}.self_attn.k_proj.weight", HfLayout::kSame},
    {"model.layers.{l}.self_attn.v_proj.weight", HfLayout::kSame},
    {"model.layers.{l}.self_attn.o_proj.weight", HfLayout::kSame},
    {"model.layers.{l}.post_attention_layernorm.weight", HfLayout::kSame},
    {"model.layers.{l}.mlp.gate_proj.weight", HfLayout::kSame},
    {"model.layers.{l}.mlp.up_proj.weight", HfLayout::kSame},
    {"model.layers.{l}.mlp.down_proj.weight", HfLayout::kSame},
    {"model.norm.weight", HfLayout::kSame},
    {"lm_head.weight", HfLayout::kVocabRows},
    {"model.layers.{l}.self_attn.rotary_emb.inv_freq", HfLayout::kBuffer},  // older files
};

struct HfTensor {
  std::string name;
  HfLayout layout;
};

// The family's table with "{l}" expanded for every layer, in table order.
std::vector<HfTensor> hf_tensors(const ModelConfig& cfg) {
  std::vector<HfTensor> out;
  const auto add = [&](const HfName* begin, const HfName* end) {
    for (const HfName* n = begin; n != end; ++n) {
      const std::string name = n->name;
      const size_t at = name.find("{l}");
      if (at == std::string::npos) {
        out.push_back({name, n->layout});
        continue;
      }
      for (int l = 0; l < cfg.layers; ++l) {
        out.push_back({name.substr(0, at) + std::to_string(l) + name.substr(at + 3), n->layout});
      }
    }
  };
  if (cfg.arch == Arch::kGpt2) {
    add(std::begin(kGpt2Names), std::end(kGpt2Names));
  } else {
    add(std::begin(kLlamaNames), std::end(kLlamaNames));
  }
  return out;
}

// The shape HF stores a parameter in, from reftrain's.
std::vector<int64_t> hf_shape(const ParamTensor& p, HfLayout layout, int vocab) {
  std::vector<int64_t> s(p.shape.begin(), p.shape.end());
  if (layout == HfLayout::kTransposed) std::swap(s[0], s[1]);
  if (layout == HfLayout::kVocabRows) s[0] = vocab;
  return s;
}

// ---- config.json --------------------------------------------------------------------------------

// config.json's values, each checked as it is read; errors name the file, the key and the value.
class HfConfigReader {
 public:
  HfConfigReader(nlohmann::json j, std::string file) : j_(std::move(j)), file_(std::move(file)) {}

  int integer(const char* key, int lo, int hi) const {
    if (!j_.contains(key)) throw input_error(file_ + " has no " + key);
    const nlohmann::json& v = j_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      throw input_error(file_ + ": " + key + " " + value(key) + " is not an integer in [" +
                        std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return int(v.get<int64_t>());
  }
  double real_or(const char* key, double fallback) const {
    if (!j_.contains(key) || j_.at(key).is_null()) return fallback;
    if (!j_.at(key).is_number())
      throw input_error(file_ + ": " + key + " " + value(key) + " is not a number");
    return j_.at(key).get<double>();
  }
  // A key reftrain computes with one value only: absent (HF's default `fallback` applies) or
  // equal to `want`; otherwise an input error saying why.
  template <typename T>
  void require(const char* key, const T& fallback, const T& want, const std::string& why) const {
    T got = fallback;
    if (j_.contains(key) && !j_.at(key).is_null()) {
      const nlohmann::json& v = j_.at(key);
      const bool typed = std::is_same<T, bool>::value     ? v.is_boolean()
                         : std::is_same<T, double>::value ? v.is_number()
                         : std::is_same<T, int>::value    ? v.is_number_integer()
                                                          : v.is_string();
      if (!typed) throw input_error(file_ + ": " + key + " " + value(key) + " " + why);
      got = v.get<T>();
    }
    if (!(got == want)) {
      const std::string shown =
          j_.contains(key) ? value(key) : nlohmann::json(fallback).dump() + " (the default)";
      throw input_error(file_ + ": " + key + " " + shown + " " + why);
    }
  }
  // A key that must be absent or null.
  void require_null(const char* key, const std::string& why) const {
    if (j_.contains(key) && !j_.at(key).is_null()) {
      throw input_error(file_ + ": " + key + " " + value(key) + " " + why);
    }
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_string()) {
      throw input_error(file_ + ": " + key + " " + value(key) + " is not a string");
    }
    return j_.at(key).get<std::string>();
  }
  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  std::string value(const char* key) const {
    const std::string s = j_.at(key).dump();
    return s.size() > 60 ? s.substr(0, 60) + "..." : s;
  }
  const std::string& file() const { return file_; }

 private:
  nlohmann::json j_;
  std::string file_;
};

ModelConfig gpt2_config(const HfConfigReader& c) {
  ModelConfig m;
  m.arch = Arch::kGpt2;
  m.layers = c.integer("n_layer", 1, 1024);
  m.heads = c.integer("n_head", 1, 1024);
  m.channels = c.integer("n_embd", 1, 1 << 16);
  m.max_seq = c.integer("n_positions", 1, 1 << 20);
  m.vocab = c.integer("vocab_size", 1, 1 << 20);
  c.require("layer_norm_epsilon", 1e-5, 1e-5, "is not 1e-5, the eps of reftrain's LayerNorm");
  // gelu_pytorch_tanh is the same tanh formula as gelu_new, computed by PyTorch's kernel; "gelu"
  // is the exact erf form.
  const std::string act = c.string_or("activation_function", "gelu_new");
  if (act == "gelu") {
    m.activation = Activation::kGeluErf;
  } else if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    throw input_error(c.file() + ": activation_function " + c.value("activation_function") +
                      " is not gelu_new or gelu, the tanh and erf GELUs reftrain computes");
  }
  if (c.has("n_inner")) {
    c.require("n_inner", 0, 4 * m.channels, "is not 4·n_embd, reftrain's MLP width");
  }
  c.require("tie_word_embeddings", true, true,
            "unties the head, which reftrain's gpt2 ties to wte");
  c.require("scale_attn_weights", true, true, "turns off the 1/sqrt(head size) reftrain applies");
  c.require("scale_attn_by_inverse_layer_idx", false, false,
            "scales attention by layer, which reftrain does not");
  c.require("add_cross_attention", false, false, "adds cross-attention, which reftrain has not");
  return m;
}

ModelConfig llama_config(const HfConfigReader& c) {
  ModelConfig m;
  m.arch = Arch::kLlama;
  m.layers = c.integer("num_hidden_layers", 1, 1024);
  m.heads = c.integer("num_attention_heads", 1, 1024);
  m.channels = c.integer("hidden_size", 1, 1 << 16);
  m.ffn = c.integer("intermediate_size", 1, 1 << 20);
  m.max_seq = c.integer("max_position_embeddings", 1, 1 << 20);
  m.vocab = c.integer("vocab_size", 1, 1 << 20);
  m.rope_theta = c.real_or("rope_theta", 10000.0);
  if (!(m.rope_theta > 0) || !std::isfinite(m.rope_theta)) {
    throw input_error(c.file() + ": rope_theta " + c.value("rope_theta") + " is not positive");
  }
  c.require("num_key_value_heads", m.heads, m.heads,
            "differs from num_attention_heads: grouped-query attention, which reftrain has not");
  c.require("rms_norm_eps", 1e-6, 1e-5, "is not 1e-5, the eps of reftrain's RMSNorm");
  c.require_null("rope_scaling", "is set; reftrain computes plain RoPE only");
  c.require("tie_word_embeddings", false, false, "ties the head, which reftrain's llama unties");
  c.require("attention_bias", false, false, "adds biases, which reftrain's llama has not");
  c.require("mlp_bias", false, false, "adds biases, which reftrain's llama has not");
  c.require<std::string>("hidden_act", "silu", "silu",
                         "is not silu, the SwiGLU gate reftrain computes");
  if (c.has("head_dim") && m.channels % m.heads == 0) {
    c.require("head_dim", 0, m.channels / m.heads, "is not hidden_size/num_attention_heads");
  }
  if (m.channels % m.heads == 0 && (m.channels / m.heads) % 2 != 0) {
    throw input_error(c.file() + ": hidden_size/num_attention_heads " +
                      std::to_string(m.channels / m.heads) +
                      " is odd; RoPE needs an even head size");
  }
  return m;
}

// The model's files: DIR/model.safetensors and DIR/config.json, or FILE and its config.json.
struct HfFiles {
  std::string weights, config;
};

HfFiles hf_files(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    HfFiles f{(dir / kHfWeightsFile).string(), (dir / kHfConfigFile).string()};
    if (!fs::exists(f.weights, ec)) {
      const bool sharded = fs::exists(dir / "model.safetensors.index.json", ec);
      throw input_error("Hugging Face model directory " + printable(path, 200) + " has no " +
                        kHfWeightsFile +
                        (sharded ? " (its weights are sharded; merge the shards into one "
                                   "model.safetensors)"
                                 : " (reftrain reads safetensors weights, not pytorch_model.bin)"));
    }
    return f;
  }
  const fs::path parent = fs::path(path).parent_path();
  return {path, ((parent.empty() ? fs::path(".") : parent) / kHfConfigFile).string()};
}

nlohmann::json read_config_json(const std::string& path, const std::string& weights) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw input_error("Hugging Face weights " + printable(weights, 200) + " need their " +
                      kHfConfigFile + " beside them (the model's shape); " + printable(path, 200) +
                      " does not exist (a reftrain checkpoint is continued with --resume)");
  }
  InputFile in(path, "Hugging Face config");
  if (in.size() > (1 << 20)) throw input_error(in.name() + " is over 1 MiB; not a model config");
  const std::string text = in.read_all();
  // A model config nests 3 levels (task_specific_params); parsing "[[[[" costs ~40 bytes a byte.
  if (json_nested_deeper_than(text, 16)) {
    throw input_error(in.name() + " nests its JSON deeper than 16 levels; not a model config");
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw input_error(in.name() + " is not a JSON object");
  return j;
}

// ---- weights ------------------------------------------------------------------------------------

// The tensor as f32: F32 as stored, F16 and BF16 widened (exactly: every f16 and bf16 value is
// an f32 value).
std::vector<float> to_f32(const SafeTensor& t, const std::string& file, const std::string& name) {
  std::vector<float> out(t.numel());
  const uint8_t* p = t.bytes.data();
  if (t.dtype == DType::kF32) {
    if (!out.empty()) std::memcpy(out.data(), p, out.size() * 4);
  } else if (t.dtype == DType::kF16 || t.dtype == DType::kBF16) {
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      if (t.dtype == DType::kF16) {
        out[i] = f16_bits_to_f32(h);
      } else {
        const uint32_t bits = uint32_t(h) << 16;  // bf16 is the top half of an f32
        std::memcpy(&out[i], &bits, 4);
      }
    }
  } else {
    throw input_error(file + ": tensor " + printable(name) + " is " + dtype_name(t.dtype) +
                      "; reftrain reads F32, F16 and BF16 weights");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      throw input_error(file + " has a non-finite weight in " + name + " (element " +
                        std::to_string(i) + ")");
    }
  }
  return out;
}

// Puts HF's data of one tensor into reftrain's layout at `dst` (p.numel floats).
void place(const std::vector<float>& src, HfLayout layout, const ParamTensor& p, float* dst) {
  if (layout == HfLayout::kTransposed) {
    const size_t out = size_t(p.shape[0]), in = size_t(p.shape[1]);
    for (size_t o = 0; o < out; ++o) {
      for (size_t i = 0; i < in; ++i) dst[o * in + i] = src[i * out + o];
    }
    return;
  }
  std::copy(src.begin(), src.end(), dst);
  std::fill(dst + src.size(), dst + p.numel, 0.0f);  // kVocabRows: the padding rows
}

// The file's name for `name`: GPT-2 files saved from GPT2Model (the hub's gpt2 among them) lack
// the "transformer." prefix.
std::string stored_name(const std::string& name, bool unprefixed) {
  const std::string prefix = "transformer.";
  return unprefixed && name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

void check_format_metadata(const SafetensorsFile& f) {
  const auto it = f.metadata.find("format");
  if (it != f.metadata.end() && it->second != "pt") {
    throw input_error(f.path + ": metadata format " + printable(it->second) +
                      "; reftrain reads PyTorch-layout weights (format \"pt\")");
  }
}

// The file holds every tensor the config implies, each of its shape and of a dtype reftrain
// reads, and no other: checked on the header alone (read_safetensors without data) before the
// model is allocated, since a small file whose config.json claims 124M parameters would
// otherwise cost the whole model's memory before its first tensor was found wrong.
void check_tensors(const SafetensorsFile& file, const ModelConfig& cfg, const ParamLayout& layout) {
  check_format_metadata(file);
  const bool unprefixed = cfg.arch == Arch::kGpt2 &&
                          !file.tensors.count("transformer.wte.weight") &&
                          file.tensors.count("wte.weight");
  std::set<std::string> known;
  for (const HfTensor& t : hf_tensors(cfg)) {
    const std::string name = stored_name(t.name, unprefixed);
    known.insert(name);
    if (t.layout == HfLayout::kBuffer) continue;
    if (t.layout == HfLayout::kTiedHead && !file.tensors.count(name)) continue;
    const ParamTensor& p =
        layout.get(t.layout == HfLayout::kTiedHead ? "transformer.wte.weight" : t.name);
    const HfLayout stored = t.layout == HfLayout::kTiedHead ? HfLayout::kVocabRows : t.layout;
    const SafeTensor& found = file.get(name, hf_shape(p, stored, cfg.vocab));
    if (found.dtype != DType::kF32 && found.dtype != DType::kF16 && found.dtype != DType::kBF16) {
      throw input_error(file.path + ": tensor " + printable(name) + " is " +
                        dtype_name(found.dtype) + "; reftrain reads F32, F16 and BF16 weights");
    }
  }
  for (const auto& [name, tensor] : file.tensors) {
    if (!known.count(name)) {
      throw input_error(file.path + ": tensor " + printable(name) + " has no place in reftrain's " +
                        enum_name(cfg.arch) + " model (is config.json's model_type right?)");
    }
  }
}

bool same_hf_shape(const ModelConfig& a, const ModelConfig& b) {
  return a.arch == b.arch && a.layers == b.layers && a.heads == b.heads &&
         a.channels == b.channels && a.max_seq == b.max_seq && a.vocab == b.vocab &&
         a.padded_vocab == b.padded_vocab && a.ffn == b.ffn && a.rope_theta == b.rope_theta &&
         a.activation == b.activation;
}

}  // namespace

bool is_hf_model_path(const std::string& path) {
  const std::string ext = ".safetensors";
  std::error_code ec;
  return fs::is_directory(path, ec) ||
         (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0);
}

ModelConfig read_hf_config(const std::string& path) {
  const HfFiles files = hf_files(path);
  const HfConfigReader c(read_config_json(files.config, files.weights),
                         "Hugging Face config " + files.config);
  if (!c.has("model_type")) throw input_error(c.file() + " has no model_type");
  const std::string type = c.string_or("model_type", "");
  if (type != "gpt2" && type != "llama") {
    throw input_error(c.file() + ": model_type " + c.value("model_type") +
                      " is neither gpt2 (GPT2LMHeadModel) nor llama (LlamaForCausalLM)");
  }
  ModelConfig m = type == "gpt2" ? gpt2_config(c) : llama_config(c);
  if (m.channels % m.heads != 0) {
    throw input_error(c.file() + ": the width " + std::to_string(m.channels) +
                      " is not divisible by the " + std::to_string(m.heads) + " heads");
  }
  m.padded_vocab = padded_vocab_of(m.vocab);
  return m;
}

void check_hf_weights(const std::string& path, const ModelConfig& cfg) {
  const SafetensorsFile header = read_safetensors(hf_files(path).weights, /*data=*/false);
  check_tensors(header, cfg, param_layout(cfg));
}

void load_hf_weights(const std::string& path, const ModelConfig& cfg, const ParamLayout& layout,
                     float* w) {
  // The config is read again: it must still describe the model `cfg` was made from.
  if (!same_hf_shape(read_hf_config(path), cfg)) {
    throw input_error("Hugging Face model " + printable(path, 200) +
                      " no longer matches the shape read from its config.json");
  }
  const SafetensorsFile file = read_safetensors(hf_files(path).weights);
  check_tensors(file, cfg, layout);
  const bool unprefixed = cfg.arch == Arch::kGpt2 &&
                          !file.tensors.count("transformer.wte.weight") &&
                          file.tensors.count("wte.weight");
  // GPT-2's wte, kept only to check a stored lm_head against.
  const bool tied_head = cfg.arch == Arch::kGpt2 && file.tensors.count("lm_head.weight");
  std::vector<float> wte;
  for (const HfTensor& t : hf_tensors(cfg)) {
    const std::string name = stored_name(t.name, unprefixed);
    if (t.layout == HfLayout::kBuffer) continue;
    if (t.layout == HfLayout::kTiedHead) {
      if (!file.tensors.count(name)) continue;
      const ParamTensor& p = layout.get("transformer.wte.weight");
      if (to_f32(file.get(name, hf_shape(p, HfLayout::kVocabRows, cfg.vocab)), file.path, name) !=
          wte) {
        throw input_error(file.path + ": " + name + " differs from transformer.wte.weight; " +
                          "reftrain's gpt2 ties the head to the embedding");
      }
      continue;
    }
    const ParamTensor& p = layout.get(t.name);
    const std::vector<float> data =
        to_f32(file.get(name, hf_shape(p, t.layout, cfg.vocab)), file.path, name);
    place(data, t.layout, p, w + p.offset);
    if (tied_head && t.name == "transformer.wte.weight") wte = data;
  }
}

Json hf_config_json(const ModelConfig& m) {
  if (m.arch == Arch::kGpt2) {
    // Dropout 0: reftrain trains without it, so the weights were made for a model without it.
    return {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"vocab_size", m.vocab},
            {"n_positions", m.max_seq},
            {"n_embd", m.channels},
            {"n_layer", m.layers},
            {"n_head", m.heads},
            {"n_inner", nullptr},
            {"activation_function", m.activation == Activation::kGeluErf ? "gelu" : "gelu_new"},
            {"layer_norm_epsilon", 1e-5},
            {"resid_pdrop", 0.0},
            {"embd_pdrop", 0.0},
            {"attn_pdrop", 0.0},
            {"initializer_range", 0.02},
            {"scale_attn_weights", true},
            {"scale_attn_by_inverse_layer_idx", false},
            {"reorder_and_upcast_attn", false},
            {"tie_word_embeddings", true},
            {"use_cache", true},
            {"torch_dtype", "float32"}};
  }
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", m.vocab},
          {"hidden_size", m.channels},
          {"intermediate_size", m.ffn},
          {"num_hidden_layers", m.layers},
          {"num_attention_heads", m.heads},
          {"num_key_value_heads", m.heads},
          {"head_dim", m.channels / m.heads},
          {"hidden_act", "silu"},
          {"max_position_embeddings", m.max_seq},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", m.rope_theta},
          {"rope_scaling", nullptr},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"mlp_bias", false},
          {"tie_word_embeddings", false},
          {"initializer_range", 0.02},
          {"use_cache", true},
          {"torch_dtype", "float32"}};
}

void write_hf_config(const std::string& dir, const Json& config) {
  write_text_file((fs::path(dir) / kHfConfigFile).string(), json_text(config, 2) + "\n");
}

void write_hf_weights(const std::string& dir, const ModelConfig& cfg, const ParamLayout& layout,
                      const float* w) {
  std::vector<TensorRef> refs;
  std::vector<std::vector<float>> transposed;  // the only tensors that need a copy
  for (const HfTensor& t : hf_tensors(cfg)) {
    if (t.layout == HfLayout::kBuffer || t.layout == HfLayout::kTiedHead) continue;
    const ParamTensor& p = layout.get(t.name);
    const float* data = w + p.offset;  // kVocabRows: the first V rows are a prefix
    if (t.layout == HfLayout::kTransposed) {
      const size_t out = size_t(p.shape[0]), in = size_t(p.shape[1]);
      std::vector<float>& x = transposed.emplace_back(p.numel);
      for (size_t o = 0; o < out; ++o) {
        for (size_t i = 0; i < in; ++i) x[i * out + o] = data[o * in + i];
      }
      data = x.data();
    }
    refs.push_back({t.name, DType::kF32, hf_shape(p, t.layout, cfg.vocab), data});
  }
  write_safetensors((fs::path(dir) / kHfWeightsFile).string(), refs, {{"format", "pt"}});
}

}  // namespace reftrain
