#include "core/tokenizer/tokenizer.h"

#include <cstdio>
#include <queue>

#include "core/base/error.h"
#include "core/tokenizer/pretokenize.h"

namespace reftrain {

namespace {

void append_int32(std::string& out, int64_t value) {
  const uint32_t v = uint32_t(int32_t(value));
  for (int b = 0; b < 4; ++b) out += char((v >> (8 * b)) & 0xff);
}

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string id_text(int32_t id, const std::string& bytes) {
  return "token " + std::to_string(id) + " " + printable(bytes);
}

}  // namespace

Tokenizer::Tokenizer() : kind_("bytes"), source_("bytes"), vocab_(256) {
  for (int b = 0; b < 256; ++b) vocab_[size_t(b)] = std::string(1, char(b)), byte_token_[b] = b;
  hash_ = fnv1a64(hash_input());
}

Tokenizer Tokenizer::from_bpe(std::string kind, std::string source, std::vector<std::string> vocab,
                              const std::vector<std::pair<int32_t, int32_t>>& merges, int32_t eot) {
  Tokenizer t;
  t.kind_ = std::move(kind);
  t.source_ = std::move(source);
  t.vocab_ = std::move(vocab);
  t.eot_ = eot;
  t.merge_of_.clear();
  const std::string& src = t.source_;
  const int32_t n = int32_t(t.vocab_.size());
  if (eot >= n)
    throw input_error(src + ": the end-of-text id " + std::to_string(eot) +
                      " is outside the vocab of " + std::to_string(n));
  // Every token but the end-of-text one by its bytes; each byte as a one-byte token.
  std::unordered_map<std::string, int32_t> id_of;
  t.byte_token_.fill(-1);
  for (int32_t id = 0; id < n; ++id) {
    if (id == eot) continue;
    const std::string& bytes = t.vocab_[size_t(id)];
    if (bytes.empty()) throw input_error(src + ": token " + std::to_string(id) + " is empty");
    const auto [it, fresh] = id_of.emplace(bytes, id);
    if (!fresh) {
      throw input_error(src + ": " + id_text(id, bytes) + " repeats token " +
                        std::to_string(it->second));
    }
    if (bytes.size() == 1) t.byte_token_[static_cast<unsigned char>(bytes[0])] = id;
  }
  for (int b = 0; b < 256; ++b) {
    if (t.byte_token_[b] < 0) {
      throw input_error(src + ": the vocab has no token for the byte " +
                        printable(std::string(1, char(b))) + "; a byte-level vocab holds all 256");
    }
  }
  // A merge may only join tokens that exist by then: bytes, or results of earlier merges.
  std::vector<bool> made(size_t(n), false);
  for (int b = 0; b < 256; ++b) made[size_t(t.byte_token_[b])] = true;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = merges[rank];
    const std::string where = src + ": merge " + std::to_string(rank + 1);
    for (const int32_t part : {left, right}) {
      if (part < 0 || part >= n || part == eot || !made[size_t(part)]) {
        throw input_error(where + " joins " +
                          (part < 0 || part >= n ? "token " + std::to_string(part)
                                                 : id_text(part, t.vocab_[size_t(part)])) +
                          ", which is neither a byte nor the result of an earlier merge");
      }
    }
    const std::string joined = t.vocab_[size_t(left)] + t.vocab_[size_t(right)];
    const auto result = id_of.find(joined);
    if (result == id_of.end()) {
      throw input_error(where + " makes " + printable(joined) + ", which is not in the vocab");
    }
    if (!t.merge_of_.emplace(pair_key(left, right), std::make_pair(int32_t(rank), result->second))
             .second) {
      throw input_error(where + " repeats merge " +
                        std::to_string(t.merge_of_[pair_key(left, right)].first + 1));
    }
    made[size_t(result->second)] = true;
    t.merges_.push_back({left, right, result->second});
  }
  for (int32_t id = 0; id < n; ++id) {
    if (id != eot && !made[size_t(id)]) {
      throw input_error(src + ": " + id_text(id, t.vocab_[size_t(id)]) +
                        " is neither a byte nor the result of a merge");
    }
  }
  if (eot >= 0) t.vocab_[size_t(eot)] = kEndOfText;
  t.hash_ = fnv1a64(t.hash_input());
  return t;
}

