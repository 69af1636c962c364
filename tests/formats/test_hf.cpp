// Hugging Face models in and out (core/formats/hf.h, `train --init-from`, `export --format hf`),
// against tests/torch/hf_mirror.py: a PyTorch mirror of transformers' GPT2LMHeadModel (Conv1D
// weights [in, out]) and LlamaForCausalLM (rotate_half RoPE) whose tensor names come from the
// module tree, as transformers' do. The mirror makes HF directories that reftrain imports, and
// loads the directories reftrain exports; both compute in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/formats/hf.h"
#include "core/formats/safetensors.h"
#include "core/model/model.h"
#include "core/train/checkpoint.h"
#include "tests/common/cli_util.h"

namespace reftrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;
using testing::TempDir;

// The mirror's models: one of each family in F32, and the variants an import must handle.
struct MirrorCase {
  const char* name;
  const char* arch;
  const char* dtype;
  bool no_prefix = false;  // GPT-2 names without "transformer."
  bool lm_head = false;    // the tied lm_head.weight stored too
  bool buffers = false;    // GPT-2's attn.bias / attn.masked_bias stored (older transformers)
};
const MirrorCase kCases[] = {{"gpt2_f32", "gpt2", "F32"},
                             {"gpt2_bf16_unprefixed", "gpt2", "BF16", true, true, true},
                             {"gpt2_gelu", "gpt2_gelu", "F32"},
                             {"llama_f32", "llama", "F32"},
                             {"llama_f16", "llama", "F16"}};

// Runs hf_mirror.py on `jobs` (one Python start for all of them).
void run_hf_mirror(const TempDir& dir, const json& jobs) {
  const std::string path = dir.file("jobs.json");
  testing::write_file(path, jobs.dump());
  const std::string cmd = testing::python_script("hf_mirror.py") + " " + path;
  const CommandResult r = testing::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
}

// What the mirror computed on one model: its tokens, logits [B, T, V] and mean loss.
struct MirrorResult {
  int B = 0, T = 0, V = 0;
  std::vector<int32_t> inputs, targets;
  std::vector<double> logits;
  double loss = 0;
};

MirrorResult read_mirror_result(const std::string& path) {
  const SafetensorsFile f = read_safetensors(path);
  MirrorResult m;
  const SafeTensor& logits = f.get("logits");
  m.B = int(logits.shape[0]), m.T = int(logits.shape[1]), m.V = int(logits.shape[2]);
  m.inputs = f.get("inputs").as<int32_t>(), m.targets = f.get("targets").as<int32_t>();
  m.logits = logits.as<double>();
  m.loss = f.get("loss").as<double>()[0];
  return m;
}

std::unique_ptr<Model> model_for(const ModelConfig& cfg, const MirrorResult& m) {
  ModelOptions o;
  o.batch = m.B, o.seq = m.T;
  return make_model(cfg, o);
}

// reftrain's forward on the mirror's tokens against the mirror's float64 answer, with the
// tolerances of the torch parity test (tests/model/test_torch_parity.cpp): the loss within 1e-5
// relative, every logit within 1e-5 of the largest |logit| (fp32 rounding over these sizes is
// ~1e-7 relative; a wrong transpose, row or name shows at 1e-1).
void expect_forward_matches(Model& model, const MirrorResult& m) {
  const float loss = model.forward(m.inputs.data(), m.targets.data(), m.B, m.T);
  EXPECT_NEAR(loss, m.loss, 1e-5 * std::abs(m.loss));
  const size_t Vp = size_t(model.config().padded_vocab), V = size_t(m.V);
  double max_ref = 0, max_err = 0;
  for (size_t n = 0; n < size_t(m.B) * size_t(m.T); ++n) {
    for (size_t v = 0; v < V; ++v) {
      const double ref = m.logits[n * V + v];
      max_ref = std::max(max_ref, std::abs(ref));
      max_err = std::max(max_err, std::abs(double(model.logits()[n * Vp + v]) - ref));
    }
  }
  EXPECT_LE(max_err, 1e-5 * max_ref) << "max |logit| " << max_ref;
}

// A buffer of `layout` holding a NaN pattern no import writes, so a tensor left unwritten shows.
std::vector<float> sentinel_buffer(const ParamLayout& layout) {
  std::vector<float> w(layout.total());
  const uint32_t bits = 0x7fc0dead;
  for (float& x : w) std::memcpy(&x, &bits, 4);
  return w;
}

