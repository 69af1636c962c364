// Training data: the byte-level tokenizer, the corpora (any text file, the Debian `fortunes`
// package, llm.c token files), the 90/10 train/val split and the batch samplers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/rng.h"

namespace reftrain {

// Byte-level tokenizer: token = byte value, vocab 256; decodes any UTF-8 text losslessly.
constexpr int kByteVocab = 256;
std::vector<uint16_t> encode_bytes(const std::string& text);
std::string decode_bytes(const std::vector<int32_t>& tokens);

constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

struct Dataset {
  std::string kind;    // "text" or "llmc-tokens"
  std::string source;  // file or directory
  uint64_t hash = 0;   // FNV-1a 64 of all tokens (as little-endian uint16), before the split
  std::vector<uint16_t> train, val;  // first 90% and last 10%
};

Dataset load_text_file(const std::string& path);
// Every fortune file in `dir` (the .dat indexes and .u8 links skipped), in name order, with
// the '%' separator lines dropped.
Dataset load_fortunes(const std::string& dir = kFortunesDir);
// llm.c's token file: int32 header[256] (magic 20240520, version 1, count), then uint16 tokens.
Dataset load_llmc_tokens(const std::string& path);

// Dataset::hash as traces and checkpoints write it: "fnv1a64:<16 lowercase hex digits>".
std::string data_hash_text(uint64_t hash);

// Input error naming the first token ≥ vocab and its position.
void check_vocab(const Dataset& d, int vocab);

// Batches of B rows of T+1 consecutive tokens: inputs are the first T, targets the last T.
//   random:     row b of batch k starts at CounterRng(seed, stream).below(n - T, k·B + b),
//               as nanoGPT's get_batch, but reproducible from the seed alone.
//   sequential: batch k starts at token (k mod nb)·B·T, nb = ⌊(n-1)/(B·T)⌋: llm.c's loader
//               without shuffling, so steps match its train_gpt2 on the same token file.
class BatchSampler {
 public:
  enum class Mode { kRandom, kSequential };
  BatchSampler(const std::vector<uint16_t>& tokens, int B, int T, Mode mode, uint64_t seed,
               RngStream stream);
  void fill(uint64_t k, int32_t* inputs, int32_t* targets) const;

 private:
  const std::vector<uint16_t>& tokens_;
  int B_, T_;
  Mode mode_;
  CounterRng rng_;
};

// Input error when `tokens` (a split named `what`) cannot fill one batch in `mode`.
void check_batch_fits(const std::vector<uint16_t>& tokens, const std::string& what,
                      const std::string& source, int B, int T, BatchSampler::Mode mode);

}  // namespace reftrain
