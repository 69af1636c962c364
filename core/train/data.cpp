#include "core/train/data.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/base/error.h"
#include "core/formats/input_file.h"

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

Dataset split(std::string kind, std::string source, std::vector<uint16_t> tokens) {
  Dataset d;
  d.kind = std::move(kind);
  d.source = std::move(source);
  d.hash = fnv1a64(tokens);
  const size_t n_train = tokens.size() * 9 / 10;
  d.val.assign(tokens.begin() + std::ptrdiff_t(n_train), tokens.end());
  tokens.resize(n_train);
  d.train = std::move(tokens);
  return d;
}

std::string read_text(const std::string& path) {
  return InputFile(path, "data file").read_all();
}

}  // namespace

Dataset load_text_file(const std::string& path) {
  const std::string text = read_text(path);
  if (text.empty()) throw input_error("data file " + path + " is empty");
  return split("text", path, encode_bytes(text));
}

Dataset load_fortunes(const std::string& dir) {
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
  return split("text", dir, encode_bytes(text));
}

Dataset load_llmc_tokens(const std::string& path) {
  InputFile in(path, "token file");
  int32_t header[256];
  if (in.size() < sizeof(header)) {
    throw input_error(in.name() + " is shorter than llm.c's 1024-byte header");
  }
  in.read_at(0, header, sizeof(header), "the header");
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
  if (count < 0 || in.size() != sizeof(header) + uint64_t(count) * 2) {
    // An odd trailing byte is named: halving it away read "2000 tokens but the file holds 2000".
    const uint64_t data = in.size() - sizeof(header);
    throw input_error(in.name() + " header says " + std::to_string(count) +
                      " tokens but the file holds " + std::to_string(data / 2) + " tokens" +
                      (data % 2 ? " and a trailing byte" : ""));
  }
  if (count == 0) throw input_error(in.name() + " holds no tokens");
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  in.read_at(sizeof(header), tokens.data(), uint64_t(count) * 2, "the tokens");
  return split("llmc-tokens", path, std::move(tokens));
}

void check_vocab(const Dataset& d, int vocab) {
  const std::vector<uint16_t>* parts[] = {&d.train, &d.val};
  size_t pos = 0;
  for (const auto* p : parts) {
    for (uint16_t t : *p) {
      if (t >= vocab) {
        throw input_error("token id " + std::to_string(t) + " at position " + std::to_string(pos) +
                          " of " + d.source + " is out of range for vocab " +
                          std::to_string(vocab) + "; use a preset with a larger vocabulary");
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