// Every tensor of `layout` bit for bit equal in a and b.
void expect_same_weights(const ParamLayout& layout, const float* a, const float* b) {
  for (const ParamTensor& t : layout.tensors()) {
    EXPECT_EQ(std::memcmp(a + t.offset, b + t.offset, t.numel * 4), 0) << t.name;
  }
}

// The mirror's models, made on first use (one Python start for every test here).
const TempDir& mirror_models() {
  static const TempDir* dir = [] {
    const TempDir* d = new TempDir;  // lives until the process ends
    json jobs = json::array();
    int seed = 1;
    for (const MirrorCase& c : kCases) {
      jobs.push_back({{"op", "make"},
                      {"dir", d->file(c.name)},
                      {"arch", c.arch},
                      {"seed", seed++},
                      {"dtype", c.dtype},
                      {"no_prefix", c.no_prefix},
                      {"lm_head", c.lm_head},
                      {"buffers", c.buffers},
                      {"out", d->file(std::string(c.name) + ".out.safetensors")}});
    }
    run_hf_mirror(*d, jobs);
    return d;
  }();
  return *dir;
}

class HfMirror : public ::testing::Test {
 protected:
  static std::string model_dir(const char* name) { return mirror_models().file(name); }
  static MirrorResult result(const char* name) {
    return read_mirror_result(mirror_models().file(std::string(name) + ".out.safetensors"));
  }
};

TEST_F(HfMirror, ImportComputesWhatTheMirrorComputes) {
  for (const MirrorCase& c : kCases) {
    SCOPED_TRACE(c.name);
    const ModelConfig cfg = read_hf_config(model_dir(c.name));
    const bool llama = std::string(c.arch) == "llama";
    EXPECT_EQ(cfg.arch, llama ? Arch::kLlama : Arch::kGpt2);
    EXPECT_EQ(cfg.layers, 2);
    EXPECT_EQ(cfg.heads, 3);
    EXPECT_EQ(cfg.channels, 24);
    EXPECT_EQ(cfg.max_seq, 16);
    EXPECT_EQ(cfg.vocab, 61);
    EXPECT_EQ(cfg.padded_vocab, 64);  // V rounded up to a multiple of 64
    EXPECT_EQ(cfg.activation,
              std::string(c.arch) == "gpt2_gelu" ? Activation::kGeluErf : Activation::kGeluTanh);
    if (llama) {
      EXPECT_EQ(cfg.ffn, 40);
      EXPECT_EQ(cfg.rope_theta, 500.0);
    }

    const MirrorResult m = result(c.name);
    std::unique_ptr<Model> model = model_for(cfg, m);
    std::vector<float> w = sentinel_buffer(model->layout());
    load_hf_weights(model_dir(c.name), cfg, model->layout(), w.data());
    for (const ParamTensor& t : model->layout().tensors()) {
      for (size_t i = 0; i < t.numel; ++i) {
        ASSERT_TRUE(std::isfinite(w[t.offset + i])) << t.name << " element " << i << " unwritten";
      }
      if (t.init_rows < 0) continue;  // a vocabulary table: rows V..Vp-1 are zero
      for (size_t i = size_t(cfg.vocab) * cfg.channels; i < t.numel; ++i) {
        ASSERT_EQ(w[t.offset + i], 0.0f) << t.name << " padding element " << i;
      }
    }
    std::copy(w.begin(), w.end(), model->weights());
    expect_forward_matches(*model, m);
  }
}

