#include "core/train/run_plan.h"

#include <algorithm>
#include <filesystem>

#include "core/base/error.h"
#include "core/base/json_depth.h"
#include "core/formats/hf.h"
#include "core/formats/llmc.h"
#include "core/train/data_parallel.h"
#include "core/train/run_config.h"

namespace reftrain {

namespace {

// The training values `r` asks for over `base`. --grad-accum K is per rank, as a preset's K is:
// a step of N ranks has N·K micro-batches; a resumed run keeps its checkpoint's unless
// --grad-accum is given.
TrainConfig requested_config(const RunRequest& r, const TrainConfig& base, bool fresh) {
  TrainConfig t = r.configure(base);
  if (fresh || r.grad_accum_given) {
    t.grad_accum = MicroBatches::of_ranks(t.grad_accum, r.ranks).total;
  }
  return t;
}

std::string name(const std::optional<std::string>& given) {
  return given.value_or("");
}

// The tokenizer files a Hugging Face model carries beside its weights (an export writes them):
// the directory holding them as a --tokenizer spec, tokenizer.json first (it keeps the kind
// "bpe"), or "" when there are none.
std::string tokenizer_beside(const std::string& init_from) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir =
      fs::is_directory(init_from, ec) ? fs::path(init_from) : fs::path(init_from).parent_path();
  const fs::path d = dir.empty() ? fs::path(".") : dir;
  if (fs::exists(d / "tokenizer.json", ec)) return (d / "tokenizer.json").string();
  const bool hf = fs::exists(d / "vocab.json", ec) && fs::exists(d / "merges.txt", ec);
  const bool openai = fs::exists(d / "encoder.json", ec) && fs::exists(d / "vocab.bpe", ec);
  return hf || openai ? d.string() : "";
}

// What a run starting from weights reads its text with, when --tokenizer is not given: the
// tokenizer beside a Hugging Face model; else bytes, which only a model of 256 tokens reads
// (byte ids in a larger vocabulary train, but on the wrong ids: GPT-2's 50257 tokens fed bytes).
std::optional<std::string> init_tokenizer(const RunRequest& r, const ModelConfig& model, bool hf) {
  if (r.tokenizer || !r.init_from || r.data_tokens) return r.tokenizer;
  const std::string beside = hf ? tokenizer_beside(*r.init_from) : "";
  if (!beside.empty()) return beside;
  if (model.vocab == kByteVocab) return r.tokenizer;
  throw usage_error("--init-from " + *r.init_from + " is a model of " +
                    std::to_string(model.vocab) +
                    " tokens with no tokenizer beside it, so the text would be read as bytes; "
                    "pass --tokenizer (gpt2 for GPT-2's), or --tokenizer bytes for byte ids");
}

Dataset load_data(const RunRequest& r) {
  const std::pair<const char*, const std::optional<std::string>*> files[] = {
      {"--data", &r.data}, {"--data-tokens", &r.data_tokens}, {"--init-from", &r.init_from}};
  for (const auto& [flag, given] : files) {
    if (*given && (*given)->empty()) throw usage_error(std::string(flag) + " needs a file name");
  }
  if (r.tokenizer && r.tokenizer->empty()) {
    throw usage_error("--tokenizer needs auto, bytes, gpt2, a tokenizer.json or a directory");
  }
  // Null: the text's own, trained on it (auto_tokenizer).
  std::shared_ptr<const Tokenizer> tokenizer =
      r.auto_tokenizer && !r.tokenizer && !r.data_tokens && !r.init_from
          ? nullptr
          : tokenizer_from_spec(name(r.tokenizer));
  if (r.data_tokens) {
    Dataset d = load_llmc_tokens(*r.data_tokens);
    if (r.tokenizer) d.tokenizer = std::move(tokenizer);  // what the ids mean
    return d;
  }
  if (r.data) return load_text_file(*r.data, std::move(tokenizer));
  return load_fortunes(kFortunesDir, std::move(tokenizer));
}

// A BPE tokenizer sets the vocabulary of a model that starts from scratch (V, padded to a
// multiple of 64 as llm.c pads GPT-2's 50257 to 50304); weights from a file keep theirs, which
// the tokenizer must fit, as must llm.c ids' model.
void fit_vocab(ModelConfig& model, const Dataset& d, bool model_from_file) {
  const TokenizerRecord t = tokenizer_record(d.tokenizer.get());
  if (t.kind == "none" || t.kind == "bytes") return;
  if (!model_from_file && d.kind == "text") {
    model.vocab = t.vocab, model.padded_vocab = padded_vocab_of(t.vocab);
    return;
  }
  if (t.vocab > model.vocab) {
    throw usage_error("--tokenizer " + t.source + " has " + std::to_string(t.vocab) +
                      " tokens, more than the model's vocab " + std::to_string(model.vocab));
  }
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

// The file sets the shape, the preset the recipe: a preset of another family would train this
// model under its name with its recipe (llama's z-loss).
ModelConfig model_of_file(const std::string& path, bool hf, const Preset& preset) {
  const ModelConfig m = hf ? read_hf_config(path) : read_llmc_config(path);
  if (preset.model.arch != m.arch) {
    throw usage_error("--init-from " + path + " holds a " + enum_name(m.arch) +
                      " model but --preset " + preset.name + " is " + enum_name(preset.model.arch) +
                      "; use a " + enum_name(m.arch) + " preset (e.g. " +
                      (m.arch == Arch::kGpt2 ? "gpt2-124m" : "llama-tiny") + ")");
  }
  return m;
}

// --layers, --heads, --channels, --max-seq over the preset's shape; the flag that conflicts
// with a model read from a file or a checkpoint (`source`) is a usage error.
void reshape(const RunRequest& r, ModelConfig& m, const std::string& source) {
  const std::pair<const char*, std::pair<const std::optional<int>*, int*>> flags[] = {
      {"--layers", {&r.layers, &m.layers}},
      {"--heads", {&r.heads, &m.heads}},
      {"--channels", {&r.channels, &m.channels}},
      {"--max-seq", {&r.max_seq, &m.max_seq}}};
  for (const auto& [flag, value] : flags) {
    if (!*value.first) continue;
    if (!source.empty()) {
      throw usage_error(std::string(flag) + " conflicts with " + source +
                        ", which sets the model's shape; leave " + flag + " out");
    }
    *value.second = **value.first;
  }
}

RunPlan fresh_plan(const RunRequest& r) {
  RunPlan p;
  const Preset& preset = find_preset(r.preset);
  p.preset = preset.name;
  p.model = preset.model;
  p.train = requested_config(r, preset.train, true);
  const std::string init_from = name(r.init_from);
  const bool hf = !init_from.empty() && is_hf_model_path(init_from);
  if (!init_from.empty()) p.model = model_of_file(init_from, hf, preset);
  reshape(r, p.model, init_from.empty() ? "" : "--init-from");
  validate(p.model, p.train);
  if (hf) check_hf_weights(init_from, p.model);  // before the model's memory is allocated
  const std::pair<const char*, bool> needs_out[] = {{"--save-every", r.save_every.has_value()},
                                                    {"--keep", r.keep.has_value()},
                                                    {"--stop-after", r.stop_after.has_value()}};
  for (const auto& [flag, given] : needs_out) {
    if (given && r.out.empty()) {
      throw usage_error(std::string(flag) + " needs --out DIR, where the checkpoints go");
    }
  }
  RunRequest request = r;
  request.tokenizer = init_tokenizer(r, p.model, hf);
  p.data = load_data(request);
  fit_vocab(p.model, p.data, !init_from.empty());
  // A preset's vocabulary does not apply: the file's is fixed (the Trainer checks again).
  if (!init_from.empty()) {
    check_vocab(p.data, p.model.vocab,
                "the model of --init-from " + init_from +
                    " has that vocabulary; pass the tokenizer it was trained with (--tokenizer)");
  }
  p.data_path = absolute_path(p.data.source);
  p.init_from = init_from;
  p.init = init_from.empty() ? "normal(0.02) from seed " + std::to_string(p.train.seed)
           : hf ? "hugging face " + std::string(enum_name(p.model.arch)) + " " + init_from
                : "llm.c checkpoint " + init_from;
  p.out = r.out, p.save_every = r.save_every.value_or(0), p.keep = r.keep.value_or(0);
  return p;
}

// A resumed run keeps its configuration: a flag that would change it is a usage error; only
// --steps may extend the run.
void check_resume_flags(const RunRequest& r, const CheckpointMeta& m) {
  if (r.init_from) {
    throw usage_error("--init-from conflicts with --resume: the weights come from the checkpoint");
  }
  if (r.preset_given && r.preset != m.preset) {
    throw usage_error("--preset " + r.preset + " conflicts with the checkpoint's preset " +
                      m.preset +
                      "; a resumed run keeps its configuration (only --steps may change)");
  }
  TrainConfig wanted = requested_config(r, m.train, false);
  wanted.steps = m.train.steps;
  const Json want = train_config_json(wanted), have = train_config_json(m.train);
  for (auto it = have.begin(); it != have.end(); ++it) {
    if (want.at(it.key()) == it.value()) continue;
    std::string flag = "--" + it.key();
    std::replace(flag.begin(), flag.end(), '_', '-');
    throw usage_error(flag + " " + want.at(it.key()).dump() + " conflicts with the checkpoint's " +
                      it.value().dump() +
                      "; a resumed run keeps its configuration (only --steps may change)");
  }
}

Dataset checked_hash(Dataset d, const DataSource& src) {
  if (d.hash != src.hash || d.kind != src.kind) {
    throw input_error("data " + d.source +
                      " is not the data the checkpoint was trained on (its hash differs); pass "
                      "that data with --data or --data-tokens");
  }
  return d;
}

// The checkpoint's data, from where it was (or from --data/--data-tokens, if it moved).
Dataset reload_data(const RunRequest& r, const DataSource& src) {
  std::shared_ptr<const Tokenizer> tokenizer = reload_tokenizer(src.tokenizer, name(r.tokenizer));
  if (r.data || r.data_tokens) {
    Dataset d = load_data(r);
    d.tokenizer = tokenizer;
    return checked_hash(std::move(d), src);
  }
  const std::string flag = src.kind == "llmc-tokens" ? "--data-tokens" : "--data";
  std::error_code ec;
  if (!std::filesystem::exists(src.path, ec)) {
    throw input_error("the checkpoint's data " + printable(src.path, 200) +
                      " does not exist; if it moved, pass it with " + flag + " FILE");
  }
  // Only the fortunes corpus is a directory of data; a checkpoint naming another directory
  // (crafted, or the corpus moved) would have every file in it read as fortunes.
  const bool fortunes = src.kind == "text" && src.path == kFortunesDir;
  if (!fortunes && std::filesystem::is_directory(src.path, ec)) {
    throw input_error("the checkpoint's data " + printable(src.path, 200) +
                      " is a directory, not the data file it names; pass the data with " + flag);
  }
  Dataset d = src.kind == "llmc-tokens" ? load_llmc_tokens(src.path)
              : fortunes                ? load_fortunes(src.path, tokenizer)
                                        : load_text_file(src.path, tokenizer);
  d.tokenizer = tokenizer;
  d.source = src.source;  // the name the run's trace and checkpoints know it by
  return checked_hash(std::move(d), src);
}

// The steps the resumed run takes: to its end, or to --steps, which must be past the checkpoint.
int resumed_steps(const RunRequest& r, const Checkpoint& c) {
  const CheckpointMeta& m = c.meta;
  if (r.steps) {
    if (*r.steps <= m.step) {
      throw usage_error("--steps " + std::to_string(*r.steps) +
                        " is not past the checkpoint's step " + std::to_string(m.step) +
                        "; pass a larger --steps");
    }
    return *r.steps;
  }
  if (m.step >= m.train.steps) {
    throw usage_error("checkpoint " + c.path + " is at step " + std::to_string(m.step) +
                      ", the end of its run; pass --steps N (N > " + std::to_string(m.step) +
                      ") to train further");
  }
  return m.train.steps;
}

RunPlan resume_plan(const RunRequest& r) {
  RunPlan p;
  p.ckpt = std::make_unique<Checkpoint>(read_checkpoint(r.resume));
  const CheckpointMeta& m = p.ckpt->meta;
  check_resume_flags(r, m);
  reshape(r, p.model, "--resume");
  p.preset = m.preset, p.init = m.init, p.model = m.model, p.train = m.train;
  MicroBatches::split(m.train.grad_accum, r.ranks);  // before the data loads
  p.start = int(m.step);
  p.train.steps = resumed_steps(r, *p.ckpt);
  p.data = reload_data(r, m.data);
  p.data_path = r.data || r.data_tokens ? absolute_path(p.data.source) : m.data.path;
  p.out = !r.out.empty() ? r.out : std::filesystem::path(p.ckpt->path).parent_path().string();
  if (p.out.empty()) p.out = ".";
  p.save_every = r.save_every.value_or(m.save_every);
  p.keep = r.keep.value_or(m.keep);
  return p;
}

}  // namespace

RunPlan plan_run(const RunRequest& r, Comm& comm) {
  if (!comm.root()) comm.barrier();
  RunPlan p = r.resume.empty() ? fresh_plan(r) : resume_plan(r);
  if (comm.root()) comm.barrier();
  if (r.stop_after && *r.stop_after <= p.start) {
    throw usage_error("--stop-after " + std::to_string(*r.stop_after) +
                      " is not past the run's step " + std::to_string(p.start));
  }
  p.stop = r.stop_after ? std::min(*r.stop_after, p.train.steps) : p.train.steps;
  return p;
}

void initialise(Trainer& trainer, RunPlan& p) {
  if (p.ckpt) {
    restore_model(*p.ckpt, trainer.model());
    restore_optimizer(*p.ckpt, trainer.optimizer());
    trainer.set_updates(p.ckpt->meta.updates);
    p.ckpt->file.tensors.clear();  // now in the trainer's buffers
  } else if (!p.init_from.empty()) {
    Model& m = trainer.model();
    if (is_hf_model_path(p.init_from)) {
      load_hf_weights(p.init_from, p.model, m.layout(), m.weights());
    } else {
      load_llmc_weights(p.init_from, p.model, m.layout(), m.weights());
    }
    trainer.weights_loaded();
  }
}

namespace {

// What decides when the ranks enter a collective save (or leave the loop): a rank that
// disagrees would wait in a save the others never start, forever.
struct SaveSchedule {
  int64_t values[5];
};
constexpr const char* kScheduleFlags[5] = {"--out", "--save-every", "--keep", "--stop-after",
                                           "the resumed step"};

SaveSchedule save_schedule(const RunPlan& p) {
  return {{p.out.empty() ? 0 : 1, p.save_every, p.keep, p.stop, p.start}};
}

std::string schedule_value(int field, int64_t v) {
  if (field == 0) return v ? "given" : "not given";
  return std::to_string(v);
}

}  // namespace

void check_ranks_agree(Comm& comm, const Json& run, const RunPlan& p) {
  if (comm.size() == 1) return;
  const std::string text = run.dump();
  const uint64_t mine = fnv1a64_bytes(text);
  std::vector<uint64_t> all(size_t(comm.size()));
  comm.allgather(&mine, all.data(), sizeof mine);
  for (int r = 1; r < comm.size(); ++r) {
    if (all[size_t(r)] == all[0]) continue;
    throw input_error("rank " + std::to_string(r) +
                      " would train another run than rank 0 (its data or configuration differs: "
                      "run-line hash " +
                      data_hash_text(all[size_t(r)]) + " vs " + data_hash_text(all[0]) +
                      "); every rank must read the same data and flags");
  }
  const SaveSchedule own = save_schedule(p);
  std::vector<SaveSchedule> schedules(size_t(comm.size()));
  comm.allgather(&own, schedules.data(), sizeof own);
  for (int r = 1; r < comm.size(); ++r) {
    for (int f = 0; f < 5; ++f) {
      const int64_t theirs = schedules[size_t(r)].values[f], root = schedules[0].values[f];
      if (theirs == root) continue;
      throw usage_error("rank " + std::to_string(r) + "'s " + kScheduleFlags[f] + " (" +
                        schedule_value(f, theirs) + ") differs from rank 0's (" +
                        schedule_value(f, root) +
                        "); every rank must be given the same checkpoint flags, or the ranks "
                        "would wait for each other's saves forever");
    }
  }
}

std::vector<Json> trace_head(const std::string& path, const Json& run, const RunPlan& p,
                             size_t& dropped_line) {
  dropped_line = 0;
  if (!p.ckpt) return {run};
  const auto stored = p.ckpt->file.metadata.find("run");
  // Depth-checked first (a string inside the header, which the header's own limit misses); a
  // run line too deep or not JSON is no run line, as a missing one.
  const Json ckpt_run =
      stored == p.ckpt->file.metadata.end() || json_nested_deeper_than(stored->second, 16)
          ? Json()
          : Json::parse(stored->second, nullptr, /*allow_exceptions=*/false);
  ContinuedTrace old = continued_trace(path, run, ckpt_run, p.start);
  dropped_line = old.dropped_line;
  std::vector<Json> head = std::move(old.head);
  if (head.empty()) head.push_back(run);
  head.push_back({{"type", "resume"}, {"step", p.start}, {"checkpoint", p.ckpt->path}});
  return head;
}

}  // namespace reftrain
