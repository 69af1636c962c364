// `reftrain export`: a checkpoint's model in another framework's format. --format hf writes a
// Hugging Face transformers directory, config.json and model.safetensors, which
// GPT2LMHeadModel / LlamaForCausalLM.from_pretrained(DIR) loads (core/formats/hf.h;
// docs/formats.md).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

// Every file an export writes. A directory holding only these (or nothing) is an earlier
// export, which a new one replaces whole; anything else in it is the user's, never deleted.
constexpr const char* kExportFiles[] = {kHfConfigFile, kHfWeightsFile, "tokenizer.json",
                                        "vocab.json", "merges.txt"};

void check_replaceable(const std::filesystem::path& out) {
  std::error_code ec;
  if (!std::filesystem::exists(out, ec)) return;
  if (!std::filesystem::is_directory(out, ec)) {
    throw usage_error("--out " + out.string() +
                      " is a file, not a directory; choose another --out");
  }
  for (const auto& e : std::filesystem::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    const bool ours = std::any_of(std::begin(kExportFiles), std::end(kExportFiles),
                                  [&](const char* f) { return name == f; });
    if (!ours) {
      throw usage_error("--out " + out.string() + " holds " + printable(name, 200) +
                        ", which no export writes, and an export replaces the whole directory; "
                        "export into a new or empty directory");
    }
  }
  if (ec) throw input_error("cannot list --out " + out.string() + ": " + ec.message());
}

// Puts the finished `staging` directory at `out` in one step: a rename onto a new or empty
// `out`, else an exchange of the two (so `out` is at every moment the old export or the new
// one, never a mix), after which the old one is removed from `staging`'s name.
void move_into_place(const std::filesystem::path& staging, const std::filesystem::path& out) {
  std::error_code ec;
  const bool empty = !std::filesystem::exists(out, ec) || std::filesystem::is_empty(out, ec);
  const int rc =
      empty ? ::rename(staging.c_str(), out.c_str())
            : ::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE);
  if (rc != 0) {
    const int err = errno;
    std::filesystem::remove_all(staging, ec);
    throw input_error("cannot move the export into --out " + out.string() + ": " +
                      std::strerror(err) +
                      (err == EINVAL ? " (this file system cannot exchange directories; export "
                                       "into a new directory)"
                                     : ""));
  }
  if (!empty) std::filesystem::remove_all(staging, ec);
  const std::filesystem::path parent = out.has_parent_path() ? out.parent_path() : ".";
  const int dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) ::fsync(dfd), ::close(dfd);  // the rename's durability; the files are synced
}

// The directory the export is built in: beside --out, so that the final rename stays within
// one file system. One left behind by a killed export is removed first.
std::filesystem::path fresh_staging(const std::filesystem::path& out) {
  const std::filesystem::path staging =
      out.parent_path() / ("." + out.filename().string() + ".export-tmp");
  std::error_code ec;
  std::filesystem::remove_all(staging, ec);
  create_output_dir(staging.string());
  return staging;
}

// --out without a trailing slash or dot components: "hf/" and "hf" are one directory.
std::filesystem::path out_dir(const std::string& out) {
  std::filesystem::path p = std::filesystem::path(out).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p;
}

int run_export(const ExportArgs& a) {
  if (a.ckpt.empty()) throw usage_error("--ckpt needs a checkpoint file or directory");
  if (a.out.empty()) throw usage_error("--out needs a directory");
  const std::filesystem::path dir = out_dir(a.out);
  Checkpoint c = read_checkpoint(a.ckpt);
  // The export replaces these names in --out: none may be what the checkpoint is read from or
  // what it was trained on.
  std::vector<NamedPath> outputs;
  for (const char* f : kExportFiles) outputs.push_back({"--out", (dir / f).string()});
  refuse_clobbering(outputs, {{"--ckpt", c.path}, {"the checkpoint's data", c.meta.data.path}});
  check_replaceable(dir);
  const ModelConfig& model = c.meta.model;
  const ParamLayout layout = param_layout(model);
  const std::vector<float> w = checkpoint_weights(c, layout);
  c.file.tensors.clear();  // in `w` now

  // Loaded (and checked against the checkpoint's hash) before anything is written.
  const std::shared_ptr<const Tokenizer> tokenizer =
      reload_tokenizer(c.meta.data.tokenizer, a.tokenizer);
  const bool bpe = tokenizer && tokenizer->kind() != "bytes";

  const std::filesystem::path staging = fresh_staging(dir);
  write_hf_weights(staging.string(), model, layout, w.data());
  Json hf_config = hf_config_json(model);
  std::string files = std::string(kHfConfigFile) + ", " + kHfWeightsFile;
  if (bpe) {
    for (const std::string& f : write_tokenizer_files(staging.string(), *tokenizer)) {
      files += ", " + f;
    }
    if (tokenizer->eot_id() >= 0) {
      hf_config["bos_token_id"] = tokenizer->eot_id();
      hf_config["eos_token_id"] = tokenizer->eot_id();
    }
  }
  write_hf_config(staging.string(), hf_config);
  move_into_place(staging, dir);
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
