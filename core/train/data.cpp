#include "core/train/data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/base/crc32c.h"
#include "core/base/error.h"
#include "core/formats/atomic_file.h"
#include "core/formats/input_file.h"
#include "core/tokenizer/bpe_train.h"

namespace reftrain {

namespace fs = std::filesystem;

std::vector<uint16_t> encode_bytes(const std::string& text) {
  std::vector<uint16_t> t(text.size());
  for (size_t i = 0; i < text.size(); ++i) t[i] = static_cast<unsigned char>(text[i]);
  return t;
}

std::string decode_bytes(const std::vector<int32_t>& tokens) {
  std::string s;
  for (int32_t t : tokens) s += static_cast<char>(t & 0xff);
  return s;
}

std::string data_hash_text(uint64_t hash) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

namespace {

uint64_t fnv1a64(const std::vector<uint16_t>& tokens) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint16_t t : tokens) {
    for (int byte = 0; byte < 2; ++byte) {
      h ^= (t >> (8 * byte)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

Dataset split(std::string kind, std::string source, std::vector<uint16_t> tokens,
              std::shared_ptr<const Tokenizer> tokenizer) {
  Dataset d;
  d.kind = std::move(kind);
  d.source = std::move(source);
  d.tokenizer = std::move(tokenizer);
  d.hash = fnv1a64(tokens);
  const size_t n_train = tokens.size() * 9 / 10;
  d.val.assign(tokens.begin() + std::ptrdiff_t(n_train), tokens.end());
  tokens.resize(n_train);
  d.train = std::move(tokens);
  if (d.tokenizer) {
    d.train_bytes = text_bytes(d.train, *d.tokenizer);
    d.val_bytes = text_bytes(d.val, *d.tokenizer);
  }
  return d;
}

std::string read_text(const std::string& path) {
  return InputFile(path, "data file").read_all();
}

std::string hex16(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// $XDG_CACHE_HOME/reftrain, or ~/.cache/reftrain; "" when neither variable is set.
std::string user_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/reftrain";
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.cache/reftrain" : "";
}

// A token cache is llm.c's token file whose header also holds, after the count, this mark and
// the CRC-32C of the ids: one flipped bit in the ids is caught instead of trained on (llm.c's
// readers ignore the rest of the header).
constexpr int32_t kCacheMark = 0x31637472;  // "rtc1"

// What a token cache at its name holds.
struct CacheRead {
  std::vector<uint16_t> ids;  // empty unless the cache is good
  std::string unusable;       // why the name must not be read or written ("" = it may be)
  std::string damaged;        // why a file reftrain wrote was not used ("" = it was, or none)
};

CacheRead read_token_cache(const std::string& path, int vocab) {
  CacheRead r;
  struct stat st = {};
  if (::lstat(path.c_str(), &st) != 0) return r;  // not cached yet
  if (!S_ISREG(st.st_mode)) {
    r.unusable = "is a symbolic link, directory, device or FIFO, not a file reftrain wrote";
    return r;
  }
  int32_t header[256] = {};
  try {
    r.ids = read_llmc_token_file(path, header);
  } catch (const UserError& e) {
    r.damaged = e.what();
    return r;
  }
  // An older reftrain wrote no checksum: encoded again, without a word.
  if (header[3] != kCacheMark) return {};
  const uint32_t crc = crc32c(r.ids.data(), r.ids.size() * sizeof(uint16_t));
  if (uint32_t(header[4]) != crc) {
    r.damaged = "its checksum does not match its ids";
    r.ids.clear();
    return r;
  }
  for (size_t i = 0; i < r.ids.size(); ++i) {
    if (r.ids[i] >= vocab) {
      r.damaged = "id " + std::to_string(r.ids[i]) + " at position " + std::to_string(i) +
                  " is outside the tokenizer's " + std::to_string(vocab) + " tokens";
      r.ids.clear();
      return r;
    }
  }
  return r;
}

void write_token_cache(const std::string& path, const std::vector<uint16_t>& ids) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  int32_t header[256] = {20240520, 1, int32_t(ids.size()), kCacheMark,
                         int32_t(crc32c(ids.data(), ids.size() * sizeof(uint16_t)))};
  AtomicFileWriter out(path, AtomicFileWriter::Links::kRefuse);
  out.write(header, sizeof header);
  out.write(ids.data(), ids.size() * sizeof(uint16_t));
  out.commit();
}

// Where a file derived from `data` (a file or a directory) is cached: beside a file whose
// directory is writable, else in the user's cache directory; "" when there is none.
std::string cache_place(const std::string& data, const std::string& file) {
  const fs::path p(data);
  std::error_code ec;
  const bool is_dir = fs::is_directory(p, ec);
  const std::string name = (is_dir ? p.lexically_normal().filename() : p.filename()).string();
  const std::string named = (name.empty() ? std::string("data") : name) + "." + file;
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!is_dir && access(dir.c_str(), W_OK) == 0) return (dir / named).string();
  const std::string cache = user_cache_dir();
  return cache.empty() ? "" : cache + "/" + named;
}

// The cached auto tokenizer at `path`, or null when it is missing or unreadable (then it is
// trained and written again). As with the token cache, the name is predictable, so a link or
// another non-file there is neither read nor written through: an input error names it.
std::shared_ptr<const Tokenizer> read_auto_tokenizer(const std::string& path, int vocab) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) return nullptr;
  if (!fs::is_regular_file(st)) {
    throw input_error("--tokenizer auto's file " + path +
                      " is a symbolic link, directory or device, not a file reftrain wrote; "
                      "remove it, or pass --tokenizer bytes");
  }
  try {
    auto t = std::make_shared<const Tokenizer>(load_tokenizer(path));
    return t->vocab_size() <= vocab ? t : nullptr;
  } catch (const UserError&) {
    return nullptr;
  }
}

