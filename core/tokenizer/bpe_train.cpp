#include "core/tokenizer/bpe_train.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <functional>
#include <queue>
#include <unordered_map>

#include "core/base/error.h"
#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/pretokenize.h"

namespace reftrain {

namespace {

bool printable_ascii(char c) {
  return c >= '!' && c <= '~';
}

// Cut points where the chunks of the pieces are those of the whole text: p with text[p-2] and
// text[p] printable ASCII (not space) and text[p-1] == '\n'. The chunk holding that '\n' is
// whitespace only, so it is exactly "\n" in both the whole text (where `\s+` takes it before a
// non-space) and the piece that ends with it (where `\s+(?!\S)` takes it at the end).
std::vector<size_t> piece_starts(std::string_view text, size_t piece_bytes) {
  std::vector<size_t> starts = {0};
  for (size_t p = piece_bytes; p < text.size(); p += piece_bytes) {
    p = std::max(p, starts.back() + 2);
    while (p < text.size() &&
           !(printable_ascii(text[p - 2]) && text[p - 1] == '\n' && printable_ascii(text[p]))) {
      ++p;
    }
    if (p < text.size()) starts.push_back(p);
  }
  starts.push_back(text.size());
  return starts;
}

int32_t left_of(uint64_t key) {
  return int32_t(key >> 32);
}
int32_t right_of(uint64_t key) {
  return int32_t(key & 0xffffffffu);
}

// The training state: the distinct chunks as token sequences laid end to end, the pair counts
// over them, where each pair occurs, and the heap of candidate merges.
//
// Every symbol of every chunk has a position in one array, linked to its neighbours in its
// chunk; a merge joins the two symbols of each occurrence of its pair in place and changes
// only the pairs around it. So a merge costs the number of its occurrences, not the length of
// the chunks holding them: a long chunk (CJK text, DNA, base64, minified code, with no
// whitespace to split on) used to be rescanned whole by every merge that touched it.
class BpeTrainer {
 public:
  BpeTrainer(const std::vector<std::pair<std::string, int64_t>>& chunks);
  // One merge of the most frequent pair; false when no pair is left.
  bool merge_next();
  int64_t token_count() const { return tokens_; }

  std::vector<std::string> vocab;  // id -> bytes
  std::vector<std::pair<int32_t, int32_t>> merges;

 private:
  struct Candidate {
    int64_t count;
    uint64_t pair;
  };
  // Heap order: the higher count first, then the smaller (bytes(left), bytes(right)).
  bool lower_priority(const Candidate& a, const Candidate& b) const {
    if (a.count != b.count) return a.count < b.count;
    const std::string &al = vocab[size_t(left_of(a.pair))], &bl = vocab[size_t(left_of(b.pair))];
    if (al != bl) return al > bl;
    return vocab[size_t(right_of(a.pair))] > vocab[size_t(right_of(b.pair))];
  }
  // The pair starting at position `p` (whose right neighbour is `q`) appears or goes away.
  void change(uint32_t p, uint32_t q, int64_t sign);
  // Joins the pair (a, b) at position p into `merged`, when it is still there.
  void join_at(uint32_t p, int32_t a, int32_t b, int32_t merged);
  int32_t result_id(int32_t left, int32_t right);

