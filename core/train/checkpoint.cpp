#include "core/train/checkpoint.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/sysmacros.h>  // major(), minor(); <sys/types.h> has them on macOS and the BSDs
#endif
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include "core/base/crc32c.h"
#include "core/base/error.h"
#include "core/base/json_depth.h"
#include "core/formats/atomic_file.h"
#include "core/train/data.h"
#include "core/train/run_config.h"
#include "optim/adamw8bit.h"
#include "optim/schedule.h"

namespace reftrain {

namespace fs = std::filesystem;

// ---- configuration as JSON, exact both ways ----------------------------------------------------

// "activation" is written only where it is not the default tanh GELU, so the config of every
// model that existed before the erf GELU keeps its bytes (the golden runs' config.json).
Json model_config_json(const ModelConfig& m) {
  Json j = {{"arch", enum_name(m.arch)},      {"layers", m.layers},   {"heads", m.heads},
            {"channels", m.channels},         {"max_seq", m.max_seq}, {"vocab", m.vocab},
            {"padded_vocab", m.padded_vocab}, {"ffn", m.ffn},         {"rope_theta", m.rope_theta}};
  if (m.activation != Activation::kGeluTanh) j["activation"] = enum_name(m.activation);
  return j;
}

namespace {

ModelConfig parse_model(const Json& j) {
  const JsonFields f(j, "config.model");
  ModelConfig m;
  m.arch = f.choice<Arch>("arch");
  // Bounds before anything is sized from these: a corrupt file must not allocate terabytes.
  m.layers = int(f.integer("layers", 1, 1024));
  m.heads = int(f.integer("heads", 1, 1024));
  m.channels = int(f.integer("channels", 1, 1 << 16));
  m.max_seq = int(f.integer("max_seq", 1, 1 << 20));
  m.vocab = int(f.integer("vocab", 1, 1 << 20));
  m.padded_vocab = int(f.integer("padded_vocab", m.vocab, 1 << 20));
  m.ffn = int(f.integer("ffn", m.arch == Arch::kLlama ? 1 : 0, 1 << 20));
  m.rope_theta = f.real("rope_theta");
  if (!(m.rope_theta > 0)) throw std::runtime_error("config.model.rope_theta must be positive");
  if (j.contains("activation")) m.activation = f.choice<Activation>("activation");
  return m;
}

uint64_t parse_hash(const std::string& s) {
  const std::string prefix = "fnv1a64:";
  const bool ok = s.size() == prefix.size() + 16 && s.compare(0, prefix.size(), prefix) == 0 &&
                  s.find_first_not_of("0123456789abcdef", prefix.size()) == std::string::npos;
  if (!ok) throw std::runtime_error("data.hash must look like fnv1a64:<16 hex digits>");
  return std::strtoull(s.c_str() + prefix.size(), nullptr, 16);
}

// ---- the tensors: one list drives saving, validating and restoring ----------------------------

enum class Buf { kWeights, kM, kV, kKahan, kMCodes, kVCodes, kMScales, kVScales };

struct StateTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  Buf buf;
  size_t offset;  // elements into the buffer
  size_t bytes;
};

// kahan: bf16-kahan's compensation too, bf16 in the weight's shape (optimizer.kahan.<name>).
std::vector<StateTensor> state_tensors(const ParamLayout& layout, Optimizer kind, bool kahan) {
  std::vector<StateTensor> out;
  auto add = [&out](std::string name, DType dtype, std::vector<int64_t> shape, Buf buf,
                    size_t offset) {
    size_t bytes = dtype_size(dtype);
    for (int64_t d : shape) bytes *= size_t(d);
    out.push_back({std::move(name), dtype, std::move(shape), buf, offset, bytes});
  };
  for (const ParamTensor& t : layout.tensors()) {
    add(t.name, DType::kF32, std::vector<int64_t>(t.shape.begin(), t.shape.end()), Buf::kWeights,
        t.offset);
  }
  if (kind == Optimizer::kAdamW) {
    for (const ParamTensor& t : layout.tensors()) {
      const std::vector<int64_t> shape(t.shape.begin(), t.shape.end());
      add("optimizer.m." + t.name, DType::kF32, shape, Buf::kM, t.offset);
      add("optimizer.v." + t.name, DType::kF32, shape, Buf::kV, t.offset);
      if (kahan) add("optimizer.kahan." + t.name, DType::kBF16, shape, Buf::kKahan, t.offset);
    }
  } else {
    const int64_t codes = int64_t(quant_words(layout.total()) * 4);
    const int64_t scales = int64_t(quant_scale_count(layout.wd_end(), layout.total()));
    add("optimizer.m_codes", DType::kU8, {codes}, Buf::kMCodes, 0);
    add("optimizer.v_codes", DType::kU8, {codes}, Buf::kVCodes, 0);
    add("optimizer.m_scales", DType::kF32, {scales}, Buf::kMScales, 0);
    add("optimizer.v_scales", DType::kF32, {scales}, Buf::kVScales, 0);
  }
  return out;
}

// Where optimizer tensor `b`'s kind of state lives: the bytes an OptimizerState holds, and where
// they start in the whole state (a sharded state holds a part: optimizer.h). The weights live in
// the model.
struct StateBytes {
  uint8_t* data;
  size_t begin, bytes;  // the whole state's bytes [begin, begin + bytes)
};
StateBytes optimizer_bytes(Buf b, OptimizerState& opt) {
  const auto of = [](auto& buffer, size_t first) {
    using T = std::remove_reference_t<decltype(*buffer.data())>;
    return StateBytes{reinterpret_cast<uint8_t*>(buffer.data()), first * sizeof(T),
                      buffer.size() * sizeof(T)};
  };
  switch (b) {
    case Buf::kM:
      return of(opt.m(), opt.shard().begin);
    case Buf::kV:
      return of(opt.v(), opt.shard().begin);
    case Buf::kKahan:
      return of(opt.kahan(), opt.shard().begin);
    case Buf::kMCodes:  // four codes per word: the word of element i holds byte i
      return {reinterpret_cast<uint8_t*>(opt.m_codes().data()), opt.shard().begin,
              opt.m_codes().size() * sizeof(uint32_t)};
    case Buf::kVCodes:
      return {reinterpret_cast<uint8_t*>(opt.v_codes().data()), opt.shard().begin,
              opt.v_codes().size() * sizeof(uint32_t)};
    case Buf::kMScales:
      return of(opt.m_scales(), opt.first_scale());
    case Buf::kVScales:
      return of(opt.v_scales(), opt.first_scale());
    case Buf::kWeights:
      break;
  }
  throw std::logic_error("optimizer_bytes: the weights are the model's");
}

// Tensor t's bytes in the whole state: weights-shaped m, v and compensation sit at their tensor's
// offset.
size_t state_byte_offset(const StateTensor& t) {
  if (t.buf == Buf::kKahan) return t.offset * sizeof(bf16);
  return t.buf == Buf::kM || t.buf == Buf::kV ? t.offset * sizeof(float) : t.offset;
}

bool kahan_state(const TrainConfig& t) {
  return t.precision == Precision::kBf16Kahan;
}

// ---- metadata ---------------------------------------------------------------------------------

Json layout_json(const ParamLayout& layout) {
  Json offsets = Json::object();
  for (const ParamTensor& t : layout.tensors()) offsets[t.name] = t.offset;
  return {{"total", layout.total()}, {"wd_end", layout.wd_end()}, {"offsets", offsets}};
}

// The derived state, written for people and GPU twins: nothing here is read back, since the
// generator is counter-based and the schedule a function of (config, step).
void add_derived_state(std::map<std::string, std::string>& md, const CheckpointMeta& m,
                       const ParamLayout& layout) {
  const TrainConfig& t = m.train;
  md["rng"] =
      json_text(Json{{"generator", "philox4x32-10"},
                     {"seed", t.seed},
                     {"state", "counter-based: every draw is a function of (seed, stream, index)"},
                     {"next_train_batch", m.step}});
  Json schedule = schedule_json(t);
  schedule["next_step"] = m.step;
  const int next = int(std::min<int64_t>(m.step, INT32_MAX));
  schedule["next_lr"] = json_float(learning_rate(lr_schedule(t), next));
  md["schedule"] = json_text(schedule);
  const bool q8 = t.optimizer == Optimizer::kAdamW8bit;
  md["optimizer"] = json_text(
      Json{{"name", enum_name(t.optimizer)},
           {"t", m.updates},
           {"state", q8 ? "optimizer.{m,v}_codes: one byte per mega-buffer element; "
                          "optimizer.{m,v}_scales: one per 256-element block, wd range first"
                     : kahan_state(t)
                         ? "optimizer.m.<name>, optimizer.v.<name>: fp32, the weight's shape; "
                           "optimizer.kahan.<name>: bf16, the compensation carried into the "
                           "next step"
                         : "optimizer.m.<name>, optimizer.v.<name>: fp32, the weight's shape"},
           {"fp16_mirror", t.precision == Precision::kMixed
                               ? "not stored: f16(clamp(w, +-65504)), round to nearest even"
                           : t.precision == Precision::kBf16
                               ? "none; the bf16 mirror is not stored: bf16(w), round to "
                                 "nearest even, subnormals to 0"
                           : bf16_only_weights(t.precision)
                               ? "none; the weights are bf16 values (stored widened to fp32), "
                                 "the mirror their bits"
                               : "none (fp32 run)"}});
  md["layout"] = json_text(layout_json(layout));
}

// JSON text is UTF-8, a file name need not be (a Latin-1 name): such a string is written as its
// printable form (U+FFFD for the bad bytes) under `key` and its exact bytes, as hex, under
// key + "_hex", which the reader prefers. A UTF-8 string is written as it is, alone.
bool is_utf8(const std::string& s) {
  try {
    (void)Json(s).dump();
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

void put_lossless(Json& j, const std::string& key, const std::string& value) {
  j[key] = value;
  if (is_utf8(value)) return;
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (const unsigned char c : value) hex += digits[c >> 4], hex += digits[c & 15];
  j[key + "_hex"] = hex;
}

std::string get_lossless(const JsonFields& f, const std::string& key) {
  const std::string hex_key = key + "_hex";
  if (!f.has(hex_key.c_str())) return f.text(key.c_str());
  const std::string hex = f.text(hex_key.c_str());
  const auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size() && hex.size() % 2 == 0; i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) break;
    bytes += char(hi * 16 + lo);
  }
  if (hex.empty() || bytes.size() * 2 != hex.size()) {
    throw std::runtime_error("data." + hex_key + " must be lowercase hex digits, two per byte");
  }
  return bytes;
}

// data.tokenizer: {"kind": "bytes"} or {"kind": "none"}, or a BPE tokenizer's kind, source
// (lossless, as data.source), hash and vocab.
Json tokenizer_json(const TokenizerRecord& t) {
  Json j = {{"kind", t.kind}};
  if (t.kind == "bytes" || t.kind == "none") return j;
  put_lossless(j, "source", t.source);
  j["hash"] = data_hash_text(t.hash);
  j["vocab"] = t.vocab;
  return j;
}

TokenizerRecord parse_tokenizer(const Json& j) {
  const JsonFields f(j, "data.tokenizer");
  TokenizerRecord t;
  t.kind = f.text("kind");
  if (t.kind == "bytes") return t;
  if (t.kind == "none") return {"none", "", 0, 0};
  if (t.kind != "gpt2" && t.kind != "bpe") {
    throw std::runtime_error("data.tokenizer.kind must be bytes, none, gpt2 or bpe");
  }
  t.source = get_lossless(f, "source");
  t.hash = parse_hash(f.text("hash"));
  t.vocab = int(f.integer("vocab", 1, INT32_MAX));
  return t;
}

std::map<std::string, std::string> metadata(const CheckpointMeta& m, const Json& run,
                                            const ParamLayout& layout) {
  std::map<std::string, std::string> md;
  md["format"] = kCheckpointFormat;
  md["format_version"] = std::to_string(kCheckpointVersion);
  md["step"] = std::to_string(m.step);
  md["updates"] = std::to_string(m.updates);
  md["config"] = json_text(Json{{"preset", m.preset},
                                {"model", model_config_json(m.model)},
                                {"train", train_config_json(m.train)}});
  md["init"] = m.init;
  Json data = {{"kind", m.data.kind},
               {"hash", data_hash_text(m.data.hash)},
               {"next_batch", m.step * m.train.grad_accum}};
  put_lossless(data, "source", m.data.source);
  put_lossless(data, "path", m.data.path);
  data["tokenizer"] = tokenizer_json(m.data.tokenizer);
  md["data"] = json_text(data);
  md["checkpointing"] = json_text(Json{{"save_every", m.save_every}, {"keep", m.keep}});
  md["run"] = json_text(run);
  if (std::isfinite(m.val_loss)) md["val_loss"] = json_text(json_float(m.val_loss));
  add_derived_state(md, m, layout);
  return md;
}

const std::string& meta_value(const std::map<std::string, std::string>& md, const char* key) {
  const auto it = md.find(key);
  if (it == md.end()) throw std::runtime_error(std::string("no \"") + key + "\" metadata");
  return it->second;
}

Json meta_json(const std::map<std::string, std::string>& md, const char* key) {
  const std::string& text = meta_value(md, key);
  // A metadata value is a string, which the header's depth limit does not reach into: a 16 MiB
  // "[[[[" here would cost ~640 MB to parse. reftrain's metadata nests 3 levels.
  if (json_nested_deeper_than(text, 16)) {
    throw std::runtime_error(std::string(key) + " metadata nests deeper than 16 levels");
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw std::runtime_error(std::string(key) + " metadata is not JSON");
  return j;
}

int64_t meta_integer(const std::map<std::string, std::string>& md, const char* key) {
  const std::string& s = meta_value(md, key);
  const bool ok = !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == s.npos;
  if (!ok) throw std::runtime_error(std::string(key) + " metadata must be an integer >= 0");
  return std::stoll(s);
}

CheckpointMeta parse_meta(const std::map<std::string, std::string>& md) {
  const auto format = md.find("format");
  if (format == md.end() || format->second != kCheckpointFormat) {
    throw std::runtime_error("not a reftrain checkpoint (no \"format\": \"reftrain-checkpoint\")");
  }
  const int64_t version = meta_integer(md, "format_version");
  if (version != kCheckpointVersion) {
    throw std::runtime_error("checkpoint format version " + std::to_string(version) +
                             "; this reftrain reads version " + std::to_string(kCheckpointVersion));
  }
  CheckpointMeta m;
  const Json config = meta_json(md, "config");
  m.preset = JsonFields(config, "config").text("preset");
  m.model = parse_model(config.value("model", Json()));
  m.train = parse_train_config(config.value("train", Json()));
  m.step = meta_integer(md, "step");
  m.updates = meta_integer(md, "updates");
  if (m.step > m.train.steps || m.updates > m.step) {
    throw std::runtime_error("step " + std::to_string(m.step) + " and updates " +
                             std::to_string(m.updates) + " do not fit a " +
                             std::to_string(m.train.steps) + "-step run");
  }
  m.init = meta_value(md, "init");
  if (md.count("val_loss")) {
    m.val_loss =
        JsonFields(Json{{"val_loss", meta_json(md, "val_loss")}}, "checkpoint").real32("val_loss");
  }
  const Json data_json = meta_json(md, "data");
  const JsonFields data(data_json, "data");
  m.data = {data.text("kind"),
            get_lossless(data, "source"),
            get_lossless(data, "path"),
            parse_hash(data.text("hash")),
            {}};
  if (m.data.kind != "text" && m.data.kind != "llmc-tokens") {
    throw std::runtime_error("data.kind must be \"text\" or \"llmc-tokens\"");
  }
  // A checkpoint from before tokenizers were recorded: text was bytes, llm.c ids unknown.
  m.data.tokenizer = data.has("tokenizer")   ? parse_tokenizer(data_json.at("tokenizer"))
                     : m.data.kind == "text" ? TokenizerRecord{}
                                             : TokenizerRecord{"none", "", 0, 0};
  if (m.data.tokenizer.vocab > m.model.vocab) {
    throw std::runtime_error("data.tokenizer.vocab " + std::to_string(m.data.tokenizer.vocab) +
                             " is larger than the model's vocab " + std::to_string(m.model.vocab));
  }
  const JsonFields saving(meta_json(md, "checkpointing"), "checkpointing");
  m.save_every = int(saving.integer("save_every", 0, INT32_MAX));
  m.keep = int(saving.integer("keep", 0, INT32_MAX));
  return m;
}

// ---- files ------------------------------------------------------------------------------------

std::string resolve(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw input_error("checkpoint " + path + " does not exist");
  if (!fs::is_directory(path, ec)) return path;
  const auto all = list_checkpoints(path);
  if (all.empty()) {
    throw input_error("directory " + path +
                      " holds no checkpoints (ckpt-*.safetensors); name a checkpoint file or the "
                      "--out directory of a run");
  }
  return all.back().second;
}

void pause_before_rename(const std::string& tmp, const std::string& path) {
  const char* env = std::getenv("REFTRAIN_DEBUG_SAVE_PAUSE");
  const double seconds = env ? std::strtod(env, nullptr) : 0.0;
  if (!(seconds > 0)) return;
  std::fprintf(stderr,
               "debug: REFTRAIN_DEBUG_SAVE_PAUSE: %s is written and synced; pausing %g s before "
               "renaming it to %s\n",
               tmp.c_str(), seconds, path.c_str());
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// Weights must be finite (the optimizer state need not be: an 8-bit v block may be +Inf).
void check_finite(const std::string& name, const SafeTensor& t) {
  const std::vector<float> w = t.as<float>();
  for (size_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(w[i])) {
      throw std::runtime_error("weight " + name + " element " + std::to_string(i) +
                               " is not finite (" + std::to_string(w[i]) +
                               "); the checkpoint cannot be used");
    }
  }
}

// The pid holding a flock on the file `st` describes, from /proc/locks ("1: FLOCK ADVISORY
// WRITE <pid> <major>:<minor>:<inode> 0 EOF", device numbers in hex); 0 when not found.
long flock_holder(const struct stat& st) {
  char want[64];
  std::snprintf(want, sizeof want, "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  std::ifstream in("/proc/locks");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, kind, mode, access, pid, file;
    fields >> id >> kind >> mode >> access >> pid >> file;
    if (kind == "FLOCK" && file == want) return std::strtol(pid.c_str(), nullptr, 10);
  }
  return 0;
}

// The optimizer state may hold +Inf (a v that overflowed, an 8-bit block's scale) but never NaN,
// and v and the scales are never negative: such a state would make the resumed run's updates NaN,
// and its NaN stop would then advise lowering --lr for what is a damaged file.
void check_optimizer_state(const StateTensor& t, const SafeTensor& s) {
  if (t.dtype == DType::kBF16) {  // the compensation: any sign, never NaN
    const std::vector<uint16_t> x = s.bf16_bits();
    for (size_t i = 0; i < x.size(); ++i) {
      if ((x[i] & 0x7FFF) > 0x7F80) {
        throw std::runtime_error("optimizer state " + t.name + " element " + std::to_string(i) +
                                 " is NaN; the checkpoint is damaged and cannot be resumed");
      }
    }
  }
  if (t.dtype != DType::kF32) return;  // 8-bit codes: every byte is a valid code
  const bool signed_ok = t.buf == Buf::kM;
  const std::vector<float> x = s.as<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || (!signed_ok && x[i] < 0)) {
      throw std::runtime_error("optimizer state " + t.name + " element " + std::to_string(i) +
                               " is " + (std::isnan(x[i]) ? "NaN" : "negative") +
                               "; the checkpoint is damaged and cannot be resumed");
    }
  }
}