// Text to ids: the bytes tokenizer directly (nothing to cache), BPE through the cache.
std::vector<uint16_t> tokens_of(const std::string& text, const std::string& data,
                                const Tokenizer& tokenizer) {
  if (tokenizer.kind() == "bytes") return encode_bytes(text);
  return cached_tokens(text, data, tokenizer);
}

}  // namespace

std::shared_ptr<const Tokenizer> bytes_tokenizer() {
  static const auto bytes = std::make_shared<const Tokenizer>();
  return bytes;
}

TokenizerRecord tokenizer_record(const Tokenizer* t) {
  if (!t) return {"none", "", 0, 0};
  if (t->kind() == "bytes") return {};
  return {t->kind(), t->source(), t->hash(), t->vocab_size()};
}

std::shared_ptr<const Tokenizer> tokenizer_from_spec(const std::string& spec) {
  if (spec.empty() || spec == "bytes") return bytes_tokenizer();
  return std::make_shared<const Tokenizer>(load_tokenizer(spec));
}

namespace {

// Whether a recorded tokenizer of kind "gpt2" (read from GPT-2-style files) is GPT-2's own, the
// one "gpt2" finds today: only then may a missing source fall back to it. Another vocabulary in
// those files (a moved export) would otherwise be blamed on "gpt2"'s hash.
bool is_gpt2s(const TokenizerRecord& r) {
  if (r.kind != "gpt2") return false;
  try {
    return load_tokenizer("gpt2").hash() == r.hash;
  } catch (const UserError&) {
    return false;
  }
}

}  // namespace

std::shared_ptr<const Tokenizer> reload_tokenizer(const TokenizerRecord& r,
                                                  const std::string& spec) {
  if (r.kind == "bytes" && spec.empty()) return bytes_tokenizer();
  if (r.kind == "none" && spec.empty()) return nullptr;
  std::error_code ec;
  std::string from = spec;
  if (from.empty()) from = fs::exists(r.source, ec) || !is_gpt2s(r) ? r.source : "gpt2";
  if (from != "gpt2" && from != "bytes" && !fs::exists(from, ec)) {
    throw input_error("tokenizer " + from +
                      " does not exist; if it moved, pass it with --tokenizer");
  }
  std::shared_ptr<const Tokenizer> t = tokenizer_from_spec(from);
  const TokenizerRecord now = tokenizer_record(t.get());
  if (r.kind != "none" && (now.kind == "bytes") != (r.kind == "bytes")) {
    throw input_error("tokenizer " + from + " (" + now.kind + ") is not the " + r.kind +
                      " tokenizer this model was trained with");
  }
  if (r.kind != "none" && r.kind != "bytes" && now.hash != r.hash) {
    throw input_error("tokenizer " + from + " (" + t->hash_text() +
                      ") is not the one this model was trained with (" + data_hash_text(r.hash) +
                      ", " + r.source + ")");
  }
  return t;
}