  static constexpr uint32_t kNone = UINT32_MAX;
  std::vector<int32_t> symbol_;        // by position; -1 once joined into its left neighbour
  std::vector<uint32_t> prev_, next_;  // neighbours in the chunk, kNone at its ends
  std::vector<int64_t> weight_;        // by position: its chunk's count
  int64_t tokens_ = 0;                 // the text's length in the current tokens
  std::vector<std::pair<uint64_t, int64_t>> delta_;  // the current merge's count changes
  std::unordered_map<uint64_t, int64_t> pair_count_;
  // Where each pair may start (stale entries are skipped when the pair is merged).
  std::unordered_map<uint64_t, std::vector<uint32_t>> pair_at_;
  std::unordered_map<std::string, int32_t> id_of_;
  std::priority_queue<Candidate, std::vector<Candidate>,
                      std::function<bool(const Candidate&, const Candidate&)>>
      heap_;
};

BpeTrainer::BpeTrainer(const std::vector<std::pair<std::string, int64_t>>& chunks)
    : heap_([this](const Candidate& a, const Candidate& b) { return lower_priority(a, b); }) {
  const auto& order = gpt2_byte_order();
  std::array<int32_t, 256> byte_id{};
  for (int i = 0; i < 256; ++i) {
    vocab.push_back(std::string(1, char(order[size_t(i)])));
    byte_id[order[size_t(i)]] = i;
    id_of_[vocab.back()] = i;
  }
  size_t total = 0;
  for (const auto& chunk : chunks) total += chunk.first.size();
  if (total >= kNone) throw input_error("the training text's distinct chunks exceed 4 GiB");
  symbol_.reserve(total), prev_.reserve(total), next_.reserve(total), weight_.reserve(total);
  for (const auto& [bytes, count] : chunks) {
    const uint32_t first = uint32_t(symbol_.size());
    for (size_t i = 0; i < bytes.size(); ++i) {
      const uint32_t p = first + uint32_t(i);
      symbol_.push_back(byte_id[static_cast<unsigned char>(bytes[i])]);
      prev_.push_back(i == 0 ? kNone : p - 1);
      next_.push_back(i + 1 == bytes.size() ? kNone : p + 1);
      weight_.push_back(count);
      if (i > 0) change(p - 1, p, +1);
    }
    tokens_ += int64_t(bytes.size()) * count;
  }
  for (const auto& [key, n] : delta_) pair_count_[key] += n;
  delta_.clear();
  for (const auto& [key, count] : pair_count_) heap_.push({count, key});
}

void BpeTrainer::change(uint32_t p, uint32_t q, int64_t sign) {
  const uint64_t key = pair_key(symbol_[p], symbol_[q]);
  delta_.push_back({key, sign * weight_[p]});
  if (sign > 0) pair_at_[key].push_back(p);
}

void BpeTrainer::join_at(uint32_t p, int32_t a, int32_t b, int32_t merged) {
  const uint32_t q = next_[p];
  if (symbol_[p] != a || q == kNone || symbol_[q] != b) return;  // an earlier join took it
  const uint32_t before = prev_[p], after = next_[q];
  if (before != kNone) change(before, p, -1);
  change(p, q, -1);
  if (after != kNone) change(q, after, -1);
  symbol_[p] = merged, symbol_[q] = -1;
  next_[p] = after;
  if (after != kNone) prev_[after] = p;
  if (before != kNone) change(before, p, +1);
  if (after != kNone) change(p, after, +1);
  tokens_ -= weight_[p];
}

// The id of bytes(left) + bytes(right): an existing token's, or a new one.
int32_t BpeTrainer::result_id(int32_t left, int32_t right) {
  const std::string bytes = vocab[size_t(left)] + vocab[size_t(right)];
  const auto [it, fresh] = id_of_.emplace(bytes, int32_t(vocab.size()));
  if (fresh) vocab.push_back(bytes);
  return it->second;
}

bool BpeTrainer::merge_next() {
  // The best candidate whose count is current (a changed count was pushed anew).
  uint64_t best = 0;
  for (;;) {
    if (heap_.empty()) return false;
    const Candidate c = heap_.top();
    heap_.pop();
    const auto it = pair_count_.find(c.pair);
    if (it != pair_count_.end() && it->second == c.count) {
      best = c.pair;
      break;
    }
  }
  const int32_t a = left_of(best), b = right_of(best);
  const int32_t merged = result_id(a, b);
  merges.push_back({a, b});
  std::vector<uint32_t> where = std::move(pair_at_[best]);
  pair_at_.erase(best);
  // Ascending positions: within a chunk, occurrences are joined left to right, so "aaa" with
  // (a, a) becomes "aa a".
  std::sort(where.begin(), where.end());
  where.erase(std::unique(where.begin(), where.end()), where.end());
  for (const uint32_t p : where) join_at(p, a, b, merged);
  // Net change per pair (sorted, so the order of the pushes below is fixed too).
  std::sort(delta_.begin(), delta_.end());
  for (size_t i = 0; i < delta_.size();) {
    const uint64_t key = delta_[i].first;
    int64_t net = 0;
    for (; i < delta_.size() && delta_[i].first == key; ++i) net += delta_[i].second;
    if (net == 0) continue;
    int64_t& count = pair_count_[key];
    count += net;
    if (count > 0) {
      heap_.push({count, key});
    } else {
      pair_count_.erase(key);
      pair_at_.erase(key);
    }
  }
  delta_.clear();
  return true;
}

}  // namespace

std::vector<std::pair<std::string, int64_t>> count_chunks(std::string_view text,
                                                          size_t piece_bytes) {
  const std::vector<size_t> starts = piece_starts(text, std::max<size_t>(piece_bytes, 1));
  const int pieces = int(starts.size()) - 1;
  std::vector<std::unordered_map<std::string_view, int64_t>> counted{size_t(pieces)};
#pragma omp parallel for schedule(dynamic, 1)
  for (int p = 0; p < pieces; ++p) {
    const std::string_view piece =
        text.substr(starts[size_t(p)], starts[size_t(p) + 1] - starts[size_t(p)]);
    for_each_pretoken(piece, [&](std::string_view chunk) { ++counted[size_t(p)][chunk]; });
  }
  std::unordered_map<std::string_view, int64_t> all = std::move(counted[0]);
  for (int p = 1; p < pieces; ++p) {
    for (const auto& [chunk, n] : counted[size_t(p)]) all[chunk] += n;
  }
  std::vector<std::pair<std::string, int64_t>> out;
  out.reserve(all.size());
  for (const auto& [chunk, n] : all) out.emplace_back(std::string(chunk), n);
  std::sort(out.begin(), out.end());
  return out;
}

Tokenizer train_bpe(std::string_view text, int vocab_size, const std::string& source,
                    BpeTrainStats* stats) {
  if (vocab_size < kMinTrainVocab || vocab_size > kMaxTrainVocab) {
    throw usage_error("--vocab-size " + std::to_string(vocab_size) + " is outside [" +
                      std::to_string(kMinTrainVocab) + ", " + std::to_string(kMaxTrainVocab) +
                      "]: 256 byte tokens and <|endoftext|> at least; ids must fit 16 bits");
  }
  const auto chunks = count_chunks(text);
  BpeTrainer trainer(chunks);
  bool ran_out = false;
  while (int(trainer.vocab.size()) < vocab_size - 1) {
    if (!trainer.merge_next()) {
      ran_out = true;
      break;
    }
  }
  if (stats) {
    stats->bytes = int64_t(text.size());
    stats->chunks = 0;
    for (const auto& c : chunks) stats->chunks += c.second;
    stats->unique_chunks = int64_t(chunks.size());
    stats->tokens = trainer.token_count();
    stats->merges = int64_t(trainer.merges.size());
    stats->ran_out = ran_out;
  }
  std::vector<std::string> vocab = std::move(trainer.vocab);
  const int32_t eot = int32_t(vocab.size());
  vocab.push_back(kEndOfText);
  return Tokenizer::from_bpe("bpe", source, std::move(vocab), trainer.merges, eot);
}

}  // namespace reftrain