constexpr const char* kChecksumAlgorithm = "crc32c";

std::string hex32(uint32_t x) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", x);
  return buf;
}

// {"algorithm": "crc32c", "tensors": {name: 8 hex digits}} over each tensor's bytes as stored.
std::string checksums_json(const std::vector<TensorRef>& refs) {
  Json sums = Json::object();
  for (const TensorRef& r : refs) {
    size_t bytes = dtype_size(r.dtype);
    for (int64_t d : r.shape) bytes *= size_t(d);
    sums[r.name] = hex32(crc32c(r.data, bytes));
  }
  return json_text(Json{{"algorithm", kChecksumAlgorithm}, {"tensors", sums}});
}

// The stored checksums' "tensors" object; null when the file has none (written before they were).
Json stored_checksums(const std::map<std::string, std::string>& md) {
  if (md.find("checksums") == md.end()) return Json();
  const Json j = meta_json(md, "checksums");
  if (!j.is_object() || j.value("algorithm", Json()) != kChecksumAlgorithm ||
      !j.contains("tensors") || !j.at("tensors").is_object()) {
    throw std::runtime_error(
        "checksums metadata must be {\"algorithm\": \"crc32c\", "
        "\"tensors\": {...}}");
  }
  return j.at("tensors");
}

void check_checksum(const std::string& name, const SafeTensor& s, const Json& sums) {
  if (sums.is_null()) return;
  const auto it = sums.find(name);
  if (it == sums.end() || !it->is_string()) {
    throw std::runtime_error("checksums metadata lacks tensor " + name);
  }
  const std::string got = hex32(crc32c(s.bytes.data(), s.bytes.size()));
  if (got != it->get<std::string>()) {
    throw std::runtime_error("tensor " + name + " does not match its checksum (crc32c " + got +
                             ", stored " + printable(it->get<std::string>()) +
                             "): the file was damaged after it was written");
  }
}