uint64_t fnv1a64_bytes(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string token_cache_path(const std::string& data, const Tokenizer& tokenizer,
                             uint64_t text_hash) {
  return cache_place(
      data, tokenizer.kind() + "-" + hex16(tokenizer.hash()) + "." + hex16(text_hash) + ".tokens");
}

int auto_vocab_size(size_t train_bytes) {
  if (train_bytes < kAutoMinBytes) return kByteVocab;
  int vocab = kByteVocab;
  while (vocab < kAutoMaxVocab && size_t(vocab) * 2 * kAutoBytesPerId <= train_bytes) vocab *= 2;
  return vocab;
}

std::shared_ptr<const Tokenizer> auto_tokenizer(const std::string& text, const std::string& data) {
  const size_t train_bytes = text.size() * 9 / 10;
  const int vocab = auto_vocab_size(train_bytes);
  if (vocab <= kByteVocab) return bytes_tokenizer();
  const std::string path = cache_place(
      data, "auto" + std::to_string(vocab) + "." + hex16(fnv1a64_bytes(text)) + ".tokenizer.json");
  if (path.empty()) {
    throw input_error("--tokenizer auto has nowhere to keep the tokenizer it trains on " + data +
                      " (its directory is not writable and neither HOME nor XDG_CACHE_HOME is "
                      "set); set HOME or pass --tokenizer bytes");
  }
  if (auto cached = read_auto_tokenizer(path, vocab)) return cached;
  const Tokenizer trained = train_bpe(std::string_view(text).substr(0, train_bytes), vocab, "auto");
  try {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    const std::string json = to_tokenizer_json(trained);
    AtomicFileWriter out(path, AtomicFileWriter::Links::kRefuse);
    out.write(json.data(), json.size());
    out.commit();
  } catch (const UserError& e) {
    throw input_error("--tokenizer auto cannot keep its tokenizer at " + path + " (" + e.what() +
                      "); make that directory writable or pass --tokenizer bytes");
  }
  // Read back, so that its source is the file a resume or a sample finds it at.
  return std::make_shared<const Tokenizer>(load_tokenizer(path));
}

double bits_per_byte(double nats_per_token, uint64_t tokens, uint64_t bytes) {
  if (bytes == 0) return std::nan("");
  return nats_per_token / std::log(2.0) * double(tokens) / double(bytes);
}

uint64_t text_bytes(const std::vector<uint16_t>& ids, const Tokenizer& tokenizer) {
  uint64_t n = 0;
  const int V = tokenizer.vocab_size();
  for (uint16_t id : ids) n += id < V ? tokenizer.token_bytes(id).size() : 0;
  return n;
}

std::vector<uint16_t> cached_tokens(const std::string& text, const std::string& data,
                                    const Tokenizer& tokenizer) {
  if (tokenizer.vocab_size() > 65536) {
    throw input_error("tokenizer " + tokenizer.source() + " has " +
                      std::to_string(tokenizer.vocab_size()) +
                      " tokens; reftrain trains on uint16 ids, so at most 65536");
  }
  const std::string path = token_cache_path(data, tokenizer, fnv1a64_bytes(text));
  CacheRead cache = path.empty() ? CacheRead{} : read_token_cache(path, tokenizer.vocab_size());
  if (!cache.ids.empty() || text.empty()) return std::move(cache.ids);
  // Notes, not errors: the ids come from the text either way, but a cache that was not used
  // is named, so that its state is not a mystery.
  if (!cache.unusable.empty()) {
    std::fprintf(stderr, "note: token cache %s %s; it is neither read nor written\n", path.c_str(),
                 cache.unusable.c_str());
  } else if (!cache.damaged.empty()) {
    std::fprintf(stderr, "note: token cache %s is damaged (%s); encoding the text again\n",
                 path.c_str(), cache.damaged.c_str());
  }
  const std::vector<int32_t> encoded = tokenizer.encode(text);
  std::vector<uint16_t> ids(encoded.begin(), encoded.end());
  if (path.empty() || !cache.unusable.empty()) return ids;
  try {
    write_token_cache(path, ids);
  } catch (const UserError&) {
    // A cache that cannot be written costs the next run an encode, nothing else.
  }
  return ids;
}

Dataset load_text_file(const std::string& path, std::shared_ptr<const Tokenizer> tokenizer) {
  const std::string text = read_text(path);
  if (text.empty()) throw input_error("data file " + path + " is empty");
  if (!tokenizer) tokenizer = auto_tokenizer(text, path);
  std::vector<uint16_t> ids = tokens_of(text, path, *tokenizer);
  return split("text", path, std::move(ids), std::move(tokenizer));
}

Dataset load_fortunes(const std::string& dir, std::shared_ptr<const Tokenizer> tokenizer) {
  const std::string text = fortunes_text(dir);
  if (!tokenizer) tokenizer = auto_tokenizer(text, dir);
  std::vector<uint16_t> ids = tokens_of(text, dir, *tokenizer);
  return split("text", dir, std::move(ids), std::move(tokenizer));
}

std::string fortunes_text(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::is_directory(dir, ec)) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (e.is_symlink() || !e.is_regular_file() || e.path().extension() == ".dat") continue;
      files.push_back(e.path().string());
    }
  }
  if (files.empty()) {
    throw input_error("default corpus not found in " + dir +
                      ": install Debian's 'fortunes' package (scripts/install-deps.sh) or pass "
                      "--data FILE");
  }
  std::sort(files.begin(), files.end());
  std::string text;
  for (const std::string& f : files) {
    std::istringstream lines(read_text(f));
    for (std::string line; std::getline(lines, line);) {
      if (line != "%") text += line + "\n";
    }
  }
  return text;
}