std::string Tokenizer::hash_text() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(hash_));
  return buf;
}

std::string Tokenizer::hash_input() const {
  std::string s = "reftrain-tokenizer-v1\n";
  append_int32(s, int64_t(vocab_.size()));
  for (const std::string& bytes : vocab_) append_int32(s, int64_t(bytes.size())), s += bytes;
  append_int32(s, eot_);
  append_int32(s, int64_t(merges_.size()));
  for (const Merge& m : merges_) append_int32(s, m.left), append_int32(s, m.right);
  return s;
}

// GPT-2's bpe(): find the lowest-ranked adjacent pair, merge every occurrence of it from left
// to right (an occurrence overlapping one just merged is skipped), repeat until no adjacent
// pair is a merge. The candidates wait in a heap ordered by (rank, position); entries made
// stale by a merge are recognised by their tokens and dropped. All occurrences of one rank are
// merged before the pairs those merges create are considered, as GPT-2 does.
void Tokenizer::encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const {
  const int32_t n = int32_t(chunk.size());
  if (n == 0) return;
  std::vector<int32_t> sym(chunk.size()), next(chunk.size()), prev(chunk.size());
  for (int32_t i = 0; i < n; ++i) {
    sym[size_t(i)] = byte_token_[static_cast<unsigned char>(chunk[size_t(i)])];
    prev[size_t(i)] = i - 1;
    next[size_t(i)] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank, pos, left, right;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || next[size_t(pos)] < 0) return;
    const auto m = merge_of_.find(pair_key(sym[size_t(pos)], sym[size_t(next[size_t(pos)])]));
    if (m != merge_of_.end()) {
      heap.push({m->second.first, pos, sym[size_t(pos)], sym[size_t(next[size_t(pos)])]});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  std::vector<int32_t> merged_at;
  while (!heap.empty()) {
    const int32_t rank = heap.top().rank;
    merged_at.clear();
    while (!heap.empty() && heap.top().rank == rank) {
      const Candidate c = heap.top();
      heap.pop();
      const int32_t right = next[size_t(c.pos)];
      if (sym[size_t(c.pos)] != c.left || right < 0 || sym[size_t(right)] != c.right) continue;
      sym[size_t(c.pos)] = merges_[size_t(rank)].result;
      sym[size_t(right)] = -1;
      next[size_t(c.pos)] = next[size_t(right)];
      if (next[size_t(right)] >= 0) prev[size_t(next[size_t(right)])] = c.pos;
      merged_at.push_back(c.pos);
    }
    for (const int32_t pos : merged_at) {
      if (sym[size_t(pos)] < 0) continue;
      consider(prev[size_t(pos)]);
      consider(pos);
    }
  }
  for (int32_t i = 0; i >= 0; i = next[size_t(i)]) out.push_back(sym[size_t(i)]);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  if (merges_.empty()) {
    for (const char c : text) ids.push_back(byte_token_[static_cast<unsigned char>(c)]);
    return ids;
  }
  // Texts repeat their words: each distinct chunk is merged once per call. (Keys view `text`.)
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> seen;
  std::vector<int32_t> seen_ids;
  for_each_pretoken(text, [&](std::string_view chunk) {
    if (chunk.size() == 1) {
      ids.push_back(byte_token_[static_cast<unsigned char>(chunk[0])]);
      return;
    }
    const auto it = seen.find(chunk);
    if (it != seen.end()) {
      ids.insert(ids.end(), seen_ids.begin() + it->second.first,
                 seen_ids.begin() + it->second.first + it->second.second);
      return;
    }
    const size_t before = ids.size();
    encode_chunk(chunk, ids);
    if (seen.size() >= (1u << 20)) seen.clear(), seen_ids.clear();  // bounded memory
    seen.emplace(chunk, std::make_pair(uint32_t(seen_ids.size()), uint32_t(ids.size() - before)));
    seen_ids.insert(seen_ids.end(), ids.begin() + std::ptrdiff_t(before), ids.end());
  });
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      throw input_error("token id " + std::to_string(ids[i]) + " at position " +
                        std::to_string(i + 1) + " is outside the vocab [0, " +
                        std::to_string(vocab_size()) + ") of tokenizer " + source_);
    }
    text += vocab_[size_t(ids[i])];
  }
  return text;
}

}  // namespace reftrain
