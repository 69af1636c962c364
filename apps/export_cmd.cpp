// `reftrain export`: a checkpoint's model in another framework's format. --format hf writes a
// Hugging Face transformers directory, config.json and model.safetensors, which
// GPT2LMHeadModel / LlamaForCausalLM.from_pretrained(DIR) loads (core/formats/hf.h;
// docs/formats.md).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/cli_util.h"
#include "apps/commands.h"
#include "core/base/error.h"
#include "core/formats/atomic_file.h"
#include "core/formats/hf.h"
#include "core/tokenizer/tokenizer.h"
#include "core/train/checkpoint.h"
#include "core/train/data.h"

namespace reftrain {

namespace {

struct ExportArgs {
  std::string ckpt, format, out, tokenizer;
};

// The checkpoint's BPE tokenizer as Hugging Face's files: tokenizer.json (what
// AutoTokenizer / PreTrainedTokenizerFast read), and GPT-2's vocab.json + merges.txt (what
// GPT2Tokenizer reads), all from one serialisation. Returns the files written.
std::vector<std::string> write_tokenizer_files(const std::string& dir, const Tokenizer& t) {
  const std::string json_text = to_tokenizer_json(t);
  const auto j = nlohmann::ordered_json::parse(json_text);
  std::string merges = "#version: 0.2\n";
  for (const auto& m : j["model"]["merges"]) merges += m.get<std::string>() + "\n";
  write_text_file(dir + "/tokenizer.json", json_text);
  write_text_file(dir + "/vocab.json", j["model"]["vocab"].dump() + "\n");
  write_text_file(dir + "/merges.txt", merges);
  return {"tokenizer.json", "vocab.json", "merges.txt"};
}

// The checkpoint's weights in a mega-buffer laid out as a model of its config would hold them
// (read_checkpoint has checked every name, shape and value).
std::vector<float> checkpoint_weights(const Checkpoint& c, const ParamLayout& layout) {
  std::vector<float> w(layout.total(), 0.0f);
  for (const ParamTensor& p : layout.tensors()) {
    const SafeTensor& t = c.file.get(p.name);
    std::memcpy(w.data() + p.offset, t.bytes.data(), p.numel * sizeof(float));
  }
  return w;
}

int run_export(const ExportArgs& a) {
  if (a.ckpt.empty()) throw usage_error("--ckpt needs a checkpoint file or directory");
  if (a.out.empty()) throw usage_error("--out needs a directory");
  const std::filesystem::path dir(a.out);
  const std::string weights = (dir / kHfWeightsFile).string();
  const std::string config = (dir / kHfConfigFile).string();
  Checkpoint c = read_checkpoint(a.ckpt);
  refuse_clobbering({{"--out", weights}, {"--out", config}}, {{"--ckpt", c.path}});
  const ModelConfig& model = c.meta.model;
  const ParamLayout layout = param_layout(model);
  const std::vector<float> w = checkpoint_weights(c, layout);
  c.file.tensors.clear();  // in `w` now

  // Loaded (and checked against the checkpoint's hash) before anything is written.
  const std::shared_ptr<const Tokenizer> tokenizer =
      reload_tokenizer(c.meta.data.tokenizer, a.tokenizer);
  const bool bpe = tokenizer && tokenizer->kind() != "bytes";

  create_output_dir(a.out);
  write_hf_weights(a.out, model, layout, w.data());
  Json hf_config = hf_config_json(model);
  std::string files = std::string(kHfConfigFile) + ", " + kHfWeightsFile;
  if (bpe) {
    for (const std::string& f : write_tokenizer_files(a.out, *tokenizer)) files += ", " + f;
    if (tokenizer->eot_id() >= 0) {
      hf_config["bos_token_id"] = tokenizer->eot_id();
      hf_config["eos_token_id"] = tokenizer->eot_id();
    }
  }
  // config.json goes last: a directory without it is no model, so an export cut short by an
  // error cannot be mistaken for a complete one.
  write_hf_config(a.out, hf_config);
  std::printf("exported %s (%s, step %lld) to %s: %s%s\n", c.path.c_str(), enum_name(model.arch),
              static_cast<long long>(c.meta.step), a.out.c_str(), files.c_str(),
              bpe ? "" : " (no tokenizer files: the model reads bytes or llm.c ids)");
  return 0;
}

}  // namespace

CommandRunner add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  app.add_option("--ckpt", a->ckpt, "checkpoint file, or a directory (its newest checkpoint)")
      ->required();
  app.add_option("--format", a->format,
                 "hf: a Hugging Face transformers directory (config.json, model.safetensors)")
      ->required()
      ->check(one_of({"hf"}));
  app.add_option("--out", a->out, "directory to write the files into (created if missing)")
      ->required();
  app.add_option("--tokenizer", a->tokenizer,
                 "the checkpoint's tokenizer where it is now, if it moved (checked by its hash)");
  return [a] { return run_export(*a); };
}

}  // namespace reftrain