// Library round trip at V 61 < Vp 64: export drops the padding rows, import restores them as 0.
TEST_F(HfMirror, ExportThenImportIsBitExact) {
  for (const char* name : {"gpt2_f32", "gpt2_gelu", "llama_f32"}) {
    SCOPED_TRACE(name);
    const ModelConfig cfg = read_hf_config(model_dir(name));
    std::unique_ptr<Model> model = make_model(cfg, ModelOptions{});
    model->init_weights(11);
    TempDir out;
    write_hf_weights(out.file(""), cfg, model->layout(), model->weights());
    write_hf_config(out.file(""), hf_config_json(cfg));

    const ModelConfig back = read_hf_config(out.file(""));
    EXPECT_EQ(model_config_json(back), model_config_json(cfg));
    std::vector<float> w = sentinel_buffer(model->layout());
    load_hf_weights(out.file(""), back, model->layout(), w.data());
    expect_same_weights(model->layout(), model->weights(), w.data());

    const SafetensorsFile f = read_safetensors(out.file(kHfWeightsFile));
    EXPECT_EQ(f.metadata.at("format"), "pt");
    const json config = json::parse(testing::read_file(out.file(kHfConfigFile)));
    EXPECT_EQ(config.at("torch_dtype"), "float32");
    if (cfg.arch == Arch::kGpt2) {
      EXPECT_EQ(config.at("architectures"), json::array({"GPT2LMHeadModel"}));
      EXPECT_EQ(f.get("transformer.h.1.attn.c_attn.weight").shape, (std::vector<int64_t>{24, 72}));
      EXPECT_EQ(f.get("transformer.wte.weight").shape, (std::vector<int64_t>{61, 24}));
      EXPECT_EQ(f.tensors.count("lm_head.weight"), 0u);  // tied: transformers re-ties it
      EXPECT_EQ(f.tensors.size(), 4 + 12 * 2u);
    } else {
      EXPECT_EQ(config.at("architectures"), json::array({"LlamaForCausalLM"}));
      EXPECT_EQ(f.get("model.layers.1.mlp.down_proj.weight").shape, (std::vector<int64_t>{24, 40}));
      EXPECT_EQ(f.get("lm_head.weight").shape, (std::vector<int64_t>{61, 24}));
      EXPECT_EQ(f.tensors.size(), 3 + 9 * 2u);
    }
  }
}

// --- through the binary -----------------------------------------------------------------------

// Train, export, import: the exported weights re-import bit for bit, a run started from them
// validates exactly where the original run ended, and the mirror, loading the export by HF's
// names, computes what reftrain computes with the checkpoint's weights.
TEST(HfBinary, TrainExportImportRoundTrip) {
  TempDir dir;
  const std::string text = dir.file("text.txt");
  testing::write_file(text, testing::learnable_text());
  json jobs = json::array();
  std::vector<Checkpoint> ckpts;
  for (const char* preset : {"tiny", "llama-tiny"}) {
    SCOPED_TRACE(preset);
    const std::string p = preset, ck = dir.file(p + "-ck"), hf = dir.file(p + "-hf");
    const std::string t1 = dir.file(p + "-1.jsonl"), t2 = dir.file(p + "-2.jsonl");
    CommandResult r =
        testing::run_reftrain("train --preset " + p + " --steps 3 --val-every 3 --threads 1 " +
                              "--data " + text + " --out " + ck + " --trace " + t1);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = testing::run_reftrain("export --ckpt " + ck + " --format hf --out " + hf);
    ASSERT_EQ(r.exit_code, 0) << r.output;

    ckpts.push_back(read_checkpoint(ck));
    const Checkpoint& c = ckpts.back();
    const ParamLayout layout = param_layout(c.meta.model);
    std::vector<float> original = sentinel_buffer(layout), imported = sentinel_buffer(layout);
    for (const ParamTensor& t : layout.tensors()) {
      std::memcpy(original.data() + t.offset, c.file.get(t.name).bytes.data(), t.numel * 4);
    }
    load_hf_weights(hf, read_hf_config(hf), layout, imported.data());
    expect_same_weights(layout, original.data(), imported.data());

    // The directory, or (llama) the weights file with its config.json beside it.
    const std::string from = p == "tiny" ? hf : hf + "/" + kHfWeightsFile;
    r = testing::run_reftrain("train --preset " + p +
                              " --steps 1 --val-every 1 --threads 1 --data " + text +
                              " --init-from " + from + " --trace " + t2);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<json> before = testing::read_trace(t1), after = testing::read_trace(t2);
    EXPECT_EQ(after[0].at("init"),
              "hugging face " + std::string(enum_name(c.meta.model.arch)) + " " + from);
    json last_val, first_val;
    for (const json& j : before) {
      if (j.at("type") == "val") last_val = j.at("val_loss");
    }
    for (const json& j : after) {
      if (j.at("type") == "val" && first_val.is_null()) first_val = j.at("val_loss");
    }
    EXPECT_EQ(first_val, last_val) << "validation loss after the import differs";
    jobs.push_back({{"op", "loss"}, {"dir", hf}, {"out", dir.file(p + "-mirror.safetensors")}});
  }
  run_hf_mirror(dir, jobs);
  for (size_t i = 0; i < ckpts.size(); ++i) {
    const MirrorResult m = read_mirror_result(jobs[i].at("out").get<std::string>());
    std::unique_ptr<Model> model = model_for(ckpts[i].meta.model, m);
    restore_model(ckpts[i], *model);
    expect_forward_matches(*model, m);
  }
}