bool is_stale_tmp(const std::string& name) {
  const std::string suffix = ".safetensors.tmp";
  return name.rfind(".ckpt-", 0) == 0 && name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string checkpoint_file_name(int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "ckpt-%08lld.safetensors", static_cast<long long>(step));
  return buf;
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = "ckpt-", suffix = ".safetensors";
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    if (!e.is_regular_file(ec)) continue;
    out.emplace_back(std::stoll(digits), e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

DirLock::DirLock(const std::string& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0)
    throw input_error("cannot open checkpoint directory " + dir + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int err = errno;
  struct stat st = {};
  const long pid = ::fstat(fd_, &st) == 0 ? flock_holder(st) : 0;
  ::close(fd_);
  fd_ = -1;
  if (err != EWOULDBLOCK) {
    throw input_error("cannot lock checkpoint directory " + dir + ": " + std::strerror(err));
  }
  throw usage_error("--out " + dir + " is in use by another reftrain run (" +
                    (pid > 0 ? "pid " + std::to_string(pid) : std::string("pid unknown")) +
                    "); wait for it to end, or choose another --out");
}

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  std::swap(fd_, other.fd_);
  return *this;
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

DirLock prepare_checkpoint_dir(const std::string& dir, int64_t start_step) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw input_error("checkpoint directory " + dir +
                      " exists and is not a directory; choose another --out");
  }
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    throw input_error("cannot create checkpoint directory " + dir + ": " + ec.message() +
                      "; choose another --out");
  }
  // Under the lock only: another run's .tmp file is its save in progress, not an orphan.
  DirLock lock(dir);
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (is_stale_tmp(e.path().filename().string())) fs::remove(e.path(), ec);
  }
  const std::string probe = (fs::path(dir) / ".reftrain-write-test").string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw input_error("checkpoint directory " + dir + " is not writable: " +
                      describe_write_error(errno) + "; choose another --out");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  const auto existing = list_checkpoints(dir);
  if (!existing.empty() && existing.back().first > start_step) {
    const std::string newest = "step " + std::to_string(existing.back().first);
    throw usage_error(start_step == 0 ? "--out " + dir + " already holds checkpoints (newest at " +
                                            newest + "): continue that run with --resume " + dir +
                                            ", or choose another --out"
                                      : "--out " + dir + " holds checkpoints after step " +
                                            std::to_string(start_step) + " (newest at " + newest +
                                            "), so it would mix two runs; choose another --out");
  }
  return lock;
}

