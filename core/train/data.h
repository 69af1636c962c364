// Training data: the corpora (any text file, the Debian `fortunes` package, llm.c token files)
// as token ids under a tokenizer (core/tokenizer: bytes, GPT-2's BPE, or one of your own), the
// token cache, the 90/10 train/val split and the batch samplers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/rng.h"
#include "core/tokenizer/tokenizer.h"

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
  // The text bytes the ids of each split stand for (their tokens' bytes, summed); 0 when
  // unknown (llm.c ids without a tokenizer). Bits per byte = nats per token / ln 2 · tokens /
  // bytes: a loss every tokenizer can be compared on.
  uint64_t train_bytes = 0, val_bytes = 0;
  // What the ids mean: the tokenizer that encoded the text (bytes by default); for llm.c token
  // ids, the one --tokenizer named, or null (ids without a known tokenizer).
  std::shared_ptr<const Tokenizer> tokenizer;
};

// A dataset's tokenizer as traces and checkpoints record it, and how a later run (a resume, a
// sample) gets it back.
struct TokenizerRecord {
  std::string kind = "bytes";  // "bytes", "gpt2", "bpe", or "none": llm.c ids of unknown meaning
  std::string source;          // the absolute path it was read from (BPE kinds)
  uint64_t hash = 0;           // Tokenizer::hash (BPE kinds)
  int vocab = 256;
};
TokenizerRecord tokenizer_record(const Tokenizer* tokenizer);
// The recorded tokenizer, loaded again: bytes, null for "none", else read from `spec` when
// given (a user's --tokenizer; "gpt2" included), from the recorded source, or for kind gpt2
// from where "gpt2" is found today. An input error when the file is gone (naming --tokenizer,
// the way to point at a moved one) or its hash differs from the recorded one.
std::shared_ptr<const Tokenizer> reload_tokenizer(const TokenizerRecord& record,
                                                  const std::string& spec = "");
// A tokenizer from a --tokenizer value ("bytes" or load_tokenizer's specs).
std::shared_ptr<const Tokenizer> tokenizer_from_spec(const std::string& spec);

// The bytes tokenizer, shared.
std::shared_ptr<const Tokenizer> bytes_tokenizer();

// `--tokenizer auto`: the vocabulary of the BPE trained on a training split of `train_bytes`
// bytes, or 256 for bytes. Measured (bench/laptop_sweep.sh MODE=vocab; bench/RESULTS.md,
// "Issue 31"): bytes under kAutoMinBytes (a BPE's ids get too little text each to learn their
// embeddings in a laptop's run, and its validation loss climbs); above, the largest power of
// two ≤ train_bytes / kAutoBytesPerId, capped at kAutoMaxVocab.
constexpr size_t kAutoMinBytes = size_t(256) << 10;
constexpr size_t kAutoBytesPerId = 128;
constexpr int kAutoMaxVocab = 4096;
int auto_vocab_size(size_t train_bytes);
// The tokenizer `auto` picks for `text` read from `data` (a file or the fortunes directory):
// bytes, or a BPE of auto_vocab_size(90 % of the text) trained on the first 90 % of the text
// (the training split, so validation text stays unseen) and cached as a tokenizer.json beside
// the token cache, "NAME.auto<V>.<text hash>.tokenizer.json" (token_cache_path's places). A
// later run with the same text reads it back. An input error when no cache place is writable
// (the model's tokenizer must stay on disk for sample, eval and resume).
std::shared_ptr<const Tokenizer> auto_tokenizer(const std::string& text, const std::string& data);

// A text file's tokens under `tokenizer`. A BPE tokenizer encodes the text once and caches the
// ids (token_cache_path); a later load reads the cache. A null tokenizer: auto_tokenizer's.
Dataset load_text_file(const std::string& path,
                       std::shared_ptr<const Tokenizer> tokenizer = bytes_tokenizer());
// Every fortune file in `dir` (the .dat indexes and .u8 links skipped), in name order, with
// the '%' separator lines dropped. A null tokenizer: auto_tokenizer's.
Dataset load_fortunes(const std::string& dir = kFortunesDir,
                      std::shared_ptr<const Tokenizer> tokenizer = bytes_tokenizer());
// The text of the fortunes corpus, as load_fortunes reads it.
std::string fortunes_text(const std::string& dir = kFortunesDir);

// Where the ids of `data` (a file, or the fortunes directory) under `tokenizer` are cached:
// beside the data, "NAME.<tokenizer kind>-<tokenizer hash>.<text hash>.tokens" (both FNV-1a 64,
// 16 hex digits), or in $XDG_CACHE_HOME/reftrain (~/.cache/reftrain) when the data's directory
// is not writable or the data is a directory. The file is llm.c's uint16 token format.
std::string token_cache_path(const std::string& data, const Tokenizer& tokenizer,
                             uint64_t text_hash);
// The ids of `text` under `tokenizer`: from the cache file when it is a regular file holding a
// valid token file whose checksum (in its header) matches its ids, all < the vocabulary;
// otherwise encoded and written there (atomically; a cache that cannot be written is skipped,
// the ids are still returned). A damaged cache, or a link or other non-file at its name (which
// is neither read nor written through: the name is predictable), gets a note on stderr naming
// it. An input error when the vocabulary does not fit uint16 ids (more than 65536 tokens).
std::vector<uint16_t> cached_tokens(const std::string& text, const std::string& data,
                                    const Tokenizer& tokenizer);
// Bits per byte of a loss of `nats_per_token` over `tokens` ids that stand for `bytes` bytes of
// text: nats / ln 2 · tokens / bytes; NaN when the bytes are unknown (0).
double bits_per_byte(double nats_per_token, uint64_t tokens, uint64_t bytes);
// The bytes `ids` stand for under `tokenizer`: the sum of their tokens' lengths.
uint64_t text_bytes(const std::vector<uint16_t>& ids, const Tokenizer& tokenizer);
// FNV-1a 64 of bytes.
uint64_t fnv1a64_bytes(std::string_view bytes);
// llm.c's token file: int32 header[256] (magic 20240520, version 1, count), then uint16 tokens.
// The dataset's tokenizer is null: the caller sets it when it knows what the ids mean.
Dataset load_llmc_tokens(const std::string& path);
// The ids of a token file; `header`, when given, receives its 256 header ints.
std::vector<uint16_t> read_llmc_token_file(const std::string& path, int32_t* header = nullptr);
// Writes `tokens` in that format, atomically.
void write_llmc_token_file(const std::string& path, const std::vector<uint16_t>& tokens);

// Dataset::hash as traces and checkpoints write it: "fnv1a64:<16 lowercase hex digits>".
std::string data_hash_text(uint64_t hash);

// Input error naming the first token ≥ vocab and its position, and `fix`.
void check_vocab(const Dataset& d, int vocab,
                 const std::string& fix = "use a preset with a larger vocabulary");

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