Dataset load_llmc_tokens(const std::string& path) {
  return split("llmc-tokens", path, read_llmc_token_file(path), nullptr);
}

void write_llmc_token_file(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > size_t(INT32_MAX)) {
    throw input_error("token file " + path + ": " + std::to_string(tokens.size()) +
                      " tokens do not fit llm.c's int32 count");
  }
  int32_t header[256] = {20240520, 1, int32_t(tokens.size())};
  AtomicFileWriter out(path);
  out.write(header, sizeof header);
  out.write(tokens.data(), tokens.size() * sizeof(uint16_t));
  out.commit();
}

std::vector<uint16_t> read_llmc_token_file(const std::string& path, int32_t* header_out) {
  InputFile in(path, "token file");
  int32_t local[256];
  int32_t* header = header_out ? header_out : local;
  constexpr size_t kHeaderBytes = sizeof(local);
  if (in.size() < kHeaderBytes) {
    throw input_error(in.name() + " is shorter than llm.c's 1024-byte header");
  }
  in.read_at(0, header, kHeaderBytes, "the header");
  if (header[0] != 20240520) {
    throw input_error(in.name() + " has magic " + std::to_string(header[0]) +
                      ", expected llm.c's 20240520");
  }
  if (header[1] != 1) {
    throw input_error(in.name() + " has version " + std::to_string(header[1]) +
                      ", expected 1 (uint16 tokens)");
  }
  const int64_t count = header[2];
  // count is an int32, so count·2 cannot overflow; the file's size bounds the allocation.
  if (count < 0 || in.size() != kHeaderBytes + uint64_t(count) * 2) {
    // An odd trailing byte is named: halving it away read "2000 tokens but the file holds 2000".
    const uint64_t data = in.size() - kHeaderBytes;
    throw input_error(in.name() + " header says " + std::to_string(count) +
                      " tokens but the file holds " + std::to_string(data / 2) + " tokens" +
                      (data % 2 ? " and a trailing byte" : ""));
  }
  if (count == 0) throw input_error(in.name() + " holds no tokens");
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  in.read_at(kHeaderBytes, tokens.data(), uint64_t(count) * 2, "the tokens");
  return tokens;
}

void check_vocab(const Dataset& d, int vocab, const std::string& fix) {
  const std::vector<uint16_t>* parts[] = {&d.train, &d.val};
  size_t pos = 0;
  for (const auto* p : parts) {
    for (uint16_t t : *p) {
      if (t >= vocab) {
        throw input_error("token id " + std::to_string(t) + " at position " + std::to_string(pos) +
                          " of " + d.source + " is out of range for vocab " +
                          std::to_string(vocab) + "; " + fix);
      }
      ++pos;
    }
  }
}

BatchSampler::BatchSampler(const std::vector<uint16_t>& tokens, int B, int T, Mode mode,
                           uint64_t seed, RngStream stream)
    : tokens_(tokens), B_(B), T_(T), mode_(mode), rng_(seed, stream) {}

void BatchSampler::fill(uint64_t k, int32_t* inputs, int32_t* targets) const {
  const size_t BT = size_t(B_) * T_;
  const size_t nb = (tokens_.size() - 1) / BT;
  for (int b = 0; b < B_; ++b) {
    const size_t start = mode_ == Mode::kSequential ? (k % nb) * BT + size_t(b) * T_
                                                    : rng_.below(tokens_.size() - T_, k * B_ + b);
    for (int t = 0; t < T_; ++t) {
      inputs[size_t(b) * T_ + t] = tokens_[start + t];
      targets[size_t(b) * T_ + t] = tokens_[start + t + 1];
    }
  }
}

void check_batch_fits(const std::vector<uint16_t>& tokens, const std::string& what,
                      const std::string& source, int B, int T, BatchSampler::Mode mode) {
  const size_t need = mode == BatchSampler::Mode::kSequential ? size_t(B) * T + 1 : size_t(T) + 1;
  if (tokens.size() < need) {
    throw input_error("data " + source + " is too short: its " + what + " split has " +
                      std::to_string(tokens.size()) + " tokens, one batch needs " +
                      std::to_string(need) + "; use more data or a smaller --batch/--seq");
  }
}

}  // namespace reftrain
