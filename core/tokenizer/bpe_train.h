// Training a byte-level BPE tokenizer on a text (`reftrain tokenizer train`).
//
// The text is pre-tokenized with GPT-2's pattern (pretokenize.h) and the distinct chunks are
// counted; every chunk starts as its bytes. Then, until the vocab is full: the adjacent pair of
// tokens that occurs most often (over all chunks, weighted by their counts) becomes a new token,
// replacing every occurrence of the pair, left to right. Ties go to the pair whose tokens'
// bytes are smallest: (bytes(left), bytes(right)) compared lexicographically, byte by byte as
// unsigned values. The counts are kept incrementally (docs/kernels/13_tokenizer.md): a merge
// touches only the occurrences of its pair (not the whole chunks holding them, which in text
// without whitespace can be the whole text), and a heap with lazy deletion yields the next pair.
//
// Vocab: ids 0..255 the bytes in GPT-2's order (byte_level.h), then one id per merge whose
// result is new (a merge can rebuild a token an earlier merge made: "ab"+"c" and "a"+"bc";
// the second adds a merge but no id), then <|endoftext|> as the last id. The result is the same
// bytes whatever the thread count: threads only count chunks, in pieces fixed by the text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace reftrain {

constexpr int kMinTrainVocab = 257;    // the 256 bytes and <|endoftext|>: no merge
constexpr int kMaxTrainVocab = 65536;  // ids fit the uint16 token files reftrain trains from

struct BpeTrainStats {
  int64_t bytes = 0;          // the training text's size
  int64_t chunks = 0;         // pre-tokenized chunks in it
  int64_t unique_chunks = 0;  // distinct ones
  int64_t tokens = 0;         // the text's length in the trained tokens
  int64_t merges = 0;
  bool ran_out = false;  // the text had no pair left before the vocab was full
};

// The distinct chunks of `text` with their counts, sorted by their bytes. The text is cut into
// pieces of about `piece_bytes` only where a chunk boundary is certain (so the chunks are those
// of the whole text), and the pieces are counted on OpenMP threads.
std::vector<std::pair<std::string, int64_t>> count_chunks(std::string_view text,
                                                          size_t piece_bytes = size_t(1) << 20);

// A tokenizer of `vocab_size` ids (kMinTrainVocab..kMaxTrainVocab, <|endoftext|> included)
// trained on `text`; kind "bpe", source `source`. Fewer ids when the text runs out of pairs
// (stats->ran_out).
Tokenizer train_bpe(std::string_view text, int vocab_size, const std::string& source,
                    BpeTrainStats* stats = nullptr);

}  // namespace reftrain