// --- bad inputs: one line, naming the file, the key or tensor, and the value --------------------

// A copy of one of the mirror's models, changed by `change_config` and `change_tensors`.
std::string changed_copy(const std::string& from, const std::string& to,
                         const std::function<void(json&)>& change_config,
                         const std::function<void(SafetensorsFile&)>& change_tensors) {
  fs::create_directories(to);
  json config = json::parse(testing::read_file(from + "/" + kHfConfigFile));
  if (change_config) change_config(config);
  testing::write_file(to + "/" + kHfConfigFile, config.dump());
  SafetensorsFile f = read_safetensors(from + "/" + kHfWeightsFile);
  if (change_tensors) change_tensors(f);
  write_safetensors(to + "/" + kHfWeightsFile, f);
  return to;
}

class HfBadInput : public HfMirror {
 protected:
  void SetUp() override {
    text_ = work_.file("text.txt");
    std::string bytes;  // token ids below the models' vocabulary of 61
    for (int i = 0; i < 4000; ++i) bytes += char(0x20 + (i * 7) % 29);
    testing::write_file(text_, bytes);
  }
  // One step from `init` on the text (one thread: the machine may be busy, and results do not
  // depend on the thread count), read as byte ids: the models have 61 tokens and no tokenizer.
  std::string train_from(const std::string& preset, const std::string& init) const {
    return "train --threads 1 --preset " + preset + " --steps 1 --seq 11 --data " + text_ +
           " --tokenizer bytes --init-from " + init;
  }
  static std::string preset_of(const std::string& base) {
    return base.rfind("llama", 0) == 0 ? "llama-tiny" : "tiny";
  }
  // `reftrain train` from a changed copy of model `base` fails with `code` and `message`.
  void expect_refused(const char* base, const std::function<void(json&)>& change_config,
                      const std::function<void(SafetensorsFile&)>& change_tensors,
                      const std::string& message, int code = 1) {
    const std::string copy = changed_copy(model_dir(base), work_.file(std::to_string(copies_++)),
                                          change_config, change_tensors);
    testing::expect_user_error(train_from(preset_of(base), copy), code, message);
  }
  TempDir work_;
  std::string text_;
  int copies_ = 0;
};