std::string save_checkpoint(const std::string& dir, const CheckpointMeta& meta, const Json& run,
                            Model& model, OptimizerState& optimizer) {
  const std::string path = (fs::path(dir) / checkpoint_file_name(meta.step)).string();
  std::vector<TensorRef> refs;
  for (const StateTensor& t :
       state_tensors(model.layout(), meta.train.optimizer, kahan_state(meta.train))) {
    const void* data = static_cast<const void*>(model.weights() + t.offset);
    if (t.buf != Buf::kWeights) {
      const StateBytes held = optimizer_bytes(t.buf, optimizer);
      if (held.begin != 0) throw std::logic_error("save_checkpoint: a sharded optimizer state");
      data = held.data + state_byte_offset(t);
    }
    refs.push_back({t.name, t.dtype, t.shape, data});
  }
  std::map<std::string, std::string> md = metadata(meta, run, model.layout());
  md["checksums"] = checksums_json(refs);
  try {
    write_safetensors(path, refs, md, pause_before_rename);
  } catch (const UserError& e) {
    throw input_error("saving the checkpoint of step " + std::to_string(meta.step) +
                      " failed: " + e.what() + "; the previous checkpoint is intact");
  }
  return path;
}

namespace {

Checkpoint read_checkpoint_file(const std::string& path) {
  Checkpoint c;
  c.path = path;
  c.file = read_safetensors(c.path);
  try {
    c.meta = parse_meta(c.file.metadata);
    validate(c.meta.model, c.meta.train);
    const ParamLayout layout = param_layout(c.meta.model);
    const Json sums = stored_checksums(c.file.metadata);
    for (const StateTensor& t :
         state_tensors(layout, c.meta.train.optimizer, kahan_state(c.meta.train))) {
      const SafeTensor& s = c.file.get(t.name, t.shape);
      if (s.dtype != t.dtype) {
        throw std::runtime_error("tensor '" + t.name + "' is " + dtype_name(s.dtype) +
                                 ", expected " + dtype_name(t.dtype));
      }
      if (t.buf == Buf::kWeights) {
        check_finite(t.name, s);
      } else {
        check_optimizer_state(t, s);
      }
      check_checksum(t.name, s, sums);
    }
  } catch (const std::exception& e) {
    const std::string what = e.what();
    // SafetensorsFile::get already names the file.
    if (what.rfind(c.path, 0) == 0) throw input_error(what);
    throw input_error(c.path + ": " + what);
  }
  return c;
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path) {
  const std::string newest = resolve(path);
  try {
    return read_checkpoint_file(newest);
  } catch (const UserError& e) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) throw;
    // A run killed mid-copy or a failing disk leaves the newest file damaged: name the newest
    // one that reads, rather than leaving the user to try them one by one.
    const auto all = list_checkpoints(path);
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (it->second == newest) continue;
      try {
        read_checkpoint_file(it->second);
      } catch (const UserError&) {
        continue;
      }
      throw input_error(std::string(e.what()) + "; the newest intact checkpoint is " + it->second +
                        ": move " + newest + " away and resume again");
    }
    throw;
  }
}