TEST_F(HfBadInput, TheUnchangedCopiesLoad) {
  for (const char* base : {"gpt2_bf16_unprefixed", "llama_f16"}) {
    const std::string copy = changed_copy(model_dir(base), work_.file(base), nullptr, nullptr);
    const testing::SplitResult r = testing::run_split(train_from(preset_of(base), copy));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

TEST_F(HfBadInput, ConfigValuesReftrainCannotComputeAreRefused) {
  const auto set = [](const char* key, json value) {
    return [key, value](json& j) { j[key] = value; };
  };
  expect_refused("llama_f32", set("rms_norm_eps", 1e-6), nullptr,
                 "rms_norm_eps 1e-06 is not 1e-5, the eps of reftrain's RMSNorm");
  expect_refused(
      "llama_f32", [](json& j) { j.erase("rms_norm_eps"); }, nullptr,
      "rms_norm_eps 1e-06 (the default) is not 1e-5");
  expect_refused("llama_f32", set("num_key_value_heads", 1), nullptr,
                 "num_key_value_heads 1 differs from num_attention_heads");
  expect_refused("llama_f32", set("rope_scaling", {{"type", "linear"}, {"factor", 2.0}}), nullptr,
                 "rope_scaling {\"factor\":2.0,\"type\":\"linear\"} is set");
  expect_refused("llama_f32", set("tie_word_embeddings", true), nullptr,
                 "tie_word_embeddings true ties the head");
  expect_refused("llama_f32", set("attention_bias", true), nullptr, "attention_bias true adds");
  expect_refused("llama_f32", set("hidden_act", "gelu"), nullptr, "hidden_act \"gelu\" is not");
  expect_refused("gpt2_f32", set("activation_function", "relu"), nullptr,
                 "activation_function \"relu\" is not gelu_new");
  expect_refused("gpt2_f32", set("layer_norm_epsilon", 1e-6), nullptr,
                 "layer_norm_epsilon 1e-06 is not 1e-5");
  expect_refused("gpt2_f32", set("n_inner", 100), nullptr, "n_inner 100 is not 4·n_embd");
  expect_refused("gpt2_f32", set("model_type", "bert"), nullptr,
                 "model_type \"bert\" is neither gpt2");
  expect_refused(
      "gpt2_f32", [](json& j) { j.erase("n_head"); }, nullptr, "has no n_head");
}

TEST_F(HfBadInput, TensorsThatDoNotFitAreRefused) {
  // nn.Linear's [out, in] where GPT-2's Conv1D stores [in, out].
  expect_refused(
      "gpt2_f32", nullptr,
      [](SafetensorsFile& f) {
        SafeTensor& t = f.tensors.at("transformer.h.1.mlp.c_fc.weight");
        std::swap(t.shape[0], t.shape[1]);
      },
      "tensor 'transformer.h.1.mlp.c_fc.weight' has shape [96,24], expected [24,96]");
  expect_refused(
      "llama_f32", nullptr,
      [](SafetensorsFile& f) { f.tensors.erase("model.layers.1.mlp.up_proj.weight"); },
      "no tensor named 'model.layers.1.mlp.up_proj.weight'");
  expect_refused(
      "llama_f32", nullptr,
      [](SafetensorsFile& f) {
        const std::vector<float> zeros(24, 0.0f);
        f.add("model.layers.0.self_attn.q_proj.bias", DType::kF32, {24}, zeros.data());
      },
      "tensor 'model.layers.0.self_attn.q_proj.bias' has no place in reftrain's llama model");
  expect_refused(
      "gpt2_f32", nullptr,
      [](SafetensorsFile& f) {
        const std::vector<float> wte = f.get("transformer.wte.weight").as<float>();
        std::vector<float> head = wte;
        head[5] += 1.0f;
        f.add("lm_head.weight", DType::kF32, {61, 24}, head.data());
      },
      "lm_head.weight differs from transformer.wte.weight");
  expect_refused(
      "llama_f32", nullptr,
      [](SafetensorsFile& f) {
        const std::vector<float> w = f.get("model.norm.weight").as<float>();
        const std::vector<double> wide(w.begin(), w.end());
        f.add("model.norm.weight", DType::kF64, {24}, wide.data());
      },
      "tensor 'model.norm.weight' is F64; reftrain reads F32, F16 and BF16 weights");
  expect_refused(
      "llama_f32", nullptr,
      [](SafetensorsFile& f) {
        std::vector<float> w = f.get("model.norm.weight").as<float>();
        w[3] = std::nanf("");
        f.add("model.norm.weight", DType::kF32, {24}, w.data());
      },
      "non-finite weight in model.norm.weight (element 3)");
  expect_refused(
      "gpt2_f32", nullptr, [](SafetensorsFile& f) { f.metadata["format"] = "flax"; },
      "metadata format 'flax'; reftrain reads PyTorch-layout weights");
}

TEST_F(HfBadInput, WrongFamilyOrMissingFilesAreRefused) {
  testing::expect_user_error(train_from("tiny", model_dir("llama_f32")), 2,
                             "holds a llama model but --preset tiny is gpt2; use a llama preset");
  testing::expect_user_error(train_from("llama-tiny", model_dir("gpt2_f32")), 2,
                             "holds a gpt2 model but --preset llama-tiny is llama");
  const std::string lone = work_.file("lone");
  fs::create_directories(lone);
  fs::copy_file(model_dir("gpt2_f32") + "/" + kHfWeightsFile, lone + "/w.safetensors");
  testing::expect_user_error(train_from("tiny", lone + "/w.safetensors"), 1,
                             "need their config.json beside them");
  testing::expect_user_error(train_from("tiny", lone), 1, "has no model.safetensors");
  testing::expect_user_error("export --ckpt " + lone + " --format gguf --out " + work_.file("x"), 2,
                             "gguf");
  testing::expect_user_error("export --ckpt " + lone + " --format hf --out " + work_.file("x"), 1,
                             lone);
}

}  // namespace
}  // namespace reftrain