void restore_model(const Checkpoint& ckpt, Model& model) {
  for (const ParamTensor& p : model.layout().tensors()) {
    const SafeTensor& s =
        ckpt.file.get(p.name, std::vector<int64_t>(p.shape.begin(), p.shape.end()));
    std::memcpy(model.weights() + p.offset, s.bytes.data(), s.bytes.size());
  }
  model.refresh_mirror();
}

void restore_optimizer(const Checkpoint& ckpt, OptimizerState& optimizer) {
  const bool kahan = kahan_state(ckpt.meta.train);
  if (optimizer.kind() != ckpt.meta.train.optimizer || optimizer.has_kahan() != kahan) {
    throw std::logic_error("restore_optimizer: the optimizer was not made from the checkpoint");
  }
  const ParamLayout layout = param_layout(ckpt.meta.model);
  for (const StateTensor& t : state_tensors(layout, ckpt.meta.train.optimizer, kahan)) {
    if (t.buf == Buf::kWeights) continue;
    const SafeTensor& s = ckpt.file.get(t.name, t.shape);
    // The part of the tensor the state holds (all of it, unless the state is a shard).
    const StateBytes held = optimizer_bytes(t.buf, optimizer);
    const size_t at = state_byte_offset(t);
    const size_t begin = std::max(at, held.begin);
    const size_t end = std::min(at + t.bytes, held.begin + held.bytes);
    if (begin < end) {
      std::memcpy(held.data + (begin - held.begin), s.bytes.data() + (begin - at), end - begin);
    }
  }
}

void keep_only_checkpoint(const std::string& dir, const std::string& path) {
  for (const auto& [step, other] : list_checkpoints(dir)) {
    std::error_code ec;
    if (other == path || (!fs::remove(other, ec) && !ec)) continue;
    if (ec) {
      throw input_error("cannot remove the former best checkpoint " + other + ": " + ec.message() +
                        "; check the permissions of " + dir);
    }
  }
}

void prune_checkpoints(const std::string& dir, int keep) {
  if (keep <= 0) return;
  const auto all = list_checkpoints(dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) {
    std::error_code ec;
    if (!fs::remove(all[i].second, ec) && ec) {
      throw input_error("cannot remove old checkpoint " + all[i].second + " (--keep " +
                        std::to_string(keep) + "): " + ec.message());
    }
  }
}

}  // namespace reftrain
